"""What the crash catcher keeps and reports of the job's processes (``watch/tracer.py``): a watched process
(``Watched``), a crash held for its report (``Held``, its ``Siginfo``), a process's end (``Exit``), and whether
a signal about to be delivered kills (``fatal``: a crash is one of ``CRASH_SIGNALS`` that does)."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Dict, List, Optional, Set

from ..core import procfs
from ..core.signals import signal_name
from ..sources.base import ThreadRegs

__all__ = ["CRASH_SIGNALS", "STOPPING", "Exit", "Held", "Siginfo", "Watched", "fatal"]

CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT,
                           signal.SIGTRAP, signal.SIGSYS})
STOPPING = frozenset({signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU})


@dataclass
class Exit:
    """A watched process ended (exit status as ``Popen.returncode``: the code, or -N for signal N)."""

    pid: int
    returncode: int
    core_dumped: bool = False

    @property
    def signal(self) -> Optional[str]:
        return signal_name(-self.returncode) if self.returncode < 0 else None


@dataclass
class Siginfo:
    """What a crash's siginfo says, for its report."""

    code: int = 0
    sender: Optional[int] = None  # the pid that sent it (kill, tgkill), where a process did
    address: Optional[int] = None  # the faulting address of a fault


class Watched:
    """A watched process: its traced threads, and whether they are held (a crash, a snapshot)."""

    def __init__(self, pid: int, own_child: bool) -> None:
        self.pid = pid
        self.own_child = own_child  # its parent is this process: its exit is its parent's to reap
        self.threads: Set[int] = set()
        self.held = False
        self.dying = False  # its fatal signal was delivered
        self.handled: Dict[int, int] = {}  # tid -> the crash signal last handed to the program's handler
        self.crash: Optional[Held] = None
        self.stopped: Dict[int, int] = {}  # tid -> the signal of its group stop (job control), until it runs again


@dataclass
class Held:
    """A crash waiting for its report (``CrashCatcher.poll``): the process held, the registers of its threads."""

    pid: int
    tid: int
    signo: int
    info: Siginfo
    threads: List[ThreadRegs]
    warnings: List[str]
    handler_ran: bool
    deadline: float
    taken: bool = False
    released: bool = False  # let go already (``CRASH_HOLD_S`` passed): no stacks


def fatal(pid: int, sig: int) -> bool:
    """Whether ``sig`` kills ``pid`` when delivered now: neither caught nor ignored (its default action, which
    for ``CRASH_SIGNALS`` is to die with a core)."""
    try:
        fields = procfs.status(pid)
        caught, ignored = int(fields.get("SigCgt", "0"), 16), int(fields.get("SigIgn", "0"), 16)
    except (OSError, ValueError):
        return False
    bit = 1 << (sig - 1)
    return not (caught & bit or ignored & bit)
