"""``tfnative watch``'s crash catcher: every thread of the job's processes traced, none stopped, until a signal
is about to kill one; then that process's mixed stacks at the fault (the report ``attach`` gives), and the
death it would have died anyway.

``CrashCatcher(pids)`` seizes every thread (``PTRACE_SEIZE``, which stops nothing; threads started later are
traced from their first instruction, ``PTRACE_O_TRACECLONE``).  From then on the kernel stops a thread only
when a signal is about to be delivered to it, when it starts a thread, and at job control; a thread of ours
made for the purpose, ``tfnative-crash`` (ptrace answers only the thread that seized), answers each stop at
once (``watch/tracer.py``, through ``sources/ptrace.py``'s primitives; this module is the caller's side: the
crash's report, the hang's snapshots):

* A signal that will not kill the process (it has a handler, it is ignored, or its default action is not to
  die: SIGCHLD, SIGWINCH...), and every signal that is not a crash (SIGTERM, SIGINT, SIGHUP, SIGUSR1...) is
  handed on as it came, with its own siginfo: the program sees what it would have seen unwatched.  A
  SIGTERM that kills the process is its end by a signal (``Exit``), not a crash: no stacks are taken.
* A crash signal (``CRASH_SIGNALS``: SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS) is a crash when
  it is about to kill: when the process neither catches nor ignores it (``SigCgt``/``SigIgn`` of
  ``/proc/PID/status``, read at the stop; the kernel resets a blocked or ignored fault to its default first).
  A program whose handler recovers (a JIT's SIGSEGV handler) is never reported; one whose handler reports and
  raises the signal again with its default action (TensorFlow's and Python's ``faulthandler`` do) is caught at
  that second, fatal delivery: its stacks then show the handler over the signal frame over the fault, and the
  event says the handler ran (``handler``, ``reraised_by_handler``).
* Job control works as unwatched: a stopping signal is handed on, and each thread's group stop is answered
  with ``PTRACE_LISTEN`` (it stays stopped until SIGCONT, which reaches it as usual).
* A thread that exits is reaped (a traced thread is, by its tracer); the process's end is reported as an
  ``Exit`` with its status.  The exit of a process whose parent is this process (``watch SCRIPT`` starts the
  job) is only looked at (``WNOWAIT``), never reaped: its parent's ``wait`` gets the status, as unwatched.

At a crash every other thread is interrupted (``PTRACE_INTERRUPT``) and its registers read, the process is
held while ``poll`` takes the stacks (``snapshot/process.take_held``, the event by ``attach``'s own way,
``attach/stopevent.event_at``: mixed stacks, the op, the user's line, TensorFlow's fatal log line), and the
crashing thread is then resumed with its signal: the process dies of it as it would have (core dump and
parent's status included).  ``snapshot`` holds a process the same way for a hang's report (``stack``'s own hold
cannot seize threads that are already traced).

Every wait is bounded (``STOP_WAIT_S`` for threads to stop, ``ANSWER_S`` for the tracer thread to answer,
``CRASH_HOLD_S`` for ``poll`` to take a crash's stacks).  ``close`` ends the tracer thread: the kernel then
detaches every tracee in one pass, as it does should this process die (even ``kill -9``): they run on,
untraced; a signal a thread was stopped for is delivered; a process stopped by job control stays stopped.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..analysis.event import analyze, finish
from ..attach import stopevent
from ..core import procfs, ranks
from ..core.model import Capture, Document, Event
from ..core.signals import signal_name
from ..core.threads import Threads
from ..errors import TfnativeError
from ..snapshot.process import take_held
from ..sources.base import ThreadRegs
from .traced import CRASH_SIGNALS, Exit, Held
from .tracer import Tracer

__all__ = ["CRASH_SIGNALS", "Crash", "CrashCatcher", "Exit"]


@dataclass
class Crash:
    """A watched process about to die of a crash signal: the report ``attach`` gives, as its document (one
    ``signal`` event, the exit the signal brings, the crash triage).  The process has been let go with its
    signal by the time ``poll`` returns this."""

    pid: int
    tid: int
    signal: str  # "SIGSEGV"
    document: Document

    @property
    def event(self) -> Event:
        return self.document.events[0]



def held_document(pid: int, result: Capture) -> Document:
    """The ``stack`` document of a capture the catcher took while it held ``pid`` (one ``snapshot`` event with
    its hang verdict), made once the process is let go."""
    env = procfs.environ(pid)
    doc = Document(argv=procfs.cmdline(pid), pid=pid, host=os.uname().nodename, scheduler=ranks.scheduler_of(env))
    doc.task = ranks.task_of(env, result.tf_config)
    event = analyze("snapshot", result, hang=True, cluster=ranks.cluster_of(env, result.tf_config))
    doc.events.append(event)
    doc.triage = event.triage
    return doc



class CrashCatcher:
    """Trace every thread of ``pids`` (nothing stopped) and catch the first fatal crash signal of each.

    ``poll(timeout)`` returns the next ``Crash`` (its stacks taken, the process then let go to die of its
    signal) or ``Exit`` (a process's end: dropped from the watch), or None after ``timeout`` seconds.
    ``snapshot(pid)`` holds a process for a hang's ``stack`` document; ``add``/``remove`` change the set;
    ``close()`` lets every thread go.  Raises ``TfnativeError`` (``TargetGone`` for a process gone) where a
    process cannot be traced.

    For the loop that uses it: one thread calls ``poll`` (a crash's ``Exit`` follows its ``Crash``); any
    thread may call the others.  While a process is watched no other tracer can have it (``stack --pid``, gdb,
    gcore are refused): take its stacks with ``snapshot``/``snapshots``, or ``remove`` it first (a core by
    gcore) and ``add`` it again.  The process using it must not wait for *any* child (``os.wait()``,
    ``waitpid(-1)``): the bell is a child of ours.  Nor may it ``Popen.wait``/``poll`` a watched child: a wait
    of the tracer's thread group takes the tracee's ptrace stops as the tracer's own (a crash's stop would be
    returned as a death, and the process held for ever); look with ``waitid(WEXITED | WNOWAIT | __WNOTHREAD)``
    until the status is an exit, as ``watch/job.Job.reaped`` does.
    """

    def __init__(self, pids: Sequence[int] = ()) -> None:
        self._tracer = Tracer()
        try:
            for pid in pids:
                self.add(pid)
        except BaseException:
            self.close()
            raise

    def add(self, pid: int) -> None:
        """Trace every thread of ``pid`` (it runs on).  TargetGone where it is gone, TfnativeError where the
        kernel refuses."""
        tracer = self._tracer
        tracer.ask(lambda: tracer.seize_process(pid))

    def remove(self, pid: int) -> None:
        """Let ``pid`` go (untraced, running, any signal it was stopped for delivered); nothing if not watched."""
        tracer = self._tracer
        tracer.ask(lambda: tracer.detach_process(pid))

    @property
    def pids(self) -> List[int]:
        """The processes watched now."""
        return self._tracer.pids

    def stopped_by(self, pid: int) -> Optional[str]:
        """The signal that stopped ``pid`` by job control (SIGSTOP, SIGTSTP...), where its threads are in a group
        stop now (seen here first: a traced process's group stop is its tracer's to answer); None where it is not,
        or is not watched."""
        return self._tracer.stopped_by(pid)

    def poll(self, timeout: float) -> Optional[Union[Crash, Exit]]:
        """The next crash or exit of a watched process, waiting ``timeout`` seconds at most for one (a crash's
        stacks then take their own time, the process held meanwhile).  Raises what ended the tracer thread,
        should it have failed."""
        item = self._tracer.next_report(timeout)
        if item is None or isinstance(item, Exit):
            return item
        return self._report_crash(item)

    def snapshot(self, pid: int, which: Threads = Threads.PYTHON) -> Document:
        """``pid``'s ``stack`` document (one ``snapshot`` event with its hang verdict), taken while its
        threads are held by this catcher (interrupted, unwound, let go).  TfnativeError where it cannot be."""
        got = self.snapshots([pid], which)[pid]
        if isinstance(got, TfnativeError):
            raise got
        return got

    def snapshots(self, pids: Sequence[int], which: Threads = Threads.PYTHON
                  ) -> Dict[int, Union[Document, TfnativeError]]:
        """``snapshot`` of each of ``pids``, all held at once (one moment for the whole job: its wait-for graph
        across processes), unwound one after the other, let go together, then analysed; a process that cannot be
        read gets its error (``TargetGone`` for one gone) in place of its document."""
        return {pid: got if isinstance(got, TfnativeError) else held_document(pid, got)
                for pid, got in self.captures(pids, which).items()}

    def captures(self, pids: Sequence[int], which: Threads = Threads.PYTHON
                 ) -> Dict[int, Union[Capture, TfnativeError]]:
        """The captures of ``pids``, all held at once, unwound one after the other, let go together; nothing is
        analysed while they are held (``held_document`` makes each its document afterwards)."""
        start = time.monotonic()
        tracer = self._tracer
        held: Dict[int, Union[Tuple[List[ThreadRegs], List[str]], TfnativeError]] = tracer.ask(
            lambda: tracer.hold_processes(pids))
        taken: Dict[int, Union[Capture, TfnativeError]] = {}
        try:
            for pid, got in held.items():
                if isinstance(got, TfnativeError):
                    taken[pid] = got
                    continue
                try:
                    result = take_held(pid, got[0], which)
                except TfnativeError as exc:
                    taken[pid] = exc
                    continue
                result.held_ms = round((time.monotonic() - start) * 1000.0, 3)  # held until now, and a little longer
                result.warnings.extend(got[1])
                taken[pid] = result
        finally:
            tracer.ask(lambda: tracer.release_all([pid for pid, got in held.items() if not isinstance(got, Exception)]))
        return taken

    def close(self) -> None:
        """Let every thread go: the tracer thread ends and the kernel detaches its tracees (a crash still held
        gets its signal).  Returns once they are let go (bounded)."""
        self._tracer.close()

    def __enter__(self) -> CrashCatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _report_crash(self, held: Held) -> Crash:
        """The crash's document from the held threads; then the process is let go with its signal."""
        name = signal_name(held.signo)
        argv, env = procfs.cmdline(held.pid), procfs.environ(held.pid)  # read while it is there
        try:
            event = self._crash_event(held, name) if held.threads else None
        finally:
            if not held.released:
                try:
                    tracer = self._tracer
                    tracer.ask(lambda: tracer.release(held.pid, (held.tid, held.signo)))
                except TfnativeError:
                    pass  # the watch ended meanwhile: its end delivered the signal
        if event is None:
            event = Event(kind="signal", signal=name, thread=held.tid, pid=held.pid, warnings=list(held.warnings))
        event.handler = held.handler_ran
        event.reraised_by_handler = held.handler_ran
        event.fatal = True
        doc = Document(argv=argv, pid=held.pid, events=[event], attached=True, host=os.uname().nodename,
                       scheduler=ranks.scheduler_of(env))
        doc.set_exit(-held.signo)
        return Crash(pid=held.pid, tid=held.tid, signal=name, document=finish(doc))

    def _crash_event(self, held: Held, name: str) -> Event:
        """``attach``'s event at the crash (``stopevent.event_at``), from the held threads' registers."""
        pointers = {tid: regs["rsp"] for tid, _name, regs in held.threads}

        def take(which: Threads) -> Capture:
            result = take_held(held.pid, held.threads, which, held.tid, lambda exc: TfnativeError(str(exc)))
            result.stack_pointers = pointers
            return result

        extra: Dict[str, Any] = {"signal": name, "signal_code": held.info.code}
        if held.info.address is not None:
            extra["fault_address"] = "0x%x" % held.info.address
        if held.info.sender is not None:
            extra["sent_by"] = held.info.sender
        try:
            event = stopevent.event_at(take, False, False, "signal", **extra)
        except Exception as exc:  # noqa: BLE001 - no gdb to fall back to: the crash is reported all the same
            if os.environ.get("TFNATIVE_DEBUG"):
                raise
            event = Event(kind="signal", thread=held.tid, pid=held.pid,
                          warnings=["no stacks: tfnative's unwinder could not read them (%s)" % exc], **extra)
        event.warnings.extend(held.warnings)
        return event
