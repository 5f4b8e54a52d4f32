"""What ``tfnative watch`` was asked for, built once by the CLI (``cli/watch.py``) and handed down whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from ..snapshot.options import StackOptions

ON_HANG = ("report", "kill", "core")
DEFAULT_HANG_AFTER = 300.0
DEFAULT_INTERVAL = 5.0  # or hang_after / 4 where that is less (interval_for)


def interval_for(hang_after: float, asked: Optional[float]) -> float:
    """The seconds between two readings: ``asked``, else 5 s or a quarter of ``hang_after`` where that is
    less (a hang is then seen within ``hang_after`` plus one interval), never under 0.1 s."""
    if asked is not None:
        return max(0.1, asked)
    return max(0.1, min(DEFAULT_INTERVAL, hang_after / 4.0))


@dataclass
class WatchOptions:
    """How to watch: when a job is hung, how often to look, what to do then, where the reports go."""

    hang_after: float = DEFAULT_HANG_AFTER  # seconds without progress of any process: hung
    interval: float = DEFAULT_INTERVAL  # seconds between two readings of the counters
    on_hang: str = "report"  # report | kill | core
    out_dir: Optional[str] = None  # --out DIR: text, JSON Lines, HTML of each report
    json_path: Optional[str] = None  # --json FILE: JSON Lines of the (last) report
    progress_file: Optional[str] = None  # the step signal: once it moved, hung when it stops moving
    straggler_after: Optional[float] = None  # name a process that lags its peers this long
    kill_grace: float = 10.0  # --on-hang kill: seconds between SIGTERM and SIGKILL
    stack: StackOptions = field(default_factory=StackOptions)  # how each process's snapshot is taken and shown
    outlive: bool = False  # reports go to files: a lost terminal (SIGHUP, closed stdout) does not end the watch
    repro_check: bool = True  # --out DIR: run each crash's reproducer to check it (--no-repro-check: do not)

    def files(self) -> Optional[str]:
        """Where the reports are written besides standard output (``--out DIR``, ``--json FILE``), or None."""
        named = [p for p in (self.out_dir, self.json_path) if p and p != "-"]
        return " and ".join(named) or None


@dataclass
class WatchTarget:
    """What to watch: a job to start (``script`` or ``module`` with ``args``, run by ``python``), or running
    processes (``pids``, every descendant of ``children`` that runs Python, those with ``envs``)."""

    script: Optional[str] = None
    module: Optional[str] = None
    args: List[str] = field(default_factory=list)
    python: str = "python3"
    pids: Tuple[int, ...] = ()
    children: Tuple[int, ...] = ()
    envs: Tuple[str, ...] = ()

    @property
    def running(self) -> bool:
        """Whether running processes are named (``--pid``, ``--children``, ``--env``)."""
        return bool(self.pids or self.children or self.envs)
