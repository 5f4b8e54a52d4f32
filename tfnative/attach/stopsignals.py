"""What a session knows of the script's signals beyond gdb's stop: our own SIGQUIT made a snapshot request
(``SnapshotOnQuit``), the child a SIGCHLD is about (``note_dead_children``), whether the script catches a
signal (``has_handler``), and a fault's signal raised again from the script's own handler (``reraised``).
"""

from __future__ import annotations

import os
import signal
from typing import List, Optional, Tuple

from ..core import procfs
from ..core.model import ChildDeath, Document, Event
from ..core.signals import signal_name
from ..core.threads import SIGNAL_FRAME
from ..errors import GdbError
from ..gdb.mi import Gdb
from ..output import report
from .targets import note_child

SNAPSHOT_REQUEST = "tfnative-snapshot"  # the record our SIGQUIT handler queues (see ``SnapshotOnQuit``)


class SnapshotOnQuit:
    """While a session runs, our SIGQUIT (Ctrl-\\) queues a snapshot request for the loop; ``restore`` ends it."""

    def __init__(self, gdb: Gdb) -> None:
        self.old = signal.getsignal(signal.SIGQUIT)
        signal.signal(signal.SIGQUIT, lambda signum, frame: gdb.post(SNAPSHOT_REQUEST))

    def restore(self) -> None:
        signal.signal(signal.SIGQUIT, self.old)


CLD_KILLED, CLD_DUMPED = 2, 3  # siginfo si_code of a SIGCHLD for a child killed by a signal


def sigchld_info(gdb: Gdb) -> Optional[Tuple[int, int, bool]]:
    """(pid, signal, core dumped) of the child a SIGCHLD stop is about, when it was killed by a signal."""
    try:
        code = int(gdb.command("-data-evaluate-expression $_siginfo.si_code")["value"])
        if code not in (CLD_KILLED, CLD_DUMPED):
            return None
        pid = int(gdb.command("-data-evaluate-expression $_siginfo._sifields._sigchld.si_pid")["value"])
        sig = int(gdb.command("-data-evaluate-expression $_siginfo._sifields._sigchld.si_status")["value"])
    except (GdbError, KeyError, ValueError):
        return None
    return pid, sig, code == CLD_DUMPED


def note_dead_children(gdb: Gdb, pid: int, doc: Document, printer: report.Printer) -> None:
    """At a SIGCHLD of the script: the child that died of a signal, named once (pid, name, signal).

    The signal's own siginfo says which child and how, even when the script
    reaps it at once; where gdb cannot read it, the script's zombie children
    (not reaped yet) are looked at instead.
    """
    found: List[Tuple[int, int, bool]] = []
    info = sigchld_info(gdb)
    if info is not None:
        found.append(info)
    else:
        for cpid in procfs.children(pid):
            status = procfs.exit_status(cpid)
            if status is not None and os.WIFSIGNALED(status):
                found.append((cpid, os.WTERMSIG(status), os.WCOREDUMP(status)))
    for cpid, sig, dumped in found:
        note_child(ChildDeath(pid=cpid, name=procfs.comm(cpid), signal=signal_name(sig), core_dumped=dumped), doc,
                   printer)


def has_handler(pid: int, signal_name: str) -> bool:
    """Whether the script catches ``signal_name`` (``SigCgt`` of /proc/PID/status)."""
    try:
        caught = int(procfs.status(pid).get("SigCgt", "0"), 16)
        return bool(caught >> (getattr(signal, signal_name) - 1) & 1)
    except (OSError, ValueError, AttributeError):
        return False


def reraised(events: List[Event], event: Event) -> Optional[Event]:
    """The earlier event of the same fault when ``event`` is its signal raised again from the script's handler.

    That is: the same signal in the same thread, which had a handler then, and
    a signal-handler frame on the thread's stack now (the handler is running).
    """
    earlier = next((e for e in reversed(events) if e.kind == "signal"), None)
    if earlier is None or not earlier.handler or earlier.signal != event.signal:
        return None
    if earlier.thread != event.thread:
        return None
    stopped = next((t for t in event.threads if t.tid == event.thread), None)
    frames = stopped.frames if stopped is not None else []
    return earlier if any(f.function == SIGNAL_FRAME for f in frames) else None
