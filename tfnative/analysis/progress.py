"""Whether a process progressed between two readings of its counters, and when a job is hung (``tfnative watch``).

The readings (``snapshot/progress.py``) are what ``/proc`` says of each thread without stopping it: the CPU
time it has run, how often it was switched out (voluntary and not), its scheduler state and the system call it
is blocked in (number and first argument: the futex, the file descriptor, the epoll set).  The rule, per
thread, over one interval:

* a thread that ran at least ``cpu_floor_ns`` of CPU progressed (a step that is one long op: the stack does
  not change, the CPU does; a busy child);
* a thread that started or ended is progress (a pool growing or shrinking, a worker done);
* a thread that did not run and was not switched is blocked for good: no progress;
* a thread that woke (its switch count moved) progressed, except where it only went back to the very wait it
  was in: the same waiting system call (``futex``, ``epoll_wait``, ``poll``, ``select``... ``WAITS``) on the
  same object at both ends, with less CPU than the floor.  That is a timed wait that times out and waits again
  (gRPC's pollers, tf.data's autotuner, ``Event.wait(timeout)`` in a loop): it says nothing of the program.
  Such a thread is a *re-waiter*; its Python stack read the ``--no-pause`` way decides (``stacks_moved``): a
  stack that changed since the last reading is progress.
* Threads that only passed a poller's wait among them are re-waiters too (``handoffs``): over the interval one
  thread left a poll on an object (an epoll set) for a futex and another left a futex for a poll on that same
  object, each with less CPU than the floor.  That is gRPC's pollers handing the poll over to one another, at
  times at one of their timed wake-ups (measured on ``mwms_missing_peer``: seconds 5 and 30 of a hang): judged
  progress, such a hand-over put off a hang's report by up to ``hang_after``.
* A thread caught on a CPU at a reading (runnable, in no system call) with less CPU than the floor since it was
  blocked in one of ``WAITS`` is not judged yet (``"caught"``): its blocked reading stays the one the next reading
  is judged against (``carry``).  A timed wake-up is seldom caught so, but on loaded cores a woken thread waits
  its turn for a CPU for milliseconds (measured on ``mwms_missing_peer`` beside two busy processes: a gRPC thread
  caught runnable at two readings in 40 s, each then judged progress twice: a hang's report put off by up to
  ``hang_after``).  Its next reading says what it did: CPU over the floor (counted from its blocked reading,
  the floor over that time), another wait, or the same one.
* A thread that waits for the GIL at both ends (a futex inside the interpreter's runtime state,
  ``ProcessSample.runtime``: the GIL's condition variable) with less than ``GIL_WAKE_NS`` of CPU per wake-up
  is a re-waiter whatever its CPU: CPython's ``take_gil`` times out every switch interval (5 ms) to ask the
  holder to drop the GIL, 200 wake-ups a second, each ~60 µs of CPU on this VM: 11 to 13 ms a second, over the
  floor (measured on ``tests/hangs/gil_mutex.py``, whose holder never drops it: judged "ran on a CPU" at most
  readings, its hang reported only at a reading that dipped under the floor).  A thread that took the GIL and
  ran bytecode runs up to the switch interval per turn; and while it waits, progress is the holder's.
* A wait resumed as ``restart_syscall`` (``RESTART``: a timed wait or sleep that a signal or a report's hold
  interrupted) is the call it resumes, on the object its kept registers name.
* A thread of the runtime (``runtime_threads``: in a process that loaded TensorFlow, one that runs no Python and
  that TensorFlow did not name for one of its work pools: gRPC's ``event_engine``, ``grpc_global_timer``,
  ``lifeguard``, TensorFlow's coordination and collective bookkeeping threads) progresses only by its CPU over
  the floor: its wake-ups, starts and ends are ``"runtime"``, no progress (measured on an MWMS rank waiting for
  a stalled peer: 18 to 84 wake-ups in 10 s per gRPC thread, a few ms of CPU, and threads started and ended by
  gRPC's pool; judged progress, no rank of such a job was ever hung).
* A thread that woke from a sleep (``nanosleep``, ``clock_nanosleep``) progressed: passing time is what a step
  loop that sleeps at the same line every step does.  (A loop that polls a flag with ``time.sleep`` forever is
  therefore not caught; ``--progress-file`` is the exact signal there.)

A process progressed when one of its threads did.  ``Tracker`` keeps, per process, when it last progressed
(its own progress or a descendant's: a parent waiting for a busy child is not stuck), and says when the whole
job has not progressed for ``hang_after`` seconds, and which processes lag while unrelated ones move (the
stragglers).  Pure: no ``/proc``, no clock of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import AbstractSet, Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ..core.kstate import ProcessSample, ThreadSample

# x86-64 system calls in which a thread waits for something with an optional time-out (re-waits are idle).
WAITS = frozenset({7, 23, 128, 202, 232, 270, 271, 281, 441, 449})  # poll select rt_sigtimedwait futex epoll_wait
# pselect6 ppoll epoll_pwait epoll_pwait2 futex_waitv
SLEEPS = frozenset({35, 230})  # nanosleep, clock_nanosleep
# restart_syscall: a timed wait or sleep interrupted (by a report's hold, a signal) and resumed.  Measured: a
# thread in ``lock.acquire(timeout=100)`` reads ``202 0x55c3e5c25050 ...`` before ``stack --pid`` holds it and
# ``219 0x55c3e5c25050 ...`` after (the registers of the call it resumes: the same object); judged another
# call, every timed wait of a held process was progress at the next reading, and every report re-armed.
RESTART = 219
CPU_FLOOR_NS = 5_000_000  # 5 ms: below this a thread's CPU over an interval is a wake-up's cost, not work
CPU_FLOOR_SHARE = 0.01  # ... or 1% of the interval, whichever is more
GIL_WAKE_NS = 200_000  # a GIL waiter's timed wake-up costs less than this (measured ~60 µs; see the module)


@dataclass
class Judgement:
    """Whether a process progressed over an interval, why (one phrase), and its re-waiters (see the module)."""

    progressed: bool
    why: str
    rewaiters: Tuple[int, ...] = ()
    caught: Tuple[int, ...] = ()  # threads caught on a CPU between two waits: judged at the next reading
    kinds: Mapping[int, str] = field(default_factory=dict)  # tid -> what it did (``thread_kind``)


def cpu_floor_ns(interval_s: float) -> int:
    """The CPU a thread must run in an interval of ``interval_s`` seconds to count as working."""
    return max(CPU_FLOOR_NS, int(interval_s * 1e9 * CPU_FLOOR_SHARE))


def gil_wait(wait: Optional[Tuple[int, str]], runtime: Optional[Tuple[int, int]]) -> bool:
    """Whether ``wait`` is a futex wait inside the interpreter's runtime state (``runtime``): for the GIL."""
    if wait is None or runtime is None or wait[0] not in FUTEXES and wait[0] != RESTART:
        return False
    try:
        return runtime[0] <= int(wait[1], 16) < runtime[1]
    except ValueError:
        return False


def thread_kind(before: Optional[ThreadSample], after: Optional[ThreadSample], floor_ns: int,
                held: bool = False, runtime: Optional[Tuple[int, int]] = None) -> str:
    """What one thread did over the interval: ``"new"``, ``"ended"``, ``"cpu"``, ``"slept"``, ``"woke"`` (all
    progress), ``"rewait"`` (woke only to wait again on the same object), ``"caught"`` (blocked in a wait, now
    runnable with less CPU than the floor: judged at the next reading), ``"still"`` (neither ran nor woke).

    ``held``: the watcher held the process in the interval (a report's snapshot).  Holding interrupts every
    thread's system call, which the kernel restarts once it is let go: a thread back in the same call on the
    same object woke because of the watcher, whatever the call (an ``open`` of a FIFO, a ``read``; a sleep
    still counts as a sleep), and is a re-waiter, not progress.

    ``runtime``: where the interpreter's runtime state lies (``ProcessSample.runtime``); a thread that waits for
    the GIL at both ends (or is caught on a CPU after such a wait) with less than ``GIL_WAKE_NS`` of CPU per
    wake-up is judged as if under the floor (see the module)."""
    if before is None:
        return "new"
    if after is None:
        return "ended"
    ran = (after.cpu_ns - before.cpu_ns) if after.cpu_ns is not None and before.cpu_ns is not None else 0
    wakes = after.switches - before.switches if after.switches is not None and before.switches is not None else 0
    if ran >= floor_ns and not (gil_wait(before.wait, runtime) and 0 < ran < wakes * GIL_WAKE_NS and (
            gil_wait(after.wait, runtime) or after.wait is None and after.state == "R")):
        return "cpu"
    if after.state == "R" and after.wait is None and before.wait is not None and (
            before.wait[0] in WAITS or before.wait[0] == RESTART or held):
        return "caught"
    woke = wakes != 0
    if not woke and ran <= 0:
        return "still"
    if not woke:  # a little CPU without a switch: it ran on a CPU at one end (a short burst)
        return "woke" if after.state == "R" or before.state == "R" else "still"
    if after.wait is not None and before.wait is not None and same_wait(before.wait, after.wait):
        if held and after.wait[0] == RESTART:  # its own call, resumed after the watcher's hold
            return "rewait"
        call = before.wait[0] if after.wait[0] == RESTART else after.wait[0]  # (a resumed call: the one it was)
        if call in SLEEPS:
            return "slept"
        if call in WAITS or call == RESTART or held:
            return "rewait"
    return "woke"


FUTEX = 202
FUTEXES = frozenset({FUTEX, 449})  # futex, futex_waitv
POLLS = WAITS - FUTEXES  # waits on an object several threads may share in turn (an epoll set)
CONDVAR_SPAN = 64  # a pthread_cond_t (48 bytes) and its futex words: glibc's two groups' __g_signals alternate


def same_wait(a: Tuple[int, str], b: Tuple[int, str]) -> bool:
    """Whether two waits are the same: the same system call on the same object.  A futex wait is on the same
    object where the two addresses are within ``CONDVAR_SPAN`` bytes: glibc's condition variable waits on one
    of its two signal words, in turn (measured: a timed wait of gRPC's, woken every 5 s, alternates between
    ``...e58`` and ``...e5c``)."""
    if a[0] == RESTART:  # a resumed call: the call it was (its registers, the first argument, are kept)
        a = (b[0], a[1])
    elif b[0] == RESTART:
        b = (a[0], b[1])
    if a[0] != b[0]:
        return False
    if a[1] == b[1]:
        return True
    if a[0] != FUTEX:
        return False
    try:
        return abs(int(a[1], 16) - int(b[1], 16)) < CONDVAR_SPAN
    except ValueError:
        return False


_SAID = {"new": "thread %d started", "ended": "thread %d ended", "cpu": "thread %d ran on a CPU",
         "slept": "thread %d woke from a sleep", "woke": "thread %d woke and moved on"}


def handoffs(before: ProcessSample, after: ProcessSample, kinds: Mapping[int, str]) -> Set[int]:
    """The threads that woke (``kinds[tid] == "woke"``) only to pass a poller's wait among them: for a poll on
    one object (``WAITS`` but the futex calls, the same call and first argument), a thread that left it for a
    futex wait and a thread that left a futex wait for it (see the module)."""
    left: Dict[Tuple[int, str], List[int]] = {}
    entered: Dict[Tuple[int, str], List[int]] = {}
    for tid, kind in kinds.items():
        b, a = before.threads.get(tid), after.threads.get(tid)
        if kind != "woke" or b is None or a is None or b.wait is None or a.wait is None:
            continue
        if b.wait[0] in POLLS and a.wait[0] in FUTEXES:
            left.setdefault(b.wait, []).append(tid)
        elif b.wait[0] in FUTEXES and a.wait[0] in POLLS:
            entered.setdefault(a.wait, []).append(tid)
    out: Set[int] = set()
    for wait, tids in left.items():
        if wait in entered:
            out.update(tids)
            out.update(entered[wait])
    return out


def judge(before: ProcessSample, after: ProcessSample, held: bool = False,
          runtime_threads: AbstractSet[int] = frozenset()) -> Judgement:
    """Whether the process progressed from ``before`` to ``after`` (the rule of the module), without the
    re-waiters' stacks: a process whose only activity is re-waits has ``progressed`` False and names them.
    ``held``: the watcher held the process in between (``thread_kind``).  ``runtime_threads``: the threads of
    the runtime (gRPC's pollers and timers, TensorFlow's coordination threads: ``snapshot/progress.Roles``),
    whose work counts (CPU over the floor) but not their wake-ups, starts and ends (``"runtime"``)."""
    kinds = {}
    for tid in sorted(set(before.threads) | set(after.threads)):
        b = before.threads.get(tid)
        since = b.at if b is not None and b.at is not None else before.at  # a carried reading: its own time
        kinds[tid] = thread_kind(b, after.threads.get(tid), cpu_floor_ns(max(0.0, after.at - since)), held,
                                 after.runtime or before.runtime)
    for tid in handoffs(before, after, kinds):
        kinds[tid] = "rewait"
    for tid in runtime_threads:
        if kinds.get(tid, "cpu") != "cpu":
            kinds[tid] = "runtime"
    rewaiters: List[int] = []
    caught = tuple(tid for tid, kind in kinds.items() if kind == "caught")
    for tid, kind in kinds.items():
        if kind in _SAID:
            return Judgement(True, _SAID[kind] % tid, caught=caught, kinds=kinds)
        if kind == "rewait":
            rewaiters.append(tid)
    if rewaiters:
        return Judgement(False, "threads %s only woke to wait again where they waited" % ", ".join(
            str(t) for t in rewaiters), tuple(rewaiters), caught, kinds)
    if caught:
        return Judgement(False, "threads %s were caught on a CPU between two waits" % ", ".join(
            str(t) for t in caught), caught=caught, kinds=kinds)
    return Judgement(False, "no thread ran or woke", kinds=kinds)


def carry(before: ProcessSample, after: ProcessSample, caught: Iterable[int]) -> ProcessSample:
    """The reading the next one is judged against: ``after``, but for the threads ``caught`` on a CPU between
    two waits, their blocked reading of ``before`` (see the module)."""
    tids = [tid for tid in caught if tid in before.threads and tid in after.threads]
    if not tids:
        return after
    threads = dict(after.threads)
    for tid in tids:
        kept = before.threads[tid]
        threads[tid] = kept if kept.at is not None else replace(kept, at=before.at)
    return ProcessSample(after.pid, after.at, threads, after.runtime)


StackKeys = Mapping[int, Tuple[Any, ...]]  # tid -> the signature of its stack (``snapshot/samples.signature``)


def stacks_moved(before: Optional[StackKeys], after: Optional[StackKeys], tids: Iterable[int]) -> bool:
    """Whether a re-waiter's stack differs between two ``--no-pause`` readings (a thread missing from either, or
    a reading missing, is no evidence: False)."""
    if before is None or after is None:
        return False
    return any(tid in before and tid in after and before[tid] != after[tid] for tid in tids)


class Tracker:
    """When each process of a job last progressed; the job's stall and its stragglers.

    ``family(pid)``: the processes related to ``pid`` (its ancestors and descendants in the job): a process
    whose descendant progressed has progressed (it waits for a busy child), and a straggler lags behind
    processes it is not related to (its peers), not behind its own parent.
    """

    def __init__(self, start: float, hang_after: float, straggler_after: Optional[float] = None) -> None:
        self.start = start
        self.hang_after = hang_after
        self.straggler_after = straggler_after
        self.last: Dict[int, float] = {}  # pid -> when it last progressed (itself)
        self.job_last = start  # when anything of the job last progressed (a process, the progress file)
        self.step_last: Optional[float] = None  # when the job's step signal (its progress file) last moved
        self.named: Set[int] = set()  # stragglers named in their current stall

    def seen(self, pid: int, now: float) -> None:
        """``pid`` is part of the job from ``now`` on (a new process counts as progress)."""
        if pid not in self.last:
            self.last[pid] = now
            self.job_last = max(self.job_last, now)

    def progressed(self, pid: int, now: float) -> None:
        self.last[pid] = now
        self.job_last = max(self.job_last, now)
        self.named.discard(pid)

    def job_progressed(self, now: float) -> None:
        """Progress of the job as a whole (its progress file moved)."""
        self.job_last = max(self.job_last, now)

    def stepped(self, now: float) -> None:
        """The job made a step: its step signal (``--progress-file``) moved.  From the first one on, the job is
        hung when it makes no step for ``hang_after``, whatever its processes do (a rank spinning on a CPU
        while the others wait for it makes no step)."""
        self.step_last = now
        self.job_progressed(now)

    @property
    def stepping(self) -> bool:
        """Whether the step signal decides (it has moved once)."""
        return self.step_last is not None

    def gone(self, pid: int, now: float) -> None:
        """``pid`` exited: an end is progress (a worker done)."""
        self.last.pop(pid, None)
        self.named.discard(pid)
        self.job_last = max(self.job_last, now)

    def stalled_for(self, now: float) -> float:
        """Seconds since anything of the job progressed (where a step signal decides: since its last step)."""
        return now - (self.step_last if self.step_last is not None else self.job_last)

    def hung(self, now: float) -> bool:
        return self.stalled_for(now) >= self.hang_after

    def effective(self, pid: int, family: Callable[[int], Tuple[Set[int], Set[int]]]) -> float:
        """When ``pid`` or one of its descendants last progressed."""
        _ancestors, below = family(pid)
        return max([self.last.get(pid, self.start)] + [self.last[d] for d in below if d in self.last])

    def stragglers(self, now: float, recent: float,
                   family: Callable[[int], Tuple[Set[int], Set[int]]]) -> List[int]:
        """Processes not named yet that (with their descendants) have not progressed for ``straggler_after``
        seconds while a process unrelated to them progressed within ``recent`` seconds; named once per stall."""
        if self.straggler_after is None or len(self.last) < 2:
            return []
        out = []
        when = {pid: self.effective(pid, family) for pid in self.last}
        for pid in sorted(self.last):
            if pid in self.named or now - when[pid] < self.straggler_after:
                continue
            above, below = family(pid)
            peers = [q for q in self.last if q != pid and q not in above and q not in below]
            if any(now - when[q] <= recent for q in peers):
                out.append(pid)
                self.named.add(pid)
        return out
