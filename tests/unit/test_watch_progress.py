"""``analysis/progress.py``: the progress rule of ``tfnative watch`` on counters as ``/proc`` gives them, and the
tracker's hang and stragglers.  The counters of the re-waiting threads are those measured on the real hang
programs (data_map_event's tf.data thread, mwms_missing_peer's gRPC pollers: two to forty wake-ups on the same
futex or epoll set in 8 s, 0.1 to 2 ms of CPU)."""

from tfnative.analysis.progress import (
    Tracker,
    carry,
    cpu_floor_ns,
    judge,
    stacks_moved,
    thread_kind,
)
from tfnative.core.kstate import ProcessSample, ThreadSample

FUTEX, EPOLL, SLEEP, READ = 202, 232, 230, 0
MS = 1_000_000


def t(tid, cpu_ms=0.0, switches=0, state="S", wait=(FUTEX, "0x7f0001")):
    return ThreadSample(tid, int(cpu_ms * MS), switches, state, wait)


def proc(at, *threads):
    return ProcessSample(1, at, {x.tid: x for x in threads})


def test_a_thread_blocked_for_good_is_no_progress():
    j = judge(proc(0, t(1, 5, 10), t(2, 1, 3)), proc(1, t(1, 5, 10), t(2, 1, 3)))
    assert not j.progressed and j.rewaiters == () and j.why == "no thread ran or woke"


def test_cpu_is_progress_over_the_floor_only():
    assert cpu_floor_ns(1.0) == 10 * MS and cpu_floor_ns(0.2) == 5 * MS and cpu_floor_ns(5.0) == 50 * MS
    # one long op: the stack does not change, the CPU does (no switch at all)
    assert judge(proc(0, t(1, 0, 4, "R", None)), proc(1, t(1, 900, 4, "R", None))).progressed
    # 2 ms of wake-ups on the same futex in a second: a re-waiter, not progress
    j = judge(proc(0, t(1, 0, 4)), proc(1, t(1, 2, 12)))
    assert not j.progressed and j.rewaiters == (1,)


def test_waking_from_a_sleep_or_into_another_wait_is_progress():
    # a step loop that sleeps at the same line: woke from a sleep
    assert thread_kind(t(1, 0, 4, wait=(SLEEP, "0x1")), t(1, 0.2, 7, wait=(SLEEP, "0x1")), 10 * MS) == "slept"
    # woke and went on to another wait (another futex): progress
    assert thread_kind(t(1, 0, 4), t(1, 0.1, 5, wait=(FUTEX, "0x7f1000")), 10 * MS) == "woke"
    # a read that returned (data came): progress, even back on the same descriptor
    assert thread_kind(t(1, 0, 4, wait=(READ, "0x5")), t(1, 0.1, 5, wait=(READ, "0x5")), 10 * MS) == "woke"
    # gRPC's pollers: back on the same epoll set
    assert thread_kind(t(1, 0, 4, wait=(EPOLL, "0x5")), t(1, 0.3, 12, wait=(EPOLL, "0x5")), 10 * MS) == "rewait"


def test_a_wait_the_watchers_own_hold_restarted_is_no_progress():
    """A report's snapshot interrupts every system call, which the kernel restarts: a rank blocked in the
    ``open`` of a FIFO (its peer's) woke once, for the watcher, and is back in the same call: not progress
    (the straggler it is would be named again and again); without the hold, a read that returned is."""
    OPEN = 257
    blocked, again = t(1, 0, 4, wait=(OPEN, "0x7ffd10")), t(1, 0.01, 5, wait=(OPEN, "0x7ffd10"))
    assert thread_kind(blocked, again, 10 * MS) == "woke"
    assert thread_kind(blocked, again, 10 * MS, held=True) == "rewait"
    j = judge(proc(0, blocked), proc(1, again), held=True)
    assert not j.progressed and j.rewaiters == (1,)
    # still progress while held: a sleep that ended, another wait, CPU over the floor
    assert thread_kind(t(1, 0, 4, wait=(SLEEP, "0x1")), t(1, 0.2, 7, wait=(SLEEP, "0x1")), 10 * MS, True) == "slept"
    assert thread_kind(blocked, t(1, 0.1, 5, wait=(READ, "0x5")), 10 * MS, held=True) == "woke"
    assert thread_kind(blocked, t(1, 50, 9, wait=(OPEN, "0x7ffd10")), 10 * MS, held=True) == "cpu"


def test_threads_starting_or_ending_are_progress():
    assert judge(proc(0, t(1)), proc(1, t(1), t(2))).why == "thread 2 started"
    assert judge(proc(0, t(1), t(2)), proc(1, t(1))).why == "thread 2 ended"


def test_a_re_waiter_whose_stack_moved_is_progress():
    before, after = {1: ("a", 10)}, {1: ("a", 11)}
    assert stacks_moved(before, after, [1])
    assert not stacks_moved(before, dict(before), [1])
    assert not stacks_moved(None, after, [1]) and not stacks_moved(before, None, [1])
    assert not stacks_moved(before, {2: ("b",)}, [1, 2])  # a thread in one reading only: no evidence


def family_of(tree):
    """(ancestors, descendants) from {pid: parent}."""
    def ancestors(pid):
        above, p = set(), tree.get(pid)
        while p is not None:
            above.add(p)
            p = tree.get(p)
        return above

    def family(pid):
        return ancestors(pid), {q for q in tree if pid in ancestors(q)}
    return family


def test_the_tracker_says_hung_after_hang_after_seconds_without_progress():
    tr = Tracker(0.0, hang_after=3.0)
    tr.seen(10, 0.0)
    tr.progressed(10, 1.0)
    assert not tr.hung(3.9) and tr.hung(4.0) and tr.stalled_for(4.5) == 3.5
    tr.job_progressed(4.5)  # the progress file moved
    assert not tr.hung(7.0)
    tr.seen(11, 8.0)  # a new process is progress
    assert not tr.hung(10.9) and tr.hung(11.0)


def test_once_the_step_signal_has_moved_it_alone_says_whether_the_job_is_hung():
    tr = Tracker(0.0, hang_after=3.0)
    tr.seen(10, 0.0)
    tr.progressed(10, 2.0)  # start-up: the processes' progress counts
    assert not tr.stepping and not tr.hung(4.9) and tr.hung(5.0)
    tr.stepped(5.0)  # the progress file moved: from now on it decides
    for now in (6.0, 7.0, 8.0):
        tr.progressed(10, now)  # a rank spinning on a CPU: no step
    assert tr.stepping and not tr.hung(7.9) and tr.hung(8.0) and tr.stalled_for(8.5) == 3.5
    tr.stepped(8.5)
    assert not tr.hung(11.4) and tr.hung(11.5)


def test_stragglers_lag_their_peers_not_their_parent_once_per_stall():
    family = family_of({1: 0, 2: 0, 3: 0, 4: 3})  # 0 the launcher; ranks 1, 2, 3; 4 a child of rank 3
    tr = Tracker(0.0, hang_after=100.0, straggler_after=2.0)
    for pid in (0, 1, 2, 3, 4):
        tr.seen(pid, 0.0)
    for now in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
        tr.progressed(1, now)
        tr.progressed(2, now)
        tr.progressed(4, now)  # rank 3 waits for its busy child: not a straggler
    assert tr.stragglers(3.0, 0.75, family) == []  # nobody lags 2 s yet... but rank 0, the launcher:
    assert tr.effective(0, family) == 3.0  # its descendants progress
    tr.progressed(1, 4.5)
    tr.progressed(4, 4.5)
    assert tr.stragglers(4.5, 0.75, family) == []  # rank 2 stopped at 3.0: 1.5 s
    tr.progressed(1, 5.0)
    tr.progressed(4, 5.0)
    assert tr.stragglers(5.0, 0.75, family) == [2]
    tr.progressed(1, 5.5)
    assert tr.stragglers(5.5, 0.75, family) == []  # named once
    tr.progressed(2, 6.0)  # moves again: a later stall is named again
    tr.progressed(1, 8.5)
    tr.progressed(4, 8.5)
    assert tr.stragglers(8.5, 0.75, family) == [2]


def test_no_straggler_while_nobody_progresses():
    family = family_of({})
    tr = Tracker(0.0, hang_after=100.0, straggler_after=1.0)
    tr.seen(1, 0.0)
    tr.seen(2, 0.0)
    assert tr.stragglers(5.0, 0.75, family) == []


def test_a_condition_variable_s_two_futex_words_are_one_wait():
    """glibc's pthread_cond_timedwait waits on one of two adjacent signal words in turn (gRPC in
    mwms_missing_peer: 0x556edab40e5c, then 0x556edab40e58 five seconds later)."""
    a, b = t(1, 0.1, 2, wait=(FUTEX, "0x556edab40e5c")), t(1, 0.2, 3, wait=(FUTEX, "0x556edab40e58"))
    assert thread_kind(a, b, 10 * MS) == "rewait"
    far = t(1, 0.2, 3, wait=(FUTEX, "0x556edab41e58"))
    assert thread_kind(a, far, 10 * MS) == "woke"


def test_pollers_handing_their_epoll_set_over_are_re_waiters():
    """gRPC's pollers in mwms_missing_peer, 5 s into its hang (measured): one thread leaves epoll_wait on fd 5 for
    its futex, another leaves its futex for epoll_wait on fd 5, each with well under 1 ms of CPU: no progress,
    both re-waiters (their stacks decide); judged progress, it put the hang's report off by 5 s."""
    before = proc(0, t(26003, 2.056, 40, wait=(FUTEX, "0x7fe082d47840")), t(26006, 1.468, 30, wait=(EPOLL, "0x5")),
                  t(26004, 9.0, 50, wait=(FUTEX, "0x7fe082d47b40")))
    after = proc(1, t(26003, 2.435, 42, wait=(EPOLL, "0x5")), t(26006, 1.745, 32, wait=(FUTEX, "0x7fe082d48040")),
                 t(26004, 9.0, 50, wait=(FUTEX, "0x7fe082d47b40")))
    j = judge(before, after)
    assert not j.progressed and j.rewaiters == (26003, 26006), j


def test_other_moves_between_waits_stay_progress():
    epoll, fut = (EPOLL, "0x5"), (FUTEX, "0x7f0001")
    # a poller that left its epoll set with none taking it over (it went on to other work)
    assert judge(proc(0, t(1, 0, 1, wait=epoll), t(2, 0, 1, wait=fut)),
                 proc(1, t(1, 0.1, 2, wait=(FUTEX, "0x7f9000")), t(2, 0, 1, wait=fut))).progressed
    # another epoll set taken over: not the one left
    assert judge(proc(0, t(1, 0, 1, wait=epoll), t(2, 0, 1, wait=(FUTEX, "0x7f9000"))),
                 proc(1, t(1, 0.1, 2, wait=fut), t(2, 0.1, 2, wait=(EPOLL, "0x6")))).progressed
    # a producer and a consumer trading two futexes (a queue hand-off): progress, as before
    assert judge(proc(0, t(1, 0, 1, wait=(FUTEX, "0x7f1000")), t(2, 0, 1, wait=(FUTEX, "0x7f9000"))),
                 proc(1, t(1, 0.1, 2, wait=(FUTEX, "0x7f9000")), t(2, 0.1, 2, wait=(FUTEX, "0x7f1000")))).progressed
    # the hand-over with work on the way (CPU over the floor) is progress
    assert judge(proc(0, t(1, 0, 1, wait=epoll), t(2, 0, 1, wait=fut)),
                 proc(1, t(1, 30, 2, wait=fut), t(2, 0.1, 2, wait=epoll))).progressed


def test_a_thread_caught_on_a_cpu_between_two_waits_is_judged_at_the_next_reading():
    """A gRPC thread of mwms_missing_peer beside two busy processes (measured): blocked on its futex, caught
    runnable at the next reading (0.9 ms of CPU), back on the same futex at the one after: no progress at either
    reading; judged against its blocked reading, the third is a re-wait."""
    fut = (FUTEX, "0x7fd8ec194240")
    first = proc(0, t(1114, 8.078, 194, "S", fut), t(2, 1, 3))
    second = proc(1, t(1114, 8.986, 207, "R", None), t(2, 1, 3))
    third = proc(2, t(1114, 9.255, 211, "S", fut), t(2, 1, 3))
    j = judge(first, second)
    assert not j.progressed and j.caught == (1114,) and j.rewaiters == (), j
    base = carry(first, second, j.caught)
    assert base.at == 1 and base.threads[2] == second.threads[2]
    assert base.threads[1114].cpu_ns == first.threads[1114].cpu_ns and base.threads[1114].at == 0
    j = judge(base, third)
    assert not j.progressed and j.rewaiters == (1114,) and j.caught == (), j
    # judged against the reading before (caught runnable), it was progress twice
    assert judge(second, third).progressed
    assert carry(first, second, ()) is second


def test_what_a_caught_thread_did_shows_at_the_next_reading():
    fut = (FUTEX, "0x7f0001")
    first, caught = proc(0, t(1, 0, 1, "S", fut)), proc(1, t(1, 0.5, 2, "R", None))
    base = carry(first, caught, judge(first, caught).caught)
    # on to another wait, or its CPU over the floor (counted from its blocked reading, the floor over the two
    # intervals since: 20 ms), or still on a CPU with it
    assert judge(base, proc(2, t(1, 0.6, 3, "S", (FUTEX, "0x7f9000")))).why == "thread 1 woke and moved on"
    assert judge(base, proc(2, t(1, 25, 3, "S", fut))).why == "thread 1 ran on a CPU"
    assert judge(base, proc(2, t(1, 21, 2, "R", None))).why == "thread 1 ran on a CPU"
    # gil_mutex's thread waiting for the GIL (a 5 ms timed wait: 6 ms of CPU a second), caught on a CPU: 12 ms
    # over the two intervals is still a re-wait
    j = judge(base, proc(2, t(1, 12, 400, "S", fut)))
    assert not j.progressed and j.rewaiters == (1,), j
    # carried again: the floor runs from its first blocked reading
    again = carry(base, proc(2, t(1, 12, 400, "R", None)), (1,))
    assert again.threads[1].at == 0 and judge(again, proc(3, t(1, 18, 600, "S", fut))).rewaiters == (1,)
    # a thread running (no wait) at both readings, or blocked in a read before, is judged as it was
    assert judge(proc(0, t(1, 0, 1, "R", None)), proc(1, t(1, 0.5, 1, "R", None))).progressed
    assert judge(proc(0, t(1, 0, 1, "S", (READ, "0x5"))), proc(1, t(1, 0.5, 2, "R", None))).progressed


GIL = (0x7F00_0000_0000, 0x7F00_0002_8A20)  # [start, end) of _PyRuntime (3.11's: 166,688 bytes)
GIL_COND = (FUTEX, "0x7f00000001b0")  # a futex inside it: the GIL's condition variable


def test_a_gil_waiter_s_wake_ups_are_no_progress_whatever_their_cpu():
    """CPython's take_gil times out every 5 ms to ask the holder to drop the GIL: measured on
    tests/hangs/gil_mutex.py (the holder blocked in C with the GIL), 195 wake-ups and 11 to 13 ms of CPU a
    second, over the 10 ms floor.  Inside the runtime's range: a re-waiter; the same counters on a futex
    elsewhere, or without the range, stay CPU progress."""
    before, after = t(2, 0, 100, wait=GIL_COND), t(2, 12.5, 295, wait=GIL_COND)
    assert thread_kind(before, after, 10 * MS, runtime=GIL) == "rewait"
    assert thread_kind(before, after, 10 * MS) == "cpu"
    elsewhere = (FUTEX, "0x7f0100000000")
    assert thread_kind(t(2, 0, 100, wait=elsewhere), t(2, 12.5, 295, wait=elsewhere), 10 * MS, runtime=GIL) == "cpu"
    holder, waiter = t(1, 40, 17), t(2, 0, 100, wait=GIL_COND)
    j = judge(ProcessSample(1, 0, {1: holder, 2: waiter}, GIL),
              ProcessSample(1, 1, {1: holder, 2: t(2, 12.5, 295, wait=GIL_COND)}, GIL))
    assert not j.progressed and j.rewaiters == (2,)
    # caught on a CPU after a GIL wait-out: judged at the next reading, not CPU progress
    assert thread_kind(before, t(2, 12.5, 295, "R", None), 10 * MS, runtime=GIL) == "caught"


def test_a_thread_that_took_the_gil_and_ran_is_progress():
    """Two CPU-bound threads pass the GIL every switch interval: each waits for it at both readings, but
    ran milliseconds per turn (way over a wake-up's cost): CPU progress; so are a few wake-ups with work."""
    assert thread_kind(t(2, 0, 100, wait=GIL_COND), t(2, 480, 200, wait=GIL_COND), 10 * MS, runtime=GIL) == "cpu"
    assert thread_kind(t(2, 0, 100, wait=GIL_COND), t(2, 15, 110, wait=GIL_COND), 10 * MS, runtime=GIL) == "cpu"


def test_a_thread_s_state_follows_its_syscall_file_read_after_status(monkeypatch):
    """``status`` and ``syscall`` are two reads: a thread that woke in between reads "S" then "running" (it is
    runnable), one that blocked in between "R" then its call (it sleeps).  The later read wins."""
    from tfnative.core import procfs
    from tfnative.snapshot import progress

    monkeypatch.setattr(procfs, "run_ns", lambda pid, tid: 5 * MS)
    cases = (("S", ["running"], "R", None), ("R", ["202", "0x7f01", "0x189"], "S", (202, "0x7f01")),
             ("S", ["202", "0x7f01"], "S", (202, "0x7f01")), ("R", ["running"], "R", None),
             ("S", ["-1", "0x7ffd", "0x4005"], "S", None))
    for letter, call, state, wait in cases:
        monkeypatch.setattr(procfs, "status", lambda pid, tid, letter=letter: {
            "State": letter + " (x)", "voluntary_ctxt_switches": "3", "nonvoluntary_ctxt_switches": "1"})
        monkeypatch.setattr(procfs, "syscall", lambda pid, tid, call=call: call)
        got = progress.thread_sample(1, 2)
        assert (got.state, got.wait, got.switches, got.cpu_ns) == (state, wait, 4, 5 * MS), (letter, call)


RESTART = 219


def test_a_wait_resumed_after_the_hold_is_the_same_wait():
    """Holding a process interrupts a timed wait, which the kernel resumes as restart_syscall (219) with the
    call's registers (measured: ``202 0x55c3e5c25050`` before ``stack --pid``, ``219 0x55c3e5c25050`` after).
    Judged another call, every held process "woke and moved on" at the next reading and its report re-armed.
    It is the same wait: after the hold, a re-wait (a sleep too); at the reading after, back in the futex
    (timed out, waiting again; a condition variable's other word), a re-wait; into another object, progress."""
    timed = t(1, 0, 38, wait=(FUTEX, "0x55c3e5c25050"))
    resumed = t(1, 0.05, 40, wait=(RESTART, "0x55c3e5c25050"))
    assert thread_kind(timed, resumed, 10 * MS, held=True) == "rewait"
    assert judge(proc(0, timed), proc(1, resumed), held=True).progressed is False
    sleep, slept = t(1, 0, 38, wait=(SLEEP, "0x7ffd10")), t(1, 0.05, 40, wait=(RESTART, "0x7ffd10"))
    assert thread_kind(sleep, slept, 10 * MS, held=True) == "rewait"
    assert thread_kind(resumed, t(1, 0.1, 42, wait=(FUTEX, "0x55c3e5c25054")), 10 * MS) == "rewait"
    assert thread_kind(resumed, t(1, 0.1, 42, wait=(FUTEX, "0x55c3e5c99000")), 10 * MS) == "woke"
    assert thread_kind(resumed, t(1, 0.1, 40, "R", None), 10 * MS) == "caught"
    # a GIL wait resumed: still the GIL's (its CPU is wake-ups)
    gil_resumed = t(2, 0, 100, wait=(RESTART, GIL_COND[1]))
    assert thread_kind(gil_resumed, t(2, 12.5, 295, wait=GIL_COND), 10 * MS, runtime=GIL) == "rewait"


def test_a_runtime_threads_wake_ups_starts_and_ends_are_no_progress_its_cpu_is():
    """#44: gRPC's threads of an MWMS rank waiting for a stalled peer wake and move between waits, start and
    end; as runtime threads (``runtime_threads``) only their CPU over the floor is progress."""
    moved = (proc(0, t(1), t(2, 1, 3, "S", (FUTEX, "0x7f0001")), t(3)),
             proc(1, t(1), t(2, 2, 40, "S", (EPOLL, "0x5")), t(4)))
    assert judge(*moved).progressed  # without roles: thread 2 woke and moved on
    j = judge(*moved, runtime_threads=frozenset({2, 3, 4}))
    assert not j.progressed and j.kinds[2] == j.kinds[3] == j.kinds[4] == "runtime"
    # a Python thread's wake-up still counts
    assert judge(*moved, runtime_threads=frozenset({3, 4})).progressed
    # work is work: a runtime thread that ran 50 ms of CPU
    assert judge(proc(0, t(2, 0, 3)), proc(1, t(2, 50, 40, "S", (EPOLL, "0x5"))),
                 runtime_threads=frozenset({2})).progressed
