"""What ``tfnative stack`` was asked for, built once by the CLI (``cli/stack.py``) and handed down whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

from ..core.record import Record
from ..core.threads import Threads
from ..gdb.options import GdbOptions


@dataclass(repr=False, eq=False)
class StackOptions(Record):
    """How to take and show one process's snapshot (the same for each process of a many-process ``stack``)."""

    all_threads: bool = False  # -a: also threads that run no Python
    native_all: bool = False  # keep interpreter glue frames
    full: bool = False  # do not fold TensorFlow-internal frames
    json_path: Optional[str] = None  # --json FILE ("-": standard output, the text then goes to stderr)
    html_path: Optional[str] = None  # --html FILE: the flame graph page (output/flamegraph.py)
    speedscope_path: Optional[str] = None  # --speedscope FILE (output/speedscope.py)
    tree_path: Optional[str] = None  # --tree FILE: the processes' merged tree, as ``merge --tree`` writes it
    with_gdb: bool = False  # take the stacks through gdb
    samples: int = 1  # --samples N, --interval S apart
    interval: float = 1.0
    variables: bool = False  # --locals
    group: bool = False  # print identical thread stacks once
    nonblocking: bool = False  # --no-pause: never stop the process
    gdb: GdbOptions = field(default_factory=GdbOptions)

    @property
    def which(self) -> Threads:
        """The threads to show: every one with -a, else those that run Python."""
        return Threads.ALL if self.all_threads else Threads.PYTHON


@dataclass(repr=False, eq=False)
class Selection(Record):
    """Which processes a many-process ``stack`` reads (``--pid``, ``--children``, ``--match``, ``--env``) and the
    labels it adds to each document (``--label``)."""

    pids: Tuple[int, ...] = ()
    children: Tuple[int, ...] = ()
    patterns: Tuple[str, ...] = ()
    envs: Tuple[str, ...] = ()
    labels: Tuple[str, ...] = ()

    @property
    def one_pid(self) -> Optional[int]:
        """The pid when exactly one ``--pid`` and nothing else is given (the one-process ``stack``)."""
        if len(self.pids) == 1 and not (self.children or self.patterns or self.envs or self.labels):
            return self.pids[0]
        return None
