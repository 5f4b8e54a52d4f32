"""Processes of a watched job whose program has ended but which do not exit (``tfnative watch``'s exit hangs).

A Python process whose main script has returned waits in ``threading._shutdown`` for its non-daemon threads,
then tears the interpreter down (``Py_FinalizeEx``).  Whatever those threads do (a ``SessionRunHook``'s thread
that polls a flag with ``time.sleep`` for ever wakes and sleeps again: progress by the counters' rule), the
process is hung once it has been exiting for ``--hang-after`` seconds: the program it ran is over.

How it is seen, without stopping anything: a process whose main thread did not run on a CPU over an interval
(it may be blocked at exit) has its stacks read the ``--no-pause`` way (``snapshot/progress.exit_state``), at
most once every ``every`` seconds; once it is exiting it stays so (the exit does not go back) and the exit is
dated from the main thread's last progress before it was seen so.  From then on its threads' activity is not
the job's progress (``exiting``), and it is hung once exiting for ``hang_after`` (``due``, once per process).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set, Tuple

from ..snapshot import progress

# what a main thread did over an interval (``analysis/progress.thread_kind``) that is its own progress
MOVED = frozenset({"new", "cpu", "slept", "woke"})
ExitState = Callable[[int], Optional[str]]  # pid -> why it waits to exit, or None (``progress.exit_state``)


class Exits:
    """The job's processes that wait to exit, since when (see the module)."""

    def __init__(self, hang_after: float, every: float, state: ExitState = progress.exit_state) -> None:
        self.hang_after, self.every, self.state = hang_after, every, state
        self.main_last: Dict[int, float] = {}  # pid -> when its main thread last progressed (first seen)
        self.next_check: Dict[int, float] = {}
        self.since: Dict[int, Tuple[float, str]] = {}  # pid -> (when its exit began, what it waits in)
        self.reported: Set[int] = set()

    def seen(self, pid: int, now: float) -> None:
        """``pid``'s first reading (its program may be over already: a job that ended before the watch began)."""
        self.main_last.setdefault(pid, now)

    def note(self, pid: int, main: Optional[str], now: float, python: bool) -> None:
        """One reading of ``pid`` after its first: ``main``, what its main thread did since the last one
        (``thread_kind``; None: not judged); ``python``: it runs an interpreter (else it is never read)."""
        if main in MOVED or pid not in self.main_last:
            self.main_last[pid] = now
        if pid in self.since or not python or main is None or main == "cpu" or now < self.next_check.get(pid, 0.0):
            return
        self.confirm(pid, now)

    def confirm(self, pid: int, now: float) -> None:
        """Read now whether ``pid`` (seen by ``note`` before) waits to exit (the job looks hung: a report that
        says so must not wait for the next reading's turn)."""
        if pid in self.since or pid not in self.main_last:
            return
        self.next_check[pid] = now + self.every
        what = self.state(pid)
        if what is not None:
            self.since[pid] = (self.main_last[pid], what)

    def began(self, pid: int) -> Optional[float]:
        """When ``pid``'s exit began (its main thread's last progress), where it is exiting."""
        known = self.since.get(pid)
        return None if known is None else known[0]

    def due(self, now: float) -> List[Tuple[int, float, str]]:
        """``(pid, seconds exiting, what it waits in)`` of each process exiting for ``hang_after`` seconds and
        not reported yet; each is returned once."""
        out = []
        for pid, (since, what) in sorted(self.since.items()):
            if pid not in self.reported and now - since >= self.hang_after:
                self.reported.add(pid)
                out.append((pid, now - since, what))
        return out

    def forget(self, pid: int) -> None:
        self.main_last.pop(pid, None)
        self.next_check.pop(pid, None)
        self.since.pop(pid, None)
        self.reported.discard(pid)
