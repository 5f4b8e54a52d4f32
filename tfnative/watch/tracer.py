"""The crash catcher's tracer (``watch/crash.py``'s ``CrashCatcher`` is its caller's side): one thread of ours,
``tfnative-crash``, keeps every thread of the job's processes traced through ``sources/ptrace.py``'s primitives
(ptrace answers only the thread that seized) and answers each stop at once; this module holds what it does with
each stop, and no ptrace request of its own.

* A signal that will not kill the process (it has a handler, it is ignored, or its default action is not to
  die: SIGCHLD, SIGWINCH...), and every signal that is not a crash (SIGTERM, SIGINT, SIGHUP, SIGUSR1...) is
  handed on as it came, with its own siginfo: the program sees what it would have seen unwatched.
* A crash signal (``CRASH_SIGNALS``) about to kill (neither caught nor ignored, ``_fatal``) holds the process
  (``Held``) for the caller's report, until ``CRASH_HOLD_S``; the caller then lets it die of it (``release``).
* Job control works as unwatched: a stopping signal is handed on, and each thread's group stop is answered
  with ``PTRACE_LISTEN`` (it stays stopped until SIGCONT, which reaches it as usual).
* A thread that exits is reaped (a traced thread is, by its tracer); the process's end is reported as an
  ``Exit``.  The exit of a process whose parent is this process is only looked at, never reaped (``_parked``).
* Stops that come while a process is held (a crash, a snapshot) are kept (``_deferred``) and answered at its
  release as they would have been.

Between stops the thread sleeps in the kernel (a blocking ``waitid`` on its own tracees), woken by a stop or by
the bell (``watch/bell.py``) a caller rings with a request (``ask``).
"""

from __future__ import annotations

import collections
import errno
import os
import signal
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple, Union

from ..core import procfs
from ..core.signals import signal_name
from ..errors import TargetGone, TfnativeError, start_thread
from ..sources import ptrace
from ..sources.base import ThreadRegs
from ..sources.permissions import ptrace_refused_message
from ..sources.ptrace import STOP_WAIT_S
from .bell import Bell
from .traced import CRASH_SIGNALS, STOPPING, Exit, Held, Siginfo, Watched, fatal

__all__ = ["ANSWER_S", "CRASH_HOLD_S", "Tracer"]

ANSWER_S = STOP_WAIT_S + 5.0  # the longest a caller waits for the tracer thread to do what it asked
CRASH_HOLD_S = 120.0  # the longest a crashed process is held for its report to be taken
IDLE_S = (0.0005, 0.005)  # the tracer thread's look for stops: at once after one, then every 5 ms at most


class _Request:
    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: Any = None
        self.error: Optional[BaseException] = None



class Tracer:
    """The tracer thread and what it keeps: the watched processes (``Watched``), the requests callers ``ask`` it
    to run (``seize_process``, ``detach_process``, ``hold_processes``, ``release``...), and the reports
    (``Held`` crashes, ``Exit``s) ``next_report`` gives.  ``close`` ends it: the kernel then detaches every
    tracee in one pass, as it does should this process die (even ``kill -9``)."""

    def __init__(self) -> None:
        self._procs: Dict[int, Watched] = {}
        self._owner: Dict[int, int] = {}  # tid -> its process
        self._deferred: Dict[int, int] = {}  # tid -> the stop status taken while its process was held
        self._parked: Set[int] = set()  # exited leaders whose parent (this process) reaps them
        self._requests: Deque[_Request] = collections.deque()
        self._reports: Deque[Union[Held, Exit]] = collections.deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._closing = False
        self._failure: Optional[BaseException] = None
        self._tid = 0
        self._bell: Optional[Bell] = None
        self._thread = threading.Thread(target=self._run, name="tfnative-crash", daemon=True)
        start_thread(self._thread)

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

    def next_report(self, timeout: float) -> Optional[Union[Held, Exit]]:
        """The next crash (``Held``: marked taken) or exit of a watched process, waiting ``timeout`` seconds at
        most for one.  Raises what ended the tracer thread, should it have failed."""
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
            if isinstance(item, Held):
                item.taken = True
        return item

    def close(self) -> None:
        """Let every thread go: the tracer thread ends and the kernel detaches its tracees (a crash still held
        gets its signal).  Returns once they are let go (bounded)."""
        with self._lock:
            self._closing = True
        self.ring()
        deadline = time.monotonic() + ANSWER_S
        while self._thread.is_alive() and time.monotonic() < deadline:
            self._thread.join(0.05)
        if self._tid:  # join returns before the thread has left the kernel's list; its tracees are let go then
            gone = "/proc/self/task/%d" % self._tid
            while os.path.exists(gone) and time.monotonic() < deadline:
                time.sleep(0.0002)

    def ask(self, fn: Callable[[], Any]) -> Any:
        """Have the tracer thread run ``fn`` (ptrace answers only it); its result, or what it raised."""
        request = _Request(fn)
        with self._lock:
            if self._closing or not self._thread.is_alive():
                raise TfnativeError("the crash watch has ended%s" % (
                    ": %s" % self._failure if self._failure is not None else ""))
            self._requests.append(request)
        self.ring()
        if not request.done.wait(ANSWER_S):
            raise TfnativeError("the crash watch did not answer within %.0f s" % ANSWER_S)
        if request.error is not None:
            raise request.error
        return request.result

    def ring(self) -> None:
        """Wake the tracer thread: its ``_wake``, and the bell where it sleeps in the kernel."""
        self._wake.set()
        bell = self._bell
        if bell is not None:
            bell.ring()

    def _run(self) -> None:
        """Serve requests, answer stops, until ``close``; its end lets every tracee go.

        Between stops the thread sleeps in the kernel (``waitid`` without ``WNOHANG``): a stop wakes it at
        once, and so does a request, through the bell (``ring``); where there is no bell, or a crash is held
        (its ``CRASH_HOLD_S`` runs), or a leader waits for its parent, it looks every ``IDLE_S`` instead."""
        self._tid = threading.get_native_id()
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())  # the process's signals go elsewhere
        self._bell = Bell.start()
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

    def _report(self, item: Union[Held, Exit]) -> None:
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
            self.release(proc.pid, (held.tid, held.signo))
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
            info = ptrace.look()
        except ChildProcessError:
            return None
        if info is None:
            return None
        if self._bell is not None and info.si_pid == self._bell.pid:
            self._answer_bell(info)
            return None
        return self._take(info.si_pid, info)

    def _sleep(self) -> None:
        """Sleep in the kernel until a tracee stops or exits, or the bell rings (answered here)."""
        try:
            info = ptrace.look(block=True)
        except ChildProcessError:  # nothing to wait for (the bell gone): look again shortly
            self._wake.wait(IDLE_S[1])
            return
        if info is not None and self._bell is not None and info.si_pid == self._bell.pid:
            self._answer_bell(info)

    def _answer_bell(self, info: os.waitid_result) -> None:
        bell = self._bell
        assert bell is not None
        if ptrace.ended(info):  # killed by someone: look every IDLE_S instead
            bell.stop()
            self._bell = None
        else:
            bell.answer()

    def _peek(self, tid: int) -> Optional[Tuple[int, int]]:
        try:
            info = ptrace.look(tid)
        except ChildProcessError:  # not ours any more (gone unseen: an exec by another thread)
            self._forget(tid)
            return None
        if info is None:
            return None
        return self._take(tid, info)

    def _take(self, tid: int, info: os.waitid_result) -> Optional[Tuple[int, int]]:
        """Consume the stop or exit ``info`` says ``tid`` has: (tid, its wait status).  A stop is taken with
        ``WSTOPPED`` alone, which never reaps; the exit of a leader whose parent is this process is left to
        it (its status made from ``info``)."""
        ended = ptrace.ended(info)
        proc = self._procs.get(tid) if ended else None
        if proc is not None and proc.own_child:
            self._parked.add(tid)
            return tid, ptrace.end_status(info)
        try:
            status = ptrace.take(tid) if ended else ptrace.take_stop(tid)
        except ChildProcessError:
            self._forget(tid)
            return None
        return None if status is None else (tid, status)

    def _unpark(self) -> None:
        for pid in list(self._parked):
            if not ptrace.unreaped(pid):  # its parent has reaped it
                self._parked.discard(pid)

    # Answering a stop.

    def _handle(self, tid: int, status: int) -> None:
        pid = self._owner.get(tid)
        if pid is None:
            pid = self._adopt(tid)
        if pid is None:  # not a thread of a watched process (left over from one let go): let it run
            if os.WIFSTOPPED(status):
                ptrace.detach(tid)
            return
        proc = self._procs[pid]
        if not os.WIFSTOPPED(status):
            self._gone(proc, tid, status)
        elif proc.held:  # answered when it is let go
            self._deferred[tid] = status
            if status >> 16 == ptrace.PTRACE_EVENT_CLONE:
                self._cloned(proc, tid)
        else:
            self._answer(proc, tid, status)

    def _answer(self, proc: Watched, tid: int, status: int) -> None:
        sig, event = os.WSTOPSIG(status), status >> 16
        if event == ptrace.PTRACE_EVENT_STOP and sig in STOPPING:
            proc.stopped[tid] = sig
        else:  # any other stop: it runs (SIGCONT ends a group stop with an event stop of SIGTRAP)
            proc.stopped.pop(tid, None)
        if event == ptrace.PTRACE_EVENT_CLONE:
            self._cloned(proc, tid)
            ptrace.cont(tid)
        elif event == ptrace.PTRACE_EVENT_STOP and sig in STOPPING:  # a group stop: stopped until SIGCONT
            ptrace.listen(tid)
        elif event:  # an interrupt, a new thread's first stop
            ptrace.cont(tid)
        elif sig in CRASH_SIGNALS and not proc.dying and fatal(proc.pid, sig):
            self._crashed(proc, tid, sig)
        else:
            if sig in CRASH_SIGNALS:
                proc.handled[tid] = sig  # the program's handler sees it: a crash only if raised again, fatal
            ptrace.cont(tid, sig)  # handed on with its own siginfo

    def _crashed(self, proc: Watched, tid: int, sig: int) -> None:
        """A fatal crash signal on its way to ``tid``: hold the process, read its threads, wait for ``poll``."""
        info = self._read_siginfo(tid, proc.pid)
        self._deferred[tid] = (sig << 8) | 0x7F
        threads, warnings = self._hold(proc, tid)
        proc.crash = Held(proc.pid, tid, sig, info, threads, warnings, proc.handled.get(tid) == sig,
                           time.monotonic() + CRASH_HOLD_S)
        self._report(proc.crash)

    @staticmethod
    def _read_siginfo(tid: int, pid: int) -> Siginfo:
        out = Siginfo()
        info = ptrace.getsiginfo(tid)
        if info is None:
            return out
        out.code = info.code
        if out.code > 0:  # from the kernel: a fault's address
            out.address = info.address
        elif info.sender > 0 and info.sender != pid:  # SI_USER, SI_TKILL, SI_QUEUE: from a process (``abort`` is
            out.sender = info.sender  # the process itself)
        return out

    def _cloned(self, proc: Watched, tid: int) -> None:
        new = ptrace.geteventmsg(tid)
        if new:
            self._own(proc, new)

    def _own(self, proc: Watched, tid: int) -> None:
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

    def _gone(self, proc: Watched, tid: int, status: int) -> None:
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

    # Holding a process: every thread interrupted and its registers read (``ptrace.hold_traced``); let go by
    # ``release``.

    def _hold(self, proc: Watched, stopped: int = 0, interrupted: bool = False) -> Tuple[List[ThreadRegs], List[str]]:
        """Stop every thread of ``proc`` (``stopped``: already is; ``interrupted``: all were just interrupted) and
        read its registers, within ``STOP_WAIT_S``; a thread that does not stop in time is left out, and said
        in the warnings."""
        proc.held = True
        interrupting = [] if interrupted else [t for t in sorted(proc.threads)
                                               if t != stopped and t not in self._deferred]
        return ptrace.hold_traced(proc.pid, proc.threads, interrupting, self._settle, lambda tid: self._own(proc, tid))

    def _settle(self, tid: int) -> None:
        """The stop (kept for the release) or exit a thread that did not stop has pending, taken."""
        got = self._peek(tid)
        if got is not None:
            self._handle(*got)

    def hold_processes(self, pids: Sequence[int]
                        ) -> Dict[int, Union[Tuple[List[ThreadRegs], List[str]], TfnativeError]]:
        """Every one of ``pids`` held: interrupted all together first, then each one's registers read."""
        for pid in pids:
            proc = self._procs.get(pid)
            if proc is not None and not proc.held:
                for tid in proc.threads:
                    if tid not in self._deferred:
                        ptrace.interrupt(tid)
        out: Dict[int, Union[Tuple[List[ThreadRegs], List[str]], TfnativeError]] = {}
        for pid in pids:
            try:
                out[pid] = self._hold_process(pid, interrupted=True)
            except TfnativeError as exc:
                out[pid] = exc
        return out

    def release_all(self, pids: List[int]) -> None:
        for pid in pids:
            self.release(pid, None)

    def _hold_process(self, pid: int, interrupted: bool = False) -> Tuple[List[ThreadRegs], List[str]]:
        proc = self._procs.get(pid)
        if proc is None:
            raise TfnativeError("process %d is not watched (it exited?)" % pid)
        if proc.held:
            raise TfnativeError("process %d is held for its crash" % pid)
        threads, warnings = self._hold(proc, interrupted=interrupted)
        if not threads:
            self.release(pid, None)
            raise TargetGone(pid)
        return threads, warnings

    def release(self, pid: int, deliver: Optional[Tuple[int, int]]) -> None:
        """Let a held process run: ``deliver`` (tid, signal) resumed with its fatal signal first; every stop
        kept meanwhile answered as it would have been; the threads stopped by the hold resume at their
        interrupt stop (``_answer``)."""
        proc = self._procs.get(pid)
        if proc is None:
            return
        proc.held = False
        proc.crash = None
        if deliver is not None:
            proc.dying = True
        ptrace.release_traced(proc.threads, self._deferred, lambda tid, status: self._answer(proc, tid, status),
                              deliver)

    # Seizing and letting go.

    def seize_process(self, pid: int) -> None:
        if pid in self._procs:
            return
        try:
            own = int(procfs.status(pid).get("PPid", "0")) == os.getpid()
        except (OSError, ValueError):
            raise TargetGone(pid) from None
        if procfs.exited(pid):
            raise TargetGone(pid)
        proc = Watched(pid, own)
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
            self.detach_process(pid)
            raise

    def _seize(self, proc: Watched, tid: int) -> bool:
        """Trace ``tid``: True, or False where it is gone or going (a zombie leader: nothing to trace)."""
        err = ptrace.seize(tid, ptrace.PTRACE_O_TRACECLONE)
        if not err:
            self._own(proc, tid)
            return True
        if err == errno.ESRCH:
            return False  # it exited meanwhile
        if err == errno.EPERM:
            if procfs.state(proc.pid, tid) in (None, "Z", "X"):
                return False  # exiting, or a zombie leader (pthread_exit): nothing to trace
            if ptrace.traced_by_me(proc.pid, tid):
                self._own(proc, tid)  # started by a thread seized before it (PTRACE_O_TRACECLONE)
                return True
        raise TfnativeError(ptrace_refused_message(proc.pid, "ptrace(PTRACE_SEIZE, %d): %s"
                                                   % (tid, os.strerror(err))))

    def detach_process(self, pid: int) -> None:
        """Let ``pid`` go for good: held, every stop's signal handed back with the detach, a crash still held
        delivered."""
        proc = self._procs.get(pid)
        if proc is None:
            return
        if proc.crash is not None:
            with self._lock:
                if not proc.crash.taken:
                    self._reports.remove(proc.crash)
            self.release(pid, (proc.crash.tid, proc.crash.signo))
        self._hold(proc)
        for tid in sorted(proc.threads):
            self._settle(tid)  # the stop it is in, if not taken yet: its signal must not be lost
        with self._lock:
            self._procs.pop(pid, None)
        ptrace.detach_traced(proc.threads, self._deferred)
        for tid in proc.threads:
            self._owner.pop(tid, None)
