"""``tfnative watch``'s crash catcher: every thread of the job's processes traced, none stopped, until a signal
is about to kill one; then that process's mixed stacks at the fault (the report ``attach`` gives), and the
death it would have died anyway.

``CrashCatcher(pids)`` seizes every thread (``PTRACE_SEIZE``, which stops nothing; threads started later are
traced from their first instruction, ``PTRACE_O_TRACECLONE``).  From then on the kernel stops a thread only
when a signal is about to be delivered to it, when it starts a thread, and at job control; a thread of ours
made for the purpose, ``tfnative-crash`` (ptrace answers only the thread that seized), answers each stop at
once:

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
held while ``poll`` takes the stacks (``snapshot/pipeline.of_stopped``, the event by ``attach``'s own way,
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

import collections
import ctypes
import errno
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple, Union

from ..analysis.event import analyze, finish
from ..attach import stopevent
from ..core import procfs, ranks
from ..core.model import Capture, Document, Event
from ..core.signals import signal_name
from ..core.threads import Threads
from ..errors import TargetGone, TfnativeError, start_thread
from ..snapshot import pipeline
from ..snapshot.policy import widened
from ..snapshot.process import live_task
from ..sources.base import ThreadRegs
from ..sources.permissions import ptrace_refused_message
from ..sources.ptrace import (
    PTRACE_CONT,
    PTRACE_DETACH,
    PTRACE_EVENT_CLONE,
    PTRACE_EVENT_STOP,
    PTRACE_GETEVENTMSG,
    PTRACE_GETREGS,
    PTRACE_GETSIGINFO,
    PTRACE_INTERRUPT,
    PTRACE_LISTEN,
    PTRACE_O_TRACECLONE,
    PTRACE_SEIZE,
    REGISTERS,
    STOP_WAIT_S,
    WALL,
    WNOTHREAD,
    ptrace_call,
)

__all__ = ["CRASH_SIGNALS", "Crash", "CrashCatcher", "Exit"]

CLD_EXITED, CLD_KILLED, CLD_DUMPED = 1, 2, 3

CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT,
                           signal.SIGTRAP, signal.SIGSYS})
STOPPING = frozenset({signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU})
ANSWER_S = STOP_WAIT_S + 5.0  # the longest a caller waits for the tracer thread to do what it asked
CRASH_HOLD_S = 120.0  # the longest a crashed process is held for ``poll`` to take its stacks
IDLE_S = (0.0005, 0.005)  # the tracer thread's look for stops: at once after one, then every 5 ms at most

_REGS_SIZE = 8 * len(REGISTERS)
def _sys(request: int, tid: int, addr: int = 0, data: int = 0) -> int:
    """ptrace(2) as libc has it (``sources/ptrace.ptrace_call``): -1 with ``ctypes.get_errno()`` on failure."""
    return int(ptrace_call()(request, tid, addr, data))


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


@dataclass
class _Siginfo:
    code: int = 0
    sender: Optional[int] = None  # the pid that sent it (kill, tgkill), where a process did
    address: Optional[int] = None  # the faulting address of a fault


class _Proc:
    """A watched process: its traced threads, and whether they are held (a crash, a snapshot)."""

    def __init__(self, pid: int, own_child: bool) -> None:
        self.pid = pid
        self.own_child = own_child  # its parent is this process: its exit is its parent's to reap
        self.threads: Set[int] = set()
        self.held = False
        self.dying = False  # its fatal signal was delivered
        self.handled: Dict[int, int] = {}  # tid -> the crash signal last handed to the program's handler
        self.crash: Optional[_Held] = None
        self.stopped: Dict[int, int] = {}  # tid -> the signal of its group stop (job control), until it runs again


@dataclass
class _Held:
    """A crash waiting for ``poll``: the process held, the registers of its threads."""

    pid: int
    tid: int
    signo: int
    info: _Siginfo
    threads: List[ThreadRegs]
    warnings: List[str]
    handler_ran: bool
    deadline: float
    taken: bool = False
    released: bool = False  # let go already (``CRASH_HOLD_S`` passed): no stacks


class _Request:
    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: Any = None
        self.error: Optional[BaseException] = None


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
        self._procs: Dict[int, _Proc] = {}
        self._owner: Dict[int, int] = {}  # tid -> its process
        self._deferred: Dict[int, int] = {}  # tid -> the stop status taken while its process was held
        self._parked: Set[int] = set()  # exited leaders whose parent (this process) reaps them
        self._requests: Deque[_Request] = collections.deque()
        self._reports: Deque[Union[_Held, Exit]] = collections.deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._closing = False
        self._failure: Optional[BaseException] = None
        self._tid = 0
        self._bell: Optional[_Bell] = None
        self._regs = ctypes.create_string_buffer(_REGS_SIZE)
        self._siginfo = ctypes.create_string_buffer(128)
        self._thread = threading.Thread(target=self._run, name="tfnative-crash", daemon=True)
        start_thread(self._thread)
        try:
            for pid in pids:
                self.add(pid)
        except BaseException:
            self.close()
            raise

    # --- the caller's side -------------------------------------------------------------------------------

    def add(self, pid: int) -> None:
        """Trace every thread of ``pid`` (it runs on).  TargetGone where it is gone, TfnativeError where the
        kernel refuses."""
        self._ask(lambda: self._seize_process(pid))

    def remove(self, pid: int) -> None:
        """Let ``pid`` go (untraced, running, any signal it was stopped for delivered); nothing if not watched."""
        self._ask(lambda: self._detach_process(pid))

    @property
    def pids(self) -> List[int]:
        """The processes watched now."""
        with self._lock:
            return sorted(self._procs)

    def stopped_by(self, pid: int) -> Optional[str]:
        """The signal that stopped ``pid`` by job control (SIGSTOP, SIGTSTP...), where its threads are in a group
        stop now (seen here first: a traced process's group stop is its tracer's to answer); None where it is not,
        or is not watched."""
        with self._lock:
            proc = self._procs.get(pid)
            stops = dict(proc.stopped) if proc is not None else {}
        if not stops:
            return None
        return signal_name(stops.get(pid, next(iter(stops.values()))))

    def poll(self, timeout: float) -> Optional[Union[Crash, Exit]]:
        """The next crash or exit of a watched process, waiting ``timeout`` seconds at most for one (a crash's
        stacks then take their own time, the process held meanwhile).  Raises what ended the tracer thread,
        should it have failed."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._ready:
            while not self._reports:
                if self._failure is not None:
                    raise TfnativeError("the crash watch failed: %s" % self._failure)
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return None
                self._ready.wait(min(left, 1.0))
            item = self._reports.popleft()
            if isinstance(item, _Held):
                item.taken = True
        if isinstance(item, Exit):
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
        held: Dict[int, Union[Tuple[List[ThreadRegs], List[str]], TfnativeError]] = self._ask(
            lambda: self._hold_processes(pids))
        taken: Dict[int, Union[Capture, TfnativeError]] = {}
        try:
            for pid, got in held.items():
                if isinstance(got, TfnativeError):
                    taken[pid] = got
                    continue
                try:
                    taken[pid] = self._held_capture(pid, got[0], got[1], which, start)
                except TfnativeError as exc:
                    taken[pid] = exc
        finally:
            self._ask(lambda: self._release_all([pid for pid, got in held.items() if not isinstance(got, Exception)]))
        return taken

    def _held_capture(self, pid: int, threads: List[ThreadRegs], warnings: List[str], which: Threads,
                      start: float) -> Capture:
        def take(which: Threads) -> Capture:
            return _of_stopped(pid, threads, which)

        try:
            result = widened(take, which)
        except TfnativeError:
            raise
        except Exception as exc:  # noqa: BLE001 - no gdb to fall back to: the reason, in one line
            if os.environ.get("TFNATIVE_DEBUG"):
                raise
            raise TfnativeError("cannot read the stacks of process %d: %s" % (pid, exc)) from None
        result.held_ms = round((time.monotonic() - start) * 1000.0, 3)  # held until now, and a little longer
        result.warnings.extend(warnings)
        return result

    def close(self) -> None:
        """Let every thread go: the tracer thread ends and the kernel detaches its tracees (a crash still held
        gets its signal).  Returns once they are let go (bounded)."""
        with self._lock:
            self._closing = True
        self._ring()
        deadline = time.monotonic() + ANSWER_S
        while self._thread.is_alive() and time.monotonic() < deadline:
            self._thread.join(0.05)
        if self._tid:  # join returns before the thread has left the kernel's list; its tracees are let go then
            gone = "/proc/self/task/%d" % self._tid
            while os.path.exists(gone) and time.monotonic() < deadline:
                time.sleep(0.0002)

    def __enter__(self) -> CrashCatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ask(self, fn: Callable[[], Any]) -> Any:
        """Have the tracer thread run ``fn`` (ptrace answers only it); its result, or what it raised."""
        request = _Request(fn)
        with self._lock:
            if self._closing or not self._thread.is_alive():
                raise TfnativeError("the crash watch has ended%s" % (
                    ": %s" % self._failure if self._failure is not None else ""))
            self._requests.append(request)
        self._ring()
        if not request.done.wait(ANSWER_S):
            raise TfnativeError("the crash watch did not answer within %.0f s" % ANSWER_S)
        if request.error is not None:
            raise request.error
        return request.result

    def _ring(self) -> None:
        """Wake the tracer thread: its ``_wake``, and the bell where it sleeps in the kernel."""
        self._wake.set()
        bell = self._bell
        if bell is not None:
            bell.ring()

    def _report_crash(self, held: _Held) -> Crash:
        """The crash's document from the held threads; then the process is let go with its signal."""
        name = signal_name(held.signo)
        argv, env = procfs.cmdline(held.pid), procfs.environ(held.pid)  # read while it is there
        try:
            event = self._crash_event(held, name) if held.threads else None
        finally:
            if not held.released:
                try:
                    self._ask(lambda: self._release(held.pid, (held.tid, held.signo)))
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

    def _crash_event(self, held: _Held, name: str) -> Event:
        """``attach``'s event at the crash (``stopevent.event_at``), from the held threads' registers."""
        pointers = {tid: regs["rsp"] for tid, _name, regs in held.threads}

        def take(which: Threads) -> Capture:
            result = _of_stopped(held.pid, held.threads, which, held.tid)
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

    # --- the tracer thread -------------------------------------------------------------------------------

    def _run(self) -> None:
        """Serve requests, answer stops, until ``close``; its end lets every tracee go.

        Between stops the thread sleeps in the kernel (``waitid`` without ``WNOHANG``): a stop wakes it at
        once, and so does a request, through the bell (``_ring``); where there is no bell, or a crash is held
        (its ``CRASH_HOLD_S`` runs), or a leader waits for its parent, it looks every ``IDLE_S`` instead."""
        self._tid = threading.get_native_id()
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())  # the process's signals go elsewhere
        self._bell = _Bell.start()
        idle = IDLE_S[0]
        try:
            while True:
                self._wake.clear()
                busy = self._serve()
                with self._lock:
                    if self._closing:
                        return
                busy = self._pump() or busy
                self._expire()
                if busy:
                    idle = IDLE_S[0]
                    continue
                if self._bell is not None and not self._parked and all(p.crash is None for p in self._procs.values()):
                    self._sleep()
                    continue
                self._wake.wait(idle)
                idle = min(idle * 2, IDLE_S[1])
        except BaseException as exc:  # noqa: BLE001 - said by poll and every later request
            self._failure = exc
        finally:
            if self._bell is not None:
                self._bell.stop()
            with self._ready:
                self._closing = True
                failed = list(self._requests)
                self._requests.clear()
                self._ready.notify_all()
            for request in failed:
                request.error = TfnativeError("the crash watch has ended")
                request.done.set()

    def _serve(self) -> bool:
        served = False
        while True:
            with self._lock:
                if not self._requests:
                    return served
                request = self._requests.popleft()
            try:
                request.result = request.fn()
            except Exception as exc:  # noqa: BLE001 - the caller's to raise
                request.error = exc
            request.done.set()
            served = True

    def _report(self, item: Union[_Held, Exit]) -> None:
        with self._ready:
            self._reports.append(item)
            self._ready.notify_all()

    def _expire(self) -> None:
        """A crash that ``poll`` has not taken within ``CRASH_HOLD_S`` is let go with its signal (reported
        without stacks): a watcher that stopped polling must not keep the process from dying."""
        now = time.monotonic()
        for proc in list(self._procs.values()):
            held = proc.crash
            if held is None or now < held.deadline:
                continue
            with self._lock:
                if held.taken:
                    continue
                held.taken = True
                self._reports.remove(held)
            self._release(proc.pid, (held.tid, held.signo))
            held.threads = []
            held.released = True
            held.warnings.append("no stacks: nothing took them within %.0f s" % CRASH_HOLD_S)
            self._report(held)

    # Waiting for stops: only this thread's tracees (WNOTHREAD), never this process's own children.

    def _pump(self) -> bool:
        """Answer the stops and exits that are there (a bounded batch); whether there were any."""
        for count in range(256):
            got = self._next()
            if got is None:
                return count > 0
            self._handle(*got)
        return True

    def _next(self) -> Optional[Tuple[int, int]]:
        """(tid, wait status) of one tracee that stopped or exited; None when none has."""
        self._unpark()
        if self._parked:  # an exited leader left for its parent would come first every time: thread by thread
            for tid in list(self._owner):
                got = self._peek(tid)
                if got is not None:
                    return got
            return None
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WSTOPPED | os.WNOHANG | os.WNOWAIT | WALL | WNOTHREAD)
        except ChildProcessError:
            return None
        if info is None or not info.si_pid:
            return None
        if self._bell is not None and info.si_pid == self._bell.pid:
            self._answer_bell(info)
            return None
        return self._take(info.si_pid, info)

    def _sleep(self) -> None:
        """Sleep in the kernel until a tracee stops or exits, or the bell rings (answered here)."""
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WSTOPPED | os.WNOWAIT | WALL | WNOTHREAD)
        except ChildProcessError:  # nothing to wait for (the bell gone): look again shortly
            self._wake.wait(IDLE_S[1])
            return
        if info is not None and self._bell is not None and info.si_pid == self._bell.pid:
            self._answer_bell(info)

    def _answer_bell(self, info: os.waitid_result) -> None:
        bell = self._bell
        assert bell is not None
        if info.si_code in (CLD_EXITED, CLD_KILLED, CLD_DUMPED):  # killed by someone: look every IDLE_S instead
            bell.stop()
            self._bell = None
        else:
            bell.answer()

    def _peek(self, tid: int) -> Optional[Tuple[int, int]]:
        try:
            info = os.waitid(os.P_PID, tid, os.WEXITED | os.WSTOPPED | os.WNOHANG | os.WNOWAIT | WALL | WNOTHREAD)
        except ChildProcessError:  # not ours any more (gone unseen: an exec by another thread)
            self._forget(tid)
            return None
        if info is None or not info.si_pid:
            return None
        return self._take(tid, info)

    def _take(self, tid: int, info: os.waitid_result) -> Optional[Tuple[int, int]]:
        """Consume the stop or exit ``info`` says ``tid`` has: (tid, its wait status).  A stop is taken with
        ``WSTOPPED`` alone, which never reaps; the exit of a leader whose parent is this process is left to
        it (its status made from ``info``)."""
        if info.si_code not in (CLD_EXITED, CLD_KILLED, CLD_DUMPED):
            try:
                got = os.waitid(os.P_PID, tid, os.WSTOPPED | os.WNOHANG | WALL | WNOTHREAD)
            except ChildProcessError:
                self._forget(tid)
                return None
            if got is None or not got.si_pid:
                return None
            return tid, (got.si_status << 8) | 0x7F  # a ptrace stop's status: (event << 16 | sig << 8) | 0x7f
        proc = self._procs.get(tid)
        if proc is not None and proc.own_child:
            self._parked.add(tid)
            if info.si_code == CLD_EXITED:
                return tid, (info.si_status & 0xFF) << 8
            return tid, (info.si_status & 0x7F) | (0x80 if info.si_code == CLD_DUMPED else 0)
        try:
            got_tid, status = os.waitpid(tid, os.WNOHANG | WALL | WNOTHREAD)
        except ChildProcessError:
            self._forget(tid)
            return None
        return (tid, status) if got_tid else None

    def _unpark(self) -> None:
        for pid in list(self._parked):
            try:
                there = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT | WALL | WNOTHREAD)
            except ChildProcessError:
                there = None
            if there is None:  # its parent has reaped it
                self._parked.discard(pid)

    # Answering a stop.

    def _handle(self, tid: int, status: int) -> None:
        pid = self._owner.get(tid)
        if pid is None:
            pid = self._adopt(tid)
        if pid is None:  # not a thread of a watched process (left over from one let go): let it run
            if os.WIFSTOPPED(status):
                _sys(PTRACE_DETACH, tid, 0, 0)
            return
        proc = self._procs[pid]
        if not os.WIFSTOPPED(status):
            self._gone(proc, tid, status)
        elif proc.held:  # answered when it is let go
            self._deferred[tid] = status
            if status >> 16 == PTRACE_EVENT_CLONE:
                self._cloned(proc, tid)
        else:
            self._answer(proc, tid, status)

    def _answer(self, proc: _Proc, tid: int, status: int) -> None:
        sig, event = os.WSTOPSIG(status), status >> 16
        if event == PTRACE_EVENT_STOP and sig in STOPPING:
            proc.stopped[tid] = sig
        else:  # any other stop: it runs (SIGCONT ends a group stop with an event stop of SIGTRAP)
            proc.stopped.pop(tid, None)
        if event == PTRACE_EVENT_CLONE:
            self._cloned(proc, tid)
            _sys(PTRACE_CONT, tid, 0, 0)
        elif event == PTRACE_EVENT_STOP and sig in STOPPING:  # a group stop: stopped until SIGCONT
            _sys(PTRACE_LISTEN, tid, 0, 0)
        elif event:  # an interrupt, a new thread's first stop
            _sys(PTRACE_CONT, tid, 0, 0)
        elif sig in CRASH_SIGNALS and not proc.dying and _fatal(proc.pid, sig):
            self._crashed(proc, tid, sig)
        else:
            if sig in CRASH_SIGNALS:
                proc.handled[tid] = sig  # the program's handler sees it: a crash only if raised again, fatal
            _sys(PTRACE_CONT, tid, 0, sig)  # handed on with its own siginfo

    def _crashed(self, proc: _Proc, tid: int, sig: int) -> None:
        """A fatal crash signal on its way to ``tid``: hold the process, read its threads, wait for ``poll``."""
        info = self._read_siginfo(tid, proc.pid)
        self._deferred[tid] = (sig << 8) | 0x7F
        threads, warnings = self._hold(proc, tid)
        proc.crash = _Held(proc.pid, tid, sig, info, threads, warnings, proc.handled.get(tid) == sig,
                           time.monotonic() + CRASH_HOLD_S)
        self._report(proc.crash)

    def _read_siginfo(self, tid: int, pid: int) -> _Siginfo:
        out = _Siginfo()
        if _sys(PTRACE_GETSIGINFO, tid, 0, ctypes.addressof(self._siginfo)) == -1:
            return out
        raw = self._siginfo.raw
        out.code = int.from_bytes(raw[8:12], "little", signed=True)
        if out.code > 0:  # from the kernel: a fault's address
            out.address = int.from_bytes(raw[16:24], "little")
        else:  # SI_USER, SI_TKILL, SI_QUEUE: from a process (``abort`` is the process itself)
            sender = int.from_bytes(raw[16:20], "little", signed=True)
            if sender > 0 and sender != pid:
                out.sender = sender
        return out

    def _cloned(self, proc: _Proc, tid: int) -> None:
        word = ctypes.c_ulong(0)
        if _sys(PTRACE_GETEVENTMSG, tid, 0, ctypes.addressof(word)) != -1 and word.value:
            self._own(proc, int(word.value))

    def _own(self, proc: _Proc, tid: int) -> None:
        proc.threads.add(tid)
        self._owner[tid] = proc.pid

    def _adopt(self, tid: int) -> Optional[int]:
        """The process of a tracee not seen yet (a new thread whose parent's clone stop is still to come)."""
        try:
            tgid = int(procfs.status(tid).get("Tgid", "0"))
        except (OSError, ValueError):
            return None
        proc = self._procs.get(tgid)
        if proc is None:
            return None
        self._own(proc, tid)
        return tgid

    def _forget(self, tid: int) -> None:
        pid = self._owner.pop(tid, None)
        self._deferred.pop(tid, None)
        if pid is not None and pid in self._procs:
            self._procs[pid].threads.discard(tid)
            self._procs[pid].stopped.pop(tid, None)

    def _gone(self, proc: _Proc, tid: int, status: int) -> None:
        """A thread's exit; the leader's is the process's end (``Exit``), and so is the last thread's where the
        leader had exited before the seize (``pthread_exit``: a zombie, never traced, its parent's to reap)."""
        self._forget(tid)
        if tid != proc.pid and proc.threads:
            return
        for t in list(proc.threads):  # the leader reports last: the others have gone before it
            self._forget(t)
        with self._lock:
            self._procs.pop(proc.pid, None)
        if os.WIFSIGNALED(status):
            self._report(Exit(proc.pid, -os.WTERMSIG(status), os.WCOREDUMP(status)))
        else:
            self._report(Exit(proc.pid, os.WEXITSTATUS(status)))

    # Holding a process: every thread interrupted and its registers read; let go by ``_release``.

    def _hold(self, proc: _Proc, stopped: int = 0, interrupted: bool = False) -> Tuple[List[ThreadRegs], List[str]]:
        """Stop every thread of ``proc`` (``stopped``: already is; ``interrupted``: all were just interrupted) and
        read its registers, within ``STOP_WAIT_S``; a thread that does not stop in time is left out, and said
        in the warnings."""
        proc.held = True
        for tid in sorted(proc.threads):
            if tid != stopped and tid not in self._deferred and not interrupted:
                _sys(PTRACE_INTERRUPT, tid, 0, 0)  # fails only for a thread gone, which its wait says
        regs: Dict[int, Dict[str, int]] = {}
        skipped: Set[int] = set()
        warnings: List[str] = []
        deadline = time.monotonic() + STOP_WAIT_S
        pause = 0.00005
        while True:
            pending = [t for t in sorted(proc.threads) if t not in regs and t not in skipped]
            if not pending and not self._unlisted(proc, regs, skipped):
                break
            for tid in pending:
                taken = self._getregs(tid)
                if taken is not None:
                    regs[tid] = taken
                    continue
                got = self._peek(tid)  # its stop (kept for the release) or its exit
                if got is not None:
                    self._handle(*got)
                if tid in proc.threads and procfs.exiting(proc.pid, tid):
                    skipped.add(tid)  # a zombie leader (pthread_exit), a thread on its way out
            if time.monotonic() > deadline:
                late = [t for t in proc.threads if t not in regs and t not in skipped]
                if late:
                    warnings.append("thread(s) %s of process %d did not stop within %.0f s: not shown"
                                    % (", ".join(map(str, sorted(late))), proc.pid, STOP_WAIT_S))
                break
            if pending and all(t not in regs for t in pending):
                time.sleep(pause)
                pause = min(pause * 2, 0.002)
        order = sorted(regs, key=lambda t: (t != proc.pid, t))
        return [(t, procfs.comm(proc.pid, t), regs[t]) for t in order], warnings

    def _unlisted(self, proc: _Proc, regs: Dict[int, Dict[str, int]], skipped: Set[int]) -> bool:
        """Threads of the process that are ours but not known yet (started as the hold began): taken in."""
        count = procfs.num_threads(proc.pid)
        if count is None or count <= len(proc.threads):
            return False
        try:
            tids = procfs.tids(proc.pid)
        except ProcessLookupError:
            return False
        found = False
        for tid in tids:
            if tid not in proc.threads and tid not in skipped and self._traced_by_us(proc.pid, tid):
                self._own(proc, tid)
                found = True
        return found

    def _getregs(self, tid: int) -> Optional[Dict[str, int]]:
        if _sys(PTRACE_GETREGS, tid, 0, ctypes.addressof(self._regs)) == -1:
            return None
        with memoryview(self._regs).cast("B") as raw:
            words = raw[:_REGS_SIZE].cast("Q").tolist()
        return dict(zip(REGISTERS, words))

    def _hold_processes(self, pids: Sequence[int]
                        ) -> Dict[int, Union[Tuple[List[ThreadRegs], List[str]], TfnativeError]]:
        """Every one of ``pids`` held: interrupted all together first, then each one's registers read."""
        for pid in pids:
            proc = self._procs.get(pid)
            if proc is not None and not proc.held:
                for tid in proc.threads:
                    if tid not in self._deferred:
                        _sys(PTRACE_INTERRUPT, tid, 0, 0)
        out: Dict[int, Union[Tuple[List[ThreadRegs], List[str]], TfnativeError]] = {}
        for pid in pids:
            try:
                out[pid] = self._hold_process(pid, interrupted=True)
            except TfnativeError as exc:
                out[pid] = exc
        return out

    def _release_all(self, pids: List[int]) -> None:
        for pid in pids:
            self._release(pid, None)

    def _hold_process(self, pid: int, interrupted: bool = False) -> Tuple[List[ThreadRegs], List[str]]:
        proc = self._procs.get(pid)
        if proc is None:
            raise TfnativeError("process %d is not watched (it exited?)" % pid)
        if proc.held:
            raise TfnativeError("process %d is held for its crash" % pid)
        threads, warnings = self._hold(proc, interrupted=interrupted)
        if not threads:
            self._release(pid, None)
            raise TargetGone(pid)
        return threads, warnings

    def _release(self, pid: int, deliver: Optional[Tuple[int, int]]) -> None:
        """Let a held process run: ``deliver`` (tid, signal) resumed with its fatal signal first; every stop
        kept meanwhile answered as it would have been; the threads stopped by the hold resume at their
        interrupt stop (``_answer``)."""
        proc = self._procs.get(pid)
        if proc is None:
            return
        proc.held = False
        proc.crash = None
        if deliver is not None:
            tid, sig = deliver
            self._deferred.pop(tid, None)
            proc.dying = True
            _sys(PTRACE_CONT, tid, 0, sig)
        for tid in sorted(proc.threads):
            status = self._deferred.pop(tid, None)
            if status is not None:
                self._answer(proc, tid, status)

    # Seizing and letting go.

    def _seize_process(self, pid: int) -> None:
        if pid in self._procs:
            return
        try:
            own = int(procfs.status(pid).get("PPid", "0")) == os.getpid()
        except (OSError, ValueError):
            raise TargetGone(pid) from None
        if procfs.exited(pid):
            raise TargetGone(pid)
        proc = _Proc(pid, own)
        with self._lock:
            self._procs[pid] = proc
        passed: Set[int] = set()  # threads on their way out, a zombie leader: not to be traced
        try:
            for _round in range(100):
                try:
                    new = [t for t in procfs.tids(pid) if t not in proc.threads and t not in passed]
                except ProcessLookupError:
                    raise TargetGone(pid) from None
                if not new:
                    if not proc.threads:
                        raise TargetGone(pid)
                    return
                for tid in reversed(new):
                    if not self._seize(proc, tid):
                        passed.add(tid)
            raise TfnativeError("the threads of process %d keep changing" % pid)
        except BaseException:
            self._detach_process(pid)
            raise

    def _seize(self, proc: _Proc, tid: int) -> bool:
        """Trace ``tid``: True, or False where it is gone or going (a zombie leader: nothing to trace)."""
        if _sys(PTRACE_SEIZE, tid, 0, PTRACE_O_TRACECLONE) != -1:
            self._own(proc, tid)
            return True
        err = ctypes.get_errno()
        if err == errno.ESRCH:
            return False  # it exited meanwhile
        if err == errno.EPERM:
            if procfs.state(proc.pid, tid) in (None, "Z", "X"):
                return False  # exiting, or a zombie leader (pthread_exit): nothing to trace
            if self._traced_by_us(proc.pid, tid):
                self._own(proc, tid)  # started by a thread seized before it (PTRACE_O_TRACECLONE)
                return True
        raise TfnativeError(ptrace_refused_message(proc.pid, "ptrace(PTRACE_SEIZE, %d): %s"
                                                   % (tid, os.strerror(err))))

    def _traced_by_us(self, pid: int, tid: int) -> bool:
        try:
            return int(procfs.status(pid, tid).get("TracerPid", "0")) == self._tid
        except (OSError, ValueError):
            return False

    def _detach_process(self, pid: int) -> None:
        """Let ``pid`` go for good: held, every stop's signal handed back with the detach, a crash still held
        delivered."""
        proc = self._procs.get(pid)
        if proc is None:
            return
        if proc.crash is not None:
            with self._lock:
                if not proc.crash.taken:
                    self._reports.remove(proc.crash)
            self._release(pid, (proc.crash.tid, proc.crash.signo))
        self._hold(proc)
        for tid in sorted(proc.threads):
            got = self._peek(tid)  # the stop it is in, if not taken yet: its signal must not be lost
            if got is not None:
                self._handle(*got)
        with self._lock:
            self._procs.pop(pid, None)
        for tid in sorted(proc.threads):
            status = self._deferred.pop(tid, 0)
            sig = os.WSTOPSIG(status) if status and os.WIFSTOPPED(status) and not status >> 16 else 0
            _sys(PTRACE_DETACH, tid, 0, sig)
            self._owner.pop(tid, None)


class _Bell:
    """What wakes the tracer thread from its sleep in ``waitid``: a child of that thread (so that only it waits
    for it, ``WNOTHREAD``), ``cat`` reading a pipe only we write to.  A caller rings it with SIGSTOP; the tracer
    thread sees it stop, takes the stop and sends SIGCONT (``answer``) before it serves the requests, so that a
    later ring stops it again.  It ends with the tracer thread (``stop``), or with this process: the pipe's end
    is then its end of input."""

    def __init__(self, pid: int, pipe: int) -> None:
        self.pid = pid
        self.pipe = pipe

    @classmethod
    def start(cls) -> Optional[_Bell]:
        cat = shutil.which("cat")
        if cat is None:
            return None
        read, write = os.pipe()
        try:
            pid = os.posix_spawn(cat, [cat], {}, file_actions=[(os.POSIX_SPAWN_DUP2, read, 0),
                                                               (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)],
                                 setpgroup=0, setsigmask=(), resetids=False)
        except OSError:
            os.close(write)
            return None
        finally:
            os.close(read)
        return cls(pid, write)

    def ring(self) -> None:
        try:
            os.kill(self.pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass

    def answer(self) -> None:
        try:
            os.waitid(os.P_PID, self.pid, os.WSTOPPED | os.WNOHANG | WALL | WNOTHREAD)
        except ChildProcessError:
            return
        os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        """End it and reap it (on the tracer thread: its parent)."""
        if self.pipe >= 0:
            os.close(self.pipe)
            self.pipe = -1
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                if os.waitpid(self.pid, os.WNOHANG | WALL | WNOTHREAD)[0]:
                    return
            except ChildProcessError:
                return
            time.sleep(0.001)


def _of_stopped(pid: int, threads: List[ThreadRegs], which: Threads, selected: Optional[int] = None) -> Capture:
    """``pipeline.of_stopped`` of the held process, read through a live thread where its leader has exited
    (``pthread_exit``: its ``/proc/PID/mem`` is gone), as ``stack`` does."""
    task = live_task(pid)
    # no gdb can take over from the tracer: a library with DWARF is named from its symbol table, a warning says so
    result = pipeline.of_stopped(task, threads, which, selected, dwarf_aside=False)
    if task != pid:
        result.pid = pid
        result.warnings.append("the main thread %d has exited (pthread_exit): the live threads are shown" % pid)
    return result


def _fatal(pid: int, sig: int) -> bool:
    """Whether ``sig`` kills ``pid`` when delivered now: neither caught nor ignored (its default action, which
    for ``CRASH_SIGNALS`` is to die with a core)."""
    try:
        fields = procfs.status(pid)
        caught, ignored = int(fields.get("SigCgt", "0"), 16), int(fields.get("SigIgn", "0"), 16)
    except (OSError, ValueError):
        return False
    bit = 1 << (sig - 1)
    return not (caught & bit or ignored & bit)
