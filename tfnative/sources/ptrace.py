"""tfnative's one ptrace engine: every ptrace request and every wait on a tracee is made here.

* The primitives (``seize`` with options, ``interrupt``, ``listen``, ``cont`` with a signal, ``detach``,
  ``getregs``, ``getsiginfo``, ``geteventmsg``) and the waits on a tracee (``look``, ``take_stop``, ``take``,
  ``unreaped``), always with ``__WALL | __WNOTHREAD``: a wait of the tracer's thread group would take a
  tracee's stops as its own child's.  ptrace answers only the thread that seized: each is called on it.
* The signal that stopped a process nobody traces (``group_stop_signal``: a seize, its report, a detach).
* A process kept traced for good (``tfnative watch``'s crash catcher, ``watch/tracer.py``, which decides what
  each stop means): held (``hold_traced``: every thread interrupted, its registers read), let go with the stops
  kept meanwhile answered as they would have been (``release_traced``), untraced (``detach_traced``).
* ``Frozen``: every thread of a process held for a moment, its registers read, let go, what ``tfnative
  stack`` needs when it does not start gdb (see ``snapshot/pipeline.py``), and ``attach``/``core --pid``:

* Threads are taken with ``PTRACE_SEIZE`` + ``PTRACE_INTERRUPT``, never with a
  SIGSTOP, by a thread of ours made for the hold; they are let go by letting
  that thread end, and the kernel detaches them in one pass, as it does
  should tfnative die (even ``kill -9``) while it holds them: they run on,
  with no signal left pending (``Frozen``).
* A signal that arrives while a thread is held reaches it after the detach,
  so the target loses nothing.
* A process that was stopped (job control) stays stopped after the detach.
* A thread created while the others were being seized is seized too: the
  hold ends only when the process has no thread it does not hold.
* Every wait is bounded: a thread that does not reach its stop within
  ``STOP_WAIT_S`` ends the hold with one line saying so, a process that
  exits while held is let go at once (``TargetGone``: its parent can reap
  it), and Ctrl-C on the caller's thread ends the hold in milliseconds.

Linux on x86-64 only: ``Unsupported`` elsewhere, and the caller uses gdb.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import threading
import time
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from ..core import procfs
from ..errors import PtraceRefused, TargetGone, TfnativeError, Unsupported

__all__ = ["Frozen", "REGISTERS", "ensure_not_stopped"]

# ptrace(2)'s requests, options and events (linux/ptrace.h), and waitid's flags: the requests are made here alone;
# a tracer's policy (``watch/tracer.py``) reads the options and events, ``watch/job.py`` the flags.
PTRACE_CONT = 7
PTRACE_GETREGS = 12
PTRACE_DETACH = 17
PTRACE_GETEVENTMSG = 0x4201
PTRACE_GETSIGINFO = 0x4202
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_LISTEN = 0x4208
PTRACE_O_TRACECLONE = 0x8
PTRACE_EVENT_CLONE = 3
PTRACE_EVENT_STOP = 128
WALL = 0x40000000
WNOTHREAD = 0x20000000  # wait for the calling thread's own tracees only: never for this process's children
STOP_WAIT_S = 5.0  # the longest the threads may take, all together, to reach their stops once interrupted

# struct user_regs_struct (x86-64), in order.
REGISTERS = ("r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx",
             "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base",
             "ds", "es", "fs", "gs")


_call: Optional[Callable[[int, int, int, int], int]] = None


def ptrace_call() -> Callable[[int, int, int, int], int]:
    """libc's ptrace(2), loaded once: -1 and errno (``ctypes.get_errno``) on failure."""
    global _call
    if _call is None:
        fn = ctypes.CDLL(None, use_errno=True).ptrace
        fn.restype = ctypes.c_long
        fn.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_size_t, ctypes.c_size_t)  # plain ints: no boxing
        _call = fn
    return _call


REGS_SIZE = 8 * len(REGISTERS)
CLD_EXITED, CLD_KILLED, CLD_DUMPED = 1, 2, 3  # waitid's si_code of an end (a stop is CLD_TRAPPED/CLD_STOPPED)
TRACEE = WALL | WNOTHREAD  # every wait on a tracee: its threads too, and only the calling thread's own tracees
ThreadRegs = Tuple[int, str, Dict[str, int]]  # (tid, name, registers), as ``sources/base.ThreadRegs``


# --- The requests: each on a tracee of the calling thread (ptrace answers only the thread that seized). ---

def seize(tid: int, options: int = 0) -> int:
    """PTRACE_SEIZE ``tid`` with ``options`` (``PTRACE_O_*``): it runs on.  0, or the errno of the refusal."""
    return ctypes.get_errno() if ptrace_call()(PTRACE_SEIZE, tid, 0, options) == -1 else 0


def interrupt(tid: int) -> bool:
    """PTRACE_INTERRUPT: ``tid`` stops at its next chance (fails only for a thread gone, which its wait says)."""
    return ptrace_call()(PTRACE_INTERRUPT, tid, 0, 0) != -1


def listen(tid: int) -> bool:
    """PTRACE_LISTEN: a thread in a group stop stays stopped until SIGCONT, its tracer told of the next stop."""
    return ptrace_call()(PTRACE_LISTEN, tid, 0, 0) != -1


def cont(tid: int, sig: int = 0) -> bool:
    """PTRACE_CONT: ``tid`` runs on from its stop, ``sig`` (0: none) delivered with its own siginfo."""
    return ptrace_call()(PTRACE_CONT, tid, 0, sig) != -1


def detach(tid: int, sig: int = 0) -> bool:
    """PTRACE_DETACH: ``tid`` untraced, running on from its stop with ``sig`` (0: none)."""
    return ptrace_call()(PTRACE_DETACH, tid, 0, sig) != -1


def getregs_at(tid: int, where: int) -> bool:
    """PTRACE_GETREGS into the ``user_regs_struct`` at address ``where``: False (errno set) where ``tid`` is not
    in a ptrace stop (on its way, gone)."""
    return ptrace_call()(PTRACE_GETREGS, tid, 0, where) != -1


def getregs(tid: int) -> Optional[Dict[str, int]]:
    """``tid``'s registers by name; None where it is not in a ptrace stop."""
    area = ctypes.create_string_buffer(REGS_SIZE)
    if not getregs_at(tid, ctypes.addressof(area)):
        return None
    with memoryview(area).cast("B") as raw:
        words = raw[:REGS_SIZE].cast("Q").tolist()
    return dict(zip(REGISTERS, words))


class Siginfo(NamedTuple):
    """What PTRACE_GETSIGINFO says of the signal a thread is stopped for (x86-64's siginfo_t)."""

    signo: int
    code: int  # > 0: from the kernel (a fault); SI_USER, SI_TKILL, SI_QUEUE (<= 0): sent by a process
    sender: int  # si_pid, where a process sent it
    address: int  # si_addr, of a fault (the same bytes as si_pid: one of the two means something)


def getsiginfo(tid: int) -> Optional[Siginfo]:
    """The siginfo of the signal ``tid`` is stopped for; None where it cannot be read."""
    raw = ctypes.create_string_buffer(128)
    if ptrace_call()(PTRACE_GETSIGINFO, tid, 0, ctypes.addressof(raw)) == -1:
        return None
    data = raw.raw
    return Siginfo(int.from_bytes(data[0:4], "little", signed=True), int.from_bytes(data[8:12], "little", signed=True),
                   int.from_bytes(data[16:20], "little", signed=True), int.from_bytes(data[16:24], "little"))


def geteventmsg(tid: int) -> Optional[int]:
    """PTRACE_GETEVENTMSG at a ptrace event stop (the new thread's id at PTRACE_EVENT_CLONE); None where none."""
    word = ctypes.c_ulong(0)
    if ptrace_call()(PTRACE_GETEVENTMSG, tid, 0, ctypes.addressof(word)) == -1:
        return None
    return int(word.value)


def traced_by_me(pid: int, tid: int) -> bool:
    """Whether thread ``tid`` of ``pid`` is traced by the calling thread (a thread started by one it had seized
    with PTRACE_O_TRACECLONE is, before its tracer hears of it)."""
    try:
        return int(procfs.status(pid, tid).get("TracerPid", "0")) == threading.get_native_id()
    except (OSError, ValueError):
        return False


# --- The waits on a tracee: ``__WALL | __WNOTHREAD`` always (a wait of the tracer's thread group would take a
# tracee's stops as its own child's: a crash's SIGSEGV read as a death, the tracer never told). ---

def look(tid: int = 0, block: bool = False) -> Optional[os.waitid_result]:
    """A stop or end of ``tid`` (0: of any tracee or child of the calling thread), left to be taken
    (``WNOWAIT``); None where there is none (``block``: sleep until there is).  ChildProcessError where ``tid`` is
    not ours (or the thread has none)."""
    flags = os.WEXITED | os.WSTOPPED | os.WNOWAIT | TRACEE | (0 if block else os.WNOHANG)
    info = os.waitid(os.P_PID if tid else os.P_ALL, tid, flags)
    return info if info is not None and info.si_pid else None


def take_stop(tid: int) -> Optional[int]:
    """Take ``tid``'s stop (``WSTOPPED`` alone, which never reaps): its wait status, ``(event << 16 | sig << 8) |
    0x7f``; None where it is not stopped.  ChildProcessError where it is not ours."""
    got = os.waitid(os.P_PID, tid, os.WSTOPPED | os.WNOHANG | TRACEE)
    if got is None or not got.si_pid:
        return None
    return (got.si_status << 8) | 0x7F


def take(tid: int) -> Optional[int]:
    """Take ``tid``'s stop or end (an end reaps it): its wait status; None where it has neither.
    ChildProcessError where it is not ours."""
    got, status = os.waitpid(tid, os.WNOHANG | TRACEE)
    return status if got else None


def ended(info: os.waitid_result) -> bool:
    """Whether ``look``'s ``info`` is an end (exit, signal, core), not a stop."""
    return info.si_code in (CLD_EXITED, CLD_KILLED, CLD_DUMPED)


def end_status(info: os.waitid_result) -> int:
    """The wait status of the end ``info`` says (``ended``), as ``waitpid`` would give it."""
    if info.si_code == CLD_EXITED:
        return (info.si_status & 0xFF) << 8
    return (info.si_status & 0x7F) | (0x80 if info.si_code == CLD_DUMPED else 0)


def unreaped(pid: int) -> bool:
    """Whether ``pid``, a child of the calling thread, has ended and waits to be reaped."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT | TRACEE) is not None
    except ChildProcessError:
        return False


JOB_CONTROL_STOPS = (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


def group_stop_signal(pid: int, wait_s: float = 2.0) -> Optional[int]:
    """The signal that stopped ``pid`` (job control: state ``T``, which ``/proc`` shows without the signal), where
    nobody traces it: its main thread seized, its group stop reported to us (``PTRACE_EVENT_STOP`` with the
    stopping signal; a seize of a stopped thread reports it by itself, the interrupt makes sure), detached: it
    stays stopped, as the kernel keeps the group stop.  None where it is not in a group stop, or cannot be
    seized (traced by another, refused), or does not report within ``wait_s``."""
    if seize(pid) != 0:
        return None
    status: Optional[int] = None
    try:
        interrupt(pid)
        deadline = time.monotonic() + wait_s
        while status is None and time.monotonic() < deadline:
            status = take(pid)
            if status is None:
                time.sleep(0.001)
    except ChildProcessError:  # gone
        return None
    finally:
        detach(pid)  # (a thread not in its stop yet: the calling thread's end detaches it)
    if status is None or not os.WIFSTOPPED(status) or status >> 16 != PTRACE_EVENT_STOP:
        return None
    sig = os.WSTOPSIG(status)
    return sig if sig in JOB_CONTROL_STOPS else None


# --- A process kept traced for good (the crash catcher's): held, let go, detached. ---

def hold_traced(pid: int, threads: Set[int], interrupting: Iterable[int], settle: Callable[[int], None],
                own: Callable[[int], None]) -> Tuple[List[ThreadRegs], List[str]]:
    """Every thread of ``pid`` that the calling thread traces (``threads``, kept current by the caller) stopped and
    its registers read, within ``STOP_WAIT_S``: ``interrupting`` is interrupted first (the others are stopped
    already, or were just interrupted).  A thread not stopped yet has its pending stop or end taken by
    ``settle(tid)`` (the tracer's to keep for the release, or to drop an ended thread from ``threads``); a thread
    traced by us but not in ``threads`` (started as the hold began) is taken in by ``own(tid)``.  A thread on its
    way out is left out, and one that does not stop in time too, said in the warnings.  The threads stay
    stopped: ``release_traced`` lets them go."""
    for tid in interrupting:
        interrupt(tid)  # fails only for a thread gone, which its wait says
    regs: Dict[int, Dict[str, int]] = {}
    skipped: Set[int] = set()
    warnings: List[str] = []
    deadline = time.monotonic() + STOP_WAIT_S
    pause = 0.00005
    while True:
        pending = [t for t in sorted(threads) if t not in regs and t not in skipped]
        if not pending and not _unlisted(pid, threads, skipped, own):
            break
        for tid in pending:
            taken = getregs(tid)
            if taken is not None:
                regs[tid] = taken
                continue
            settle(tid)  # its stop (kept for the release) or its end
            if tid in threads and procfs.exiting(pid, tid):
                skipped.add(tid)  # a zombie leader (pthread_exit), a thread on its way out
        if time.monotonic() > deadline:
            late = [t for t in threads if t not in regs and t not in skipped]
            if late:
                warnings.append("thread(s) %s of process %d did not stop within %.0f s: not shown"
                                % (", ".join(map(str, sorted(late))), pid, STOP_WAIT_S))
            break
        if pending and all(t not in regs for t in pending):
            time.sleep(pause)
            pause = min(pause * 2, 0.002)
    order = sorted(regs, key=lambda t: (t != pid, t))
    return [(t, procfs.comm(pid, t), regs[t]) for t in order], warnings


def _unlisted(pid: int, threads: Set[int], skipped: Set[int], own: Callable[[int], None]) -> bool:
    """Threads of ``pid`` that are ours but not in ``threads`` (started as the hold began): taken in by ``own``."""
    count = procfs.num_threads(pid)
    if count is None or count <= len(threads):
        return False
    try:
        tids = procfs.tids(pid)
    except ProcessLookupError:
        return False
    found = False
    for tid in tids:
        if tid not in threads and tid not in skipped and traced_by_me(pid, tid):
            own(tid)
            found = True
    return found


def release_traced(threads: Iterable[int], kept: Dict[int, int], answer: Callable[[int, int], None],
                   deliver: Optional[Tuple[int, int]] = None) -> None:
    """Let a process held by ``hold_traced`` run: ``deliver`` (tid, signal) resumed with its signal first; then
    every stop ``kept`` while it was held (tid -> wait status, popped) answered by ``answer(tid, status)`` as it
    would have been at once; a thread the hold interrupted resumes from its interrupt stop so answered."""
    if deliver is not None:
        tid, sig = deliver
        kept.pop(tid, None)
        cont(tid, sig)
    for tid in sorted(threads):
        status = kept.pop(tid, None)
        if status is not None:
            answer(tid, status)


def detach_traced(threads: Iterable[int], kept: Dict[int, int]) -> None:
    """Untrace every one of ``threads`` (held, each in a ptrace stop): a thread stopped for a signal (its
    status ``kept``, popped) gets it with the detach, so that no signal is lost; the others run on."""
    for tid in sorted(threads):
        status = kept.pop(tid, 0)
        sig = os.WSTOPSIG(status) if status and os.WIFSTOPPED(status) and not status >> 16 else 0
        detach(tid, sig)


class Frozen:
    """Every thread of a process stopped, its registers read: ``Frozen(pid).hold(while_held)`` runs
    ``while_held(frozen)`` while they are, and returns once they run again; ``frozen.regs[tid]`` holds each
    one's registers.

    ptrace ties a tracee to the thread that seized it, and the threads are
    traced by a thread of ours made for the hold, ``tfnative-hold``: it seizes
    them (which stops nothing), stops them all, reads each one's registers,
    runs ``while_held`` and ends.  The kernel detaches every tracee of a tracer
    that exits, in one pass ("If the tracer dies, all tracees are
    automatically detached and restarted, unless they were in group-stop",
    ptrace(2)), where one ``PTRACE_DETACH`` a thread made the last one wait
    ~10 µs for each one before it in this VM; and the thread that held them
    lets them go itself, with no wake-up of another thread in between.  That
    pass leaves a stopping signal where it was, so a thread stopped for a
    signal gets it, and a process stopped by job control stays stopped.  It
    is also what happens should tfnative die while it holds them.

    A thread's registers are read as soon as it is in a ptrace stop, with no
    ``waitpid`` first: the stop the interrupt causes is the usual one, and
    only a thread not there yet (still on its way, or gone) is waited for,
    never by a blocking ``waitpid``: the leader of a process that exits while
    held reports its exit only once its other threads are reaped, so a
    ``waitpid(leader)`` would wait for ever, and the process's parent with it
    (``_stopped``).  A process found gone (``procfs.exited``) ends the hold
    with ``TargetGone``.
    """

    def __init__(self, pid: int) -> None:
        system = os.uname()
        if system.sysname != "Linux" or system.machine != "x86_64":
            raise Unsupported("the gdb-free snapshot reads x86-64 Linux registers only")
        self.pid = pid
        self.held: Dict[int, None] = {}  # the threads seized and not seen gone, in the order seized
        self.order: List[int] = []  # the threads whose registers were read, in ``words``' order
        self.exited: Set[int] = set()  # zombie or exiting threads: the leader after pthread_exit
        self.started = 0.0  # time.monotonic() as the first thread was stopped
        self.held_s = 0.0  # from then to the release
        self._regs: Optional[Dict[int, Dict[str, int]]] = None
        self._area = ctypes.create_string_buffer(0)  # user_regs_struct after user_regs_struct, ``order``'s
        self._tracer_tid = 0
        self._error: Optional[BaseException] = None
        self._deadline = 0.0  # time.monotonic() by which every interrupted thread must have stopped
        self._abandon = False  # set by the caller's thread (Ctrl-C): the tracer ends the hold at its next wait
        self.lost = False  # a thread exited during the hold

    def hold(self, while_held: Callable[[Frozen], None]) -> None:
        """Stop every thread, run ``while_held(self)`` on the tracer thread, let them go.  Returns once they
        are let go, or raises there what the hold or ``while_held`` raised."""
        tracer = threading.Thread(target=self._trace, args=(while_held,), name="tfnative-hold", daemon=True)
        tracer.start()
        try:
            tracer.join()
        except BaseException:  # Ctrl-C here: the tracer ends the hold at its next wait, in milliseconds
            self._abandon = True
            raise
        finally:  # waited for all the same, bounded (its waits are; a read stuck in the kernel is not let hang us)
            deadline = time.monotonic() + STOP_WAIT_S + 5.0
            while tracer.is_alive() and time.monotonic() < deadline:
                tracer.join(0.05)
            self._gone()
        if tracer.is_alive():
            raise TfnativeError("the hold of process %d did not end within %.0f s" % (self.pid, STOP_WAIT_S + 5))
        # After the release, one read of /proc: a process that exited while held, or whose end made the hold
        # fail, is said to be gone rather than by what failed as it went.
        if isinstance(self._error, TargetGone) or procfs.exited(self.pid):
            raise TargetGone(self.pid)
        if self._error is not None:
            raise self._error

    def _trace(self, while_held: Callable[[Frozen], None]) -> None:
        """The tracer thread: seize, hold, ``while_held``; its end detaches every thread it held."""
        self._tracer_tid = threading.get_native_id()
        try:
            self._seize_all()  # PTRACE_SEIZE stops nothing: done before the hold, which it does not lengthen
            self.started = time.monotonic()
            self._deadline = self.started + STOP_WAIT_S
            self._hold_all()
            if self.lost and procfs.exited(self.pid):
                raise TargetGone(self.pid)  # nothing to copy: let go at once (its parent reaps it)
            while_held(self)
        except BaseException as exc:  # noqa: BLE001 - raised again by hold(), on the caller's thread
            self._error = exc

    def _gone(self) -> None:
        """Wait until the tracer thread has left the kernel's thread list (``join`` returns before its exit
        itself): its tracees are detached then."""
        if self._tracer_tid:
            gone = "/proc/self/task/%d" % self._tracer_tid
            deadline = time.monotonic() + 5.0
            while os.path.exists(gone) and time.monotonic() < deadline:
                time.sleep(0.0001)
        if self.started and not self.held_s:
            self.held_s = time.monotonic() - self.started

    def words(self) -> memoryview:
        """The registers read in the hold as 64-bit words: ``len(REGISTERS)`` a thread, in ``order``."""
        return memoryview(self._area).cast("B")[: len(self.order) * REGS_SIZE].cast("Q")

    @property
    def tids(self) -> List[int]:
        return sorted(self.order, key=lambda t: (t != self.pid, t))

    @property
    def regs(self) -> Dict[int, Dict[str, int]]:
        """tid -> its registers by name; made from the registers' area on first use (after the hold, where it
        costs the target nothing)."""
        if self._regs is None:
            with self.words() as words:
                values, count = words.tolist(), len(REGISTERS)
            self._regs = {tid: dict(zip(REGISTERS, values[k * count: (k + 1) * count]))
                          for k, tid in enumerate(self.order)}
        return self._regs

    def _list(self) -> List[int]:
        try:
            return procfs.tids(self.pid)
        except ProcessLookupError:
            raise Unsupported("process %d is gone" % self.pid) from None

    def _seize(self, tid: int) -> bool:
        """PTRACE_SEIZE one thread (it runs on); False where it is gone or a zombie leader."""
        err = seize(tid)
        if err:
            if err == errno.ESRCH:  # it exited meanwhile
                return False
            if err == errno.EPERM:  # the kernel refuses an exiting thread too
                state = procfs.state(self.pid, tid)
                if state == "Z":
                    self.exited.add(tid)  # a leader gone by pthread_exit: its threads live on
                    return False
                if state in (None, "X"):
                    return False  # it was exiting, and is gone now
            raise PtraceRefused("ptrace(PTRACE_SEIZE, %d): %s" % (tid, os.strerror(err)))
        self.held[tid] = None
        return True

    def _seize_all(self) -> None:
        """Seize every thread, the last listed first: the kernel's pass at the tracer's exit lets go of the
        last seized first, so that the first thread stopped (the one that waits longest) is let go first."""
        for tid in reversed(self._list()):
            if tid not in self.held and tid not in self.exited:
                self._seize(tid)
        self._room(len(self.held))

    def _room(self, count: int) -> None:
        """Room in the registers' area for ``count`` threads (made before the hold; grown only for threads
        started during it)."""
        if len(self._area) < count * REGS_SIZE:
            area = ctypes.create_string_buffer((count + 64) * REGS_SIZE)
            ctypes.memmove(area, self._area, len(self.order) * REGS_SIZE)
            self._area = area

    def _interrupt(self, tids: List[int]) -> None:
        for tid in tids:
            interrupt(tid)  # fails only for a thread gone meanwhile, which the wait sees

    def _hold_all(self) -> None:
        """Stop every seized thread and read its registers as soon as it has stopped; then the threads
        started meanwhile, until the process has no thread that is not held."""
        pending = list(reversed(self.held))  # stopped in the order listed
        self._interrupt(pending)
        for _round in range(100):
            self._take(pending)
            if procfs.num_threads(self.pid) == len(self.held) + len(self.exited):
                return  # every thread the process has is held (or a zombie leader): no listing in the hold
            new = [t for t in self._list() if t not in self.held and t not in self.exited]
            if not new:
                return
            pending = [t for t in new if self._seize(t)]
            self._room(len(self.order) + len(pending))
            self._interrupt(pending)
        raise Unsupported("the threads of process %d keep changing" % self.pid)

    def _take(self, tids: List[int]) -> None:
        """Read each interrupted thread's registers into the area as soon as it is stopped.  The target
        waits on this loop: the usual thread is stopped by now and costs one system call; one that is not
        (still on its way to the stop, or gone) is waited for (``_stopped``)."""
        order = self.order
        base = ctypes.addressof(self._area)
        for tid in tids:
            where = base + len(order) * REGS_SIZE
            if not getregs_at(tid, where) and not self._stopped(tid, where):
                continue
            order.append(tid)

    def _stopped(self, tid: int, where: int) -> bool:
        """Wait until ``tid`` is stopped (an interrupt stop, a group stop, or a signal on its way to it,
        which stays the thread's: the tracer's end leaves it where it is) and read its registers at ``where``:
        True.  False where it exited meanwhile (dropped from ``held``).

        Polled, never a blocking ``waitpid``: a thread that exits is reaped here as it reports, but a leader
        whose process exits reports only once every other thread is reaped, and a thread in the kernel
        (uninterruptible sleep, a ``vfork`` parent) does not stop until it leaves it.  A zombie is dropped
        as found; the threads have ``STOP_WAIT_S`` in all, the caller's Ctrl-C ends the wait."""
        spins = 0
        while True:
            try:
                status = take(tid)
            except ChildProcessError:  # no tracee of ours: gone
                status = 0
            if status is not None and not os.WIFSTOPPED(status):  # exited (or no longer ours)
                self.held.pop(tid, None)
                self.lost = True
                return False
            if getregs_at(tid, where):
                return True
            err = ctypes.get_errno()
            if err != errno.ESRCH:
                raise Unsupported("ptrace(PTRACE_GETREGS, %d): %s" % (tid, os.strerror(err)))
            spins += 1
            if spins > 8:  # not a thread just on its way: a look at what it is doing
                if procfs.exiting(self.pid, tid):  # a leader's report waits for its threads; an exit may sleep
                    self.held.pop(tid, None)
                    self.exited.add(tid)  # listed until reaped: not to be seized again
                    self.lost = True
                    return False
                if self._abandon:
                    raise TfnativeError("interrupted")  # the caller raises its own (Interrupted)
                if time.monotonic() > self._deadline:
                    state = procfs.state(self.pid, tid)
                    raise TfnativeError(
                        "thread %d of process %d did not stop within %.0f s (state %s%s): the process was let go"
                        % (tid, self.pid, STOP_WAIT_S, state,
                           ": waiting in the kernel, uninterruptibly" if state == "D" else ""))
                time.sleep(min(0.001, 0.00002 * spins))
            else:
                os.sched_yield()

    def thread_name(self, tid: int) -> str:
        return procfs.comm(self.pid, tid)


def ensure_not_stopped(pid: int, wait_s: float = 2.0, states: Tuple[str, ...] = ("t", "T")) -> None:
    """After we let go of ``pid`` (a detach, the end of a snapshot) it must run on, whatever happened: a
    process still stopped after ``wait_s`` gets SIGCONT.  ``states``: the stops that can be ours (``"t"``
    alone after a ``Frozen`` hold, which causes no job-control stop: a SIGSTOP the process got while held is
    the sender's, and stays)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if procfs.state(pid) not in states:
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
