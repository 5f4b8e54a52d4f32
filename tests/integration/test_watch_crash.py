"""``tfnative watch``'s crash catcher (``tfnative/watch/crash.py``) on real processes and real signals.

Each watched run is compared with the same program unwatched: exit status, stdout and stderr must be the
same.  A crash is reported with the stacks ``attach`` gives (signal, frames, the user's line, for TensorFlow
the op and its fatal log line); a signal the program handles, job control and SIGTERM pass through unseen; the
catcher's end, ``close`` or ``kill -9``, leaves the process running and untraced.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tfnative.core.threads import Threads
from tfnative.errors import TargetGone, TfnativeError
from tfnative.sources.ptrace import WNOTHREAD
from tfnative.watch.crash import Crash, CrashCatcher, Exit
from tfnative.watch.crashwatch import CrashWatch
from tfnative.watch.loop import HeldTake
from tfnative.watch.options import WatchOptions

from ..utils import ROOT, assert_running_untraced, line_of, python_frames, requires_tf, script, state_of, tracer_of

TARGET = script("watch_target.py")


def _start(mode, *args, flags=()):
    proc = subprocess.Popen([sys.executable, *flags, TARGET, mode, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline() == "ready\n"
    return proc


def _say(proc, line="go"):
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def _bare(mode, flags=()):
    """The program unwatched: (status, stdout, stderr)."""
    proc = _start(mode, flags=flags)
    out, err = proc.communicate("go\n", timeout=60)
    return proc.returncode, out, err


def _until_exit(catcher, within=60.0):
    """Every report until the process's ``Exit``."""
    reports, deadline = [], time.monotonic() + within
    while time.monotonic() < deadline:
        got = catcher.poll(1.0)
        if got is not None:
            reports.append(got)
            if isinstance(got, Exit):
                return reports
    raise AssertionError("no exit within %.0f s: %r" % (within, reports))


def _died(proc, within=10.0):
    """``proc``'s return code once it has died, seen without reaping it (``WNOWAIT``) and without taking a
    ptrace stop.  ``Popen.wait`` is no way to wait for a process a thread of this process traces: a wait of its
    parent's thread group takes the tracee's ptrace stops too (the kernel counts the group as the tracer), so
    ``wait`` would return a SIGSEGV *stop* as "-11" and the tracer would never see it (the process held for
    ever); nor may it reap the process before the tracer has seen its end."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        got = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT | WNOTHREAD)
        if got is not None and got.si_code in (os.CLD_EXITED, os.CLD_KILLED, os.CLD_DUMPED):
            return got.si_status if got.si_code == os.CLD_EXITED else -got.si_status
        time.sleep(0.01)
    raise AssertionError("process %d did not die within %.0f s" % (proc.pid, within))


def _watched(mode, flags=(), during=None):
    """The program watched from its ``ready``: (status, stdout, stderr, the catcher's reports)."""
    proc = _start(mode, flags=flags)
    try:
        with CrashCatcher([proc.pid]) as catcher:
            _say(proc)
            if during is not None:
                during(proc)
            reports = _until_exit(catcher)
        out, err = proc.communicate(timeout=30)
        return proc.returncode, "ready\n" + out, err, reports
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _crash_and_exit(reports):
    crashes = [r for r in reports if isinstance(r, Crash)]
    exits = [r for r in reports if isinstance(r, Exit)]
    assert len(crashes) == 1 and len(exits) == 1 and reports[-1] is exits[0], reports
    return crashes[0], exits[0]


def test_a_segfault_is_reported_with_its_stack_and_the_process_dies_as_unwatched():
    bare = _bare("segv")
    status, out, err, reports = _watched("segv")
    crash, end = _crash_and_exit(reports)
    assert (status, "ready\n" + bare[1], bare[2]) == (bare[0], out, err)  # the same death, the same output
    assert status == end.returncode == -signal.SIGSEGV
    assert crash.signal == "SIGSEGV" and crash.tid == crash.pid
    doc = crash.document.to_json()
    (event,) = doc["events"]
    assert (event["kind"], event["signal"], event["fatal"], event["signal_code"], event["fault_address"]) == (
        "signal", "SIGSEGV", True, 1, "0x0")  # SEGV_MAPERR at address 0
    frames = event["threads"][0]["frames"]
    assert "strlen" in frames[0]["function"]  # the faulting frame first
    assert python_frames(frames)[:3] == [("string_at", "__init__.py", python_frames(frames)[0][2]),
                                         ("poke", "watch_target.py", line_of(TARGET, "ctypes.string_at(0)")),
                                         ("main", "watch_target.py", line_of(TARGET, "        poke()"))]
    assert doc["exit"] == {"signal": "SIGSEGV"}
    triage = doc["triage"]
    assert triage["signal"] == "SIGSEGV"
    assert (os.path.basename(triage["nearest_user_frame"]["file"]), triage["nearest_user_frame"]["line"]) == (
        "watch_target.py", line_of(TARGET, "ctypes.string_at(0)"))


def test_a_thread_started_after_the_seize_is_followed_and_its_crash_names_it():
    bare = _bare("segv-thread")
    status, out, err, reports = _watched("segv-thread")
    crash, end = _crash_and_exit(reports)
    assert (status, out, err) == (bare[0], "ready\n" + bare[1], bare[2]) and status == -signal.SIGSEGV
    assert crash.tid != crash.pid  # the new thread, traced from its start
    stopped = crash.event.threads[0]
    assert stopped.tid == crash.tid and stopped.python_name == "poker"
    assert [f[0] for f in python_frames(crash.document.to_json()["events"][0]["threads"][0]["frames"])][:2] == [
        "string_at", "poke"]


def test_faulthandler_raising_the_signal_again_is_caught_at_the_fatal_delivery():
    """A handler that reports and raises the signal again with its default action (TensorFlow's, Python's
    faulthandler): one crash, at the delivery that kills, saying the handler ran; its output untouched."""
    flags = ("-X", "faulthandler")
    bare = _bare("segv", flags)
    status, out, err, reports = _watched("segv", flags)
    crash, _end = _crash_and_exit(reports)
    assert status == bare[0] == -signal.SIGSEGV

    def same(text):  # faulthandler names the thread by its address
        return re.sub(r"0x[0-9a-f]+", "0x?", text)

    assert "Fatal Python error: Segmentation fault" in err and same(err) == same(bare[2])
    assert out == "ready\n" + bare[1]
    event = crash.event
    assert (event.signal, event.handler, event.reraised_by_handler) == ("SIGSEGV", True, True)
    functions = [f.function for f in event.threads[0].frames]
    assert "poke" in functions  # the fault itself, under the handler's frames


def test_signals_the_program_handles_pass_through_and_are_no_crash():
    def send_usr1(proc):
        assert proc.stdout.readline() == "armed\n"
        os.kill(proc.pid, signal.SIGUSR1)
        _say(proc)

    status, out, err, reports = _watched("handled", during=send_usr1)
    assert (status, out, err) == (0, "ready\ngot [10, 11]\n", "")  # SIGUSR1 and its own SIGSEGV, both handled
    assert [type(r) for r in reports] == [Exit] and reports[0].returncode == 0


def test_the_exit_status_is_the_parents_to_read_and_is_reported():
    bare = _bare("exit")
    status, out, err, reports = _watched("exit")
    assert (status, out, err) == (bare[0], "ready\n" + bare[1], bare[2]) == (3, "ready\nbye\n", "")
    assert [(type(r), r.returncode) for r in reports] == [(Exit, 3)]


def test_a_process_that_is_not_our_child_reaches_its_own_parent_with_its_status():
    """The tracer reaps a traced process first; its real parent (a shell here) must still see its end."""
    shell = subprocess.Popen(["sh", "-c", '"$0" "$1" segv; echo "status $?"', sys.executable, TARGET],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert shell.stdout.readline() == "ready\n"
        (child,) = [int(p) for p in open("/proc/%d/task/%d/children" % (shell.pid, shell.pid)).read().split()]
        with CrashCatcher([child]) as catcher:
            _say(shell)
            reports = _until_exit(catcher)
        out, _err = shell.communicate(timeout=30)
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
    crash, end = _crash_and_exit(reports)
    assert crash.pid == end.pid == child and end.returncode == -signal.SIGSEGV
    assert out == "status 139\n"


def _count(path):
    for _ in range(100):
        try:
            with open(path) as f:
                return int(f.read())
        except (OSError, ValueError):
            time.sleep(0.01)
    raise AssertionError("nothing counted in %s" % path)


def _moving(path, wait=0.3):
    first = _count(path)
    time.sleep(wait)
    return _count(path) != first


@pytest.fixture
def ticker(tmp_path):
    path = str(tmp_path / "count")
    proc = _start("ticker", path)
    _say(proc)
    _count(path)
    yield proc, path
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_stop_and_continue_work_and_sigterm_is_an_exit_not_a_crash(ticker):
    proc, path = ticker
    with CrashCatcher([proc.pid]) as catcher:
        assert _moving(path)
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while state_of(proc.pid) not in ("T", "t") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state_of(proc.pid) in ("T", "t")
        time.sleep(0.1)
        assert not _moving(path, 0.4)  # stopped, every thread
        assert catcher.poll(0.2) is None
        os.kill(proc.pid, signal.SIGCONT)
        assert _moving(path)
        os.kill(proc.pid, signal.SIGTERM)
        reports = _until_exit(catcher)
    assert proc.wait(10) == -signal.SIGTERM
    assert [(type(r), r.returncode) for r in reports] == [(Exit, -signal.SIGTERM)]
    assert reports[0].signal == "SIGTERM"


def test_a_snapshot_of_a_watched_process_holds_it_briefly_and_lets_it_run(ticker):
    proc, path = ticker
    catcher = CrashCatcher([proc.pid])
    try:
        doc = catcher.snapshot(proc.pid).to_json()
        (event,) = doc["events"]
        assert event["kind"] == "snapshot" and doc["triage"] is not None
        functions = {f[0] for t in event["threads"] for f in python_frames(t["frames"])}
        assert "tick" in functions
        assert _moving(path)  # runs on, still watched
        assert tracer_of(proc.pid) == os.getpid()
    finally:
        catcher.close()
    assert_running_untraced(proc.pid, within=2)
    assert _moving(path)
    _say(proc, "end")
    assert proc.wait(10) == 0


WATCHER = ("import sys, time\nfrom tfnative.watch.crash import CrashCatcher\n"
           "c = CrashCatcher([int(sys.argv[1])])\nprint('watching', flush=True)\ntime.sleep(120)\n")


def _watcher(pid):
    watcher = subprocess.Popen([sys.executable, "-c", WATCHER, str(pid)], stdout=subprocess.PIPE, text=True,
                               cwd=ROOT)
    assert watcher.stdout.readline() == "watching\n"
    assert tracer_of(pid) == watcher.pid
    return watcher


def test_kill_9_of_the_watcher_leaves_the_process_running_untraced(ticker):
    proc, path = ticker
    watcher = _watcher(proc.pid)
    assert _moving(path)
    watcher.kill()
    watcher.wait(10)
    assert_running_untraced(proc.pid, within=2)
    assert _moving(path)
    _say(proc, "end")
    assert proc.wait(10) == 0
    assert proc.stdout.read() == "ticked\n"


def test_kill_9_of_the_watcher_while_it_holds_a_crash_lets_the_process_die_of_it():
    proc = _start("segv")
    try:
        watcher = _watcher(proc.pid)
        _say(proc)
        deadline = time.monotonic() + 10  # held at its crash: nobody polls this watcher
        while state_of(proc.pid) != "t" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state_of(proc.pid) == "t" and proc.poll() is None
        watcher.kill()
        watcher.wait(10)
        assert proc.wait(10) == -signal.SIGSEGV
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- TensorFlow: a real `Check failed` abort (tests/scripts/tf_check_failed.py), one watched run ---

TF_SCRIPT = script("tf_check_failed.py")


@pytest.fixture(scope="module")
def tf_runs():
    """The reproducer unwatched, then watched from its start: ((status, out, err), (status, out, err,
    reports))."""
    bare = subprocess.run([sys.executable, TF_SCRIPT], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    proc = subprocess.Popen([sys.executable, TF_SCRIPT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        with CrashCatcher([proc.pid]) as catcher:
            reports = _until_exit(catcher, within=300)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (bare.returncode, bare.stdout, bare.stderr), (proc.returncode, out, err, reports)


@requires_tf
@pytest.mark.tf
def test_a_tensorflow_abort_is_reported_as_attach_reports_it(tf_runs):
    bare, (status, out, err, reports) = tf_runs
    crash, end = _crash_and_exit(reports)
    assert status == bare[0] == end.returncode == -signal.SIGABRT
    assert out == bare[1] == "calling\n"
    check = "Check failed: d < dims() (1 vs. 0)"
    assert check in bare[2] and check in err  # TensorFlow's own report, as unwatched
    doc = crash.document.to_json()
    (event,) = doc["events"]
    assert (event["signal"], event["fatal"]) == ("SIGABRT", True)
    assert event["log"].endswith("tensor_shape.cc:362] " + check), event["log"]
    stopped = event["threads"][0]
    assert [f["function"] for f in stopped["frames"][:3]] == ["__pthread_kill_implementation", "raise", "abort"]
    kernel = next(f for f in stopped["frames"] if f.get("op"))
    assert kernel["op"]["type"] == "FusedPadConv2D"
    triage = doc["triage"]
    assert triage["op"]["type"] == "FusedPadConv2D" and triage["log"] == event["log"]
    call = line_of(TF_SCRIPT, "print(bad_pad_conv(")
    assert (os.path.basename(triage["nearest_user_frame"]["file"]), triage["nearest_user_frame"]["line"]) == (
        "tf_check_failed.py", call)


def test_one_catcher_watches_several_processes_each_on_its_own(ticker):
    """A crash in one process is that process's: the other runs on, watched, and is let go at the end."""
    proc, path = ticker
    crasher = _start("segv")
    try:
        with CrashCatcher([proc.pid, crasher.pid]) as catcher:
            assert catcher.pids == sorted([proc.pid, crasher.pid])
            _say(crasher)
            crash, end = _crash_and_exit(_until_exit(catcher))
            assert crash.pid == end.pid == crasher.pid
            assert crasher.wait(10) == -signal.SIGSEGV
            assert catcher.pids == [proc.pid]
            assert _moving(path) and tracer_of(proc.pid) == os.getpid()
            catcher.remove(proc.pid)  # let go while the catcher goes on
            assert catcher.pids == []
            assert_running_untraced(proc.pid, within=2)
            assert _moving(path)
    finally:
        if crasher.poll() is None:
            crasher.kill()
            crasher.wait()


def test_threads_that_start_and_end_all_the_time_are_followed_and_reaped(tmp_path):
    """tests/scripts/thread_churn.py: two threads start short-lived threads without end.  Each snapshot holds
    every thread there is; every thread that ended is reaped (a traced thread is, by its tracer)."""
    ready = str(tmp_path / "ready")
    proc = subprocess.Popen([sys.executable, script("thread_churn.py"), ready])
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.02)
        with CrashCatcher([proc.pid]) as catcher:
            for _ in range(3):
                doc = catcher.snapshot(proc.pid, Threads.ALL).to_json()
                assert len(doc["events"][0]["threads"]) >= 3  # the main thread and the two starters at least
                time.sleep(0.1)
            assert catcher.poll(0.1) is None
            assert len(os.listdir("/proc/%d/task" % proc.pid)) < 10  # no zombie thread piling up
        assert_running_untraced(proc.pid, within=2)
    finally:
        proc.kill()
        proc.wait()


def test_a_process_another_tracer_holds_or_one_gone_is_refused_in_one_line(ticker):
    proc, _path = ticker
    watcher = _watcher(proc.pid)
    try:
        with pytest.raises(TfnativeError) as refused:
            CrashCatcher([proc.pid])
        message = str(refused.value)
        assert "\n" not in message and str(watcher.pid) in message, message
    finally:
        watcher.kill()
        watcher.wait(10)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with pytest.raises(TargetGone):
        CrashCatcher([gone.pid])
    assert_running_untraced(proc.pid, within=2)


def test_snapshots_hold_several_processes_at_once(ticker, tmp_path):
    proc, path = ticker
    other_path = str(tmp_path / "other")
    other = _start("ticker", other_path)
    try:
        _say(other)
        _count(other_path)
        with CrashCatcher([proc.pid, other.pid]) as catcher:
            gone = subprocess.Popen([sys.executable, "-c", "pass"])
            gone.wait()
            docs = catcher.snapshots([proc.pid, other.pid, gone.pid])
            assert isinstance(docs[gone.pid], TfnativeError)  # not watched: its error, the others' documents
            for pid in (proc.pid, other.pid):
                doc = docs[pid].to_json()
                assert doc["pid"] == pid and "tick" in {f[0] for t in doc["events"][0]["threads"]
                                                        for f in python_frames(t["frames"])}
            assert _moving(path) and _moving(other_path)
        for p in (proc, other):
            assert_running_untraced(p.pid, within=2)
            _say(p, "end")
            assert p.wait(10) == 0
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


def test_a_process_whose_main_thread_has_exited_is_watched_and_its_end_reported(tmp_path):
    """tests/scripts/leaderless.py: the leader called pthread_exit (a zombie, not to be traced); its threads
    are, and the last one's end is the process's."""
    ready = str(tmp_path / "ready")
    proc = subprocess.Popen([sys.executable, script("leaderless.py"), ready])
    try:
        deadline = time.monotonic() + 30
        while state_of(proc.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.02)
        with CrashCatcher([proc.pid]) as catcher:
            doc = catcher.snapshot(proc.pid, Threads.ALL).to_json()
            assert len(doc["events"][0]["threads"]) == 2  # the two workers
            os.kill(proc.pid, signal.SIGTERM)
            reports = _until_exit(catcher, within=10)
        assert [(type(r), r.returncode) for r in reports] == [(Exit, -signal.SIGTERM)]
        assert proc.wait(10) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_crash_nobody_polls_for_is_let_die_after_its_hold_bound(monkeypatch):
    from tfnative.watch import tracer as tracer_module  # the tracer thread keeps the bound (watch/tracer.py)

    monkeypatch.setattr(tracer_module, "CRASH_HOLD_S", 0.3)
    proc = _start("segv")
    try:
        with CrashCatcher([proc.pid]) as catcher:
            _say(proc)
            assert _died(proc) == -signal.SIGSEGV  # not held for ever by a watcher that does not poll
            crash, end = _crash_and_exit(_until_exit(catcher))
        assert proc.wait(10) == -signal.SIGSEGV
        assert crash.event.threads == [] and "nothing took them" in crash.event.warnings[-1]
        assert end.returncode == -signal.SIGSEGV
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


STAMPER = ("import sys, time\nf = open(sys.argv[1], 'w', buffering=1)\n"
           "while True:\n    f.write('%r\\n' % time.monotonic())\n    time.sleep(0.002)\n")


def _held_span(path, start, end):
    """The longest gap between two stamps of a stamper's file (CLOCK_MONOTONIC, the same in every process)
    that overlaps ``[start, end]`` (the snapshots' call: on a loaded machine a stamper may wait longer for a
    CPU at another time)."""
    with open(path) as f:
        stamps = [float(x) for x in f.read().split()[:-1]]
    return max(((a, b) for a, b in zip(stamps, stamps[1:]) if b >= start and a <= end), key=lambda ab: ab[1] - ab[0])


def test_a_hangs_snapshots_hold_every_traced_process_at_one_moment(tmp_path):
    """``CrashWatch.take_all`` (a hang report's snapshots): the processes the catcher traces are held all together,
    not one after another: the two stampers' longest gaps (their holds) overlap in time."""
    paths = [str(tmp_path / ("stamps-%d" % i)) for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", STAMPER, p]) for p in paths]
    opts = WatchOptions()
    watch = CrashWatch(opts, io.StringIO(), io.StringIO(), HeldTake(opts, io.StringIO()))
    try:
        for p in paths:
            deadline = time.monotonic() + 30
            while not os.path.exists(p) or os.path.getsize(p) < 100:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        watch.hook([p.pid for p in procs])
        assert sorted(watch.catcher.pids) == sorted(p.pid for p in procs)
        time.sleep(0.3)
        start = time.monotonic()
        outcomes = watch.take_all([p.pid for p in procs])
        end = time.monotonic()
        assert [o.pid for o in outcomes] == [p.pid for p in procs] and all(o.doc is not None for o in outcomes)
        time.sleep(0.3)
        spans = [_held_span(p, start, end) for p in paths]
        # each was held: the catcher says how long, and the stamper (a stamp every 2 ms) shows a longer gap in the
        # call (3 ms: a hold is the copy alone, the analysis comes after the processes are let go)
        assert all(o.doc is not None and o.doc.events[0].held_ms for o in outcomes), outcomes
        assert all(b - a > 0.003 for a, b in spans), spans
        assert max(a for a, _ in spans) < min(b for _, b in spans), spans  # at one moment
    finally:
        watch.close()
        for p in procs:
            p.kill()
            p.wait()
