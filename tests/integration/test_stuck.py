"""Why is it stuck?  The verdict of ``tfnative stack`` on real stuck TensorFlow processes.

``tests/scripts/tf_stuck.py`` gets stuck three ways (one process each, all
started at once and shared by the checks): a ``tf.py_function`` callback
holding the GIL in a ``ctypes.PyDLL`` call while two threads wait for it; the
inter-op pool (2 threads) exhausted by callbacks that wait for a third; a
callback waiting for an event while the main thread waits for its
``tf.function``.  Each process reaches its stuck state some time after it
says "ready"; a check takes snapshots until the verdict's pattern shows (or a
deadline passes) and then asserts what the verdict names.
"""

import os
import re
import subprocess
import sys
import time

import pytest

from ..utils import line_of, load_json, requires_gdb, requires_tf, run_tfnative, script

pytestmark = [requires_gdb, requires_tf]

SCRIPT = script("tf_stuck.py")
PYSTACK = os.path.join(os.path.dirname(sys.executable), "pystack")
MODES = ("gil", "pool", "executor")


@pytest.fixture(scope="module")
def procs():
    """mode -> the Popen of tf_stuck.py MODE; all three load TensorFlow at the same time."""
    started = {m: subprocess.Popen([sys.executable, SCRIPT, m], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL) for m in MODES}
    try:
        yield started
    finally:
        for p in started.values():
            p.kill()
            p.wait()


def ready(procs, mode):
    p = procs[mode]
    if not getattr(p, "was_ready", False):
        assert p.stdout.readline() == b"ready\n", "tf_stuck.py %s did not get ready" % mode
        p.was_ready = True
    return p.pid


def stack_doc(tmp_path, pid, *options, name="s"):
    """``tfnative stack --pid PID OPTIONS --json FILE``: (the completed run, the JSON document); exit 0 checked."""
    out = tmp_path / ("%s.json" % name)
    r = run_tfnative(["stack", "--pid", str(pid), *options, "--json", str(out)], timeout=300)
    assert r.returncode == 0, r.stderr
    return r, load_json(out)


def settled(tmp_path, pid, pattern, deadline=180):
    """(run, document) of the first ``stack`` whose verdict has ``pattern``: the process gets there some time
    after it says "ready".  At the deadline, the last one (which the caller's assertion then reports)."""
    end = time.monotonic() + deadline
    for i in range(10000):
        r, doc = stack_doc(tmp_path, pid, name="s%d" % i)
        if doc["triage"]["pattern"] == pattern or time.monotonic() > end:
            return r, doc
        time.sleep(0.5)
    raise AssertionError("unreachable")


def threads_of(doc):
    return {t["tid"]: t for t in doc["events"][0]["threads"]}


def test_native_code_holds_the_gil_in_a_callback(procs, tmp_path):
    pid = ready(procs, "gil")
    r, doc = settled(tmp_path, pid, "gil_held_blocked")
    t = doc["triage"]
    assert t["pattern"] == "gil_held_blocked", t["verdict"]
    holder = t["gil_holder"]
    threads = threads_of(doc)
    assert threads[holder["tid"]]["name"] == "tf_Compute"  # shown without --all-threads
    assert (holder["function"], holder["line"], holder["blocked_in"]) == (
        "hold_gil", line_of(SCRIPT, "LIBC.sleep(3600)"), "sleep")
    assert len(t["waiting_for_gil"]) == 2
    assert [w["tid"] for w in t["waiting_for_function"]] == [pid]
    assert t["verdict"] == (
        "thread %d tf_Compute holds the GIL in hold_gil at tf_stuck.py:%d, blocked in sleep(); 2 threads wait for "
        "it (%s); the main thread waits for tf.function step at tf_stuck.py:%d" % (
            holder["tid"], holder["line"], ", ".join(map(str, t["waiting_for_gil"])),
            line_of(SCRIPT, "# gil: waits here")))
    assert "tfnative: verdict: " + t["verdict"] in r.stderr
    assert "[holds the GIL]" in r.stdout and r.stdout.count("[waiting for the GIL]") == 2

    # pystack marks the same holder and waiters on this TensorFlow process
    p = subprocess.run([PYSTACK, "remote", "--native", str(pid)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    marks = {int(m.group(1)): m.group(2) for m in re.finditer(r"Traceback for thread (\d+) .*?\[(.*?)\]", p.stdout)}
    assert [tid for tid, m in marks.items() if "Has the GIL" in m] == [holder["tid"]]
    assert sorted(tid for tid, m in marks.items() if "Waiting for the GIL" in m) == sorted(t["waiting_for_gil"])


def test_inter_op_pool_exhausted_by_callbacks(procs, tmp_path):
    pid = ready(procs, "pool")
    _r, doc = settled(tmp_path, pid, "pool_exhausted")
    t = doc["triage"]
    assert t["pattern"] == "pool_exhausted", t["verdict"]
    assert t["pool"]["threads"] == 2 and t["pool"]["idle"] == []
    threads = threads_of(doc)
    callback = line_of(SCRIPT, "    EVENT.wait()")
    for tid in t["pool"]["busy"]:
        user = [(f["function"], f["line"]) for f in threads[tid]["frames"] if f.get("user")]
        assert user[0] == ("wait_for_event", callback)
    callers = {(w["tf_function"].split("_")[3], w["at"]) for w in t["waiting_for_function"]}
    assert callers == {("set", "tf_stuck.py:%d" % line_of(SCRIPT, "        set_step(x)")),
                       ("step", "tf_stuck.py:%d" % line_of(SCRIPT, "    step(tf.constant(1.0))"))}
    assert len(t["waiting_for_function"]) == 3
    assert t["verdict"].startswith(
        "TensorFlow's inter-op pool is exhausted: all 2 tf_Compute threads are inside tf.py_function callbacks or "
        "wait for the GIL (threads %s in the tf.py_function callback wait_for_event at tf_stuck.py:%d, blocked in "
        "lock.acquire() under Condition.wait); " % (", ".join(map(str, t["pool"]["busy"])), callback))
    assert "the main thread waits for tf.function set_step at tf_stuck.py:" in t["verdict"]


def test_main_thread_waits_for_the_function_whose_callback_waits(procs, tmp_path):
    pid = ready(procs, "executor")
    _r, doc = settled(tmp_path, pid, "waiting_on_executor")
    t = doc["triage"]
    assert t["pattern"] == "waiting_on_executor", t["verdict"]
    (worker,) = t["pool"]["busy"]
    assert t["verdict"] == (
        "the main thread waits for tf.function step at tf_stuck.py:%d; the work is on tf_Compute thread %d in the "
        "tf.py_function callback wait_for_event at tf_stuck.py:%d, blocked in lock.acquire() under Condition.wait"
        % (line_of(SCRIPT, "# executor: waits here"), worker, line_of(SCRIPT, "    EVENT.wait()")))


def test_samples_mark_the_stuck_threads_with_their_time(procs, tmp_path):
    pid = ready(procs, "executor")
    settled(tmp_path, pid, "waiting_on_executor")
    r, doc = stack_doc(tmp_path, pid, "--samples", "3", "--interval", "0.5", name="sampled")
    event = doc["events"][0]
    assert doc["triage"] == event["triage"]
    threads = {t["tid"]: t for t in event["threads"]}
    assert event["samples"]["count"] == 3
    assert threads[pid]["progress"] == "stuck" and threads[pid]["stuck_s"] >= 1.0
    (worker,) = event["pool"]["busy"]
    assert threads[worker]["progress"] == "stuck"
    assert {pid, worker} <= set(event["triage"]["stuck"])
    assert re.search(r"blocked in lock\.acquire\(\) under Condition\.wait \(stuck \d+\.\d s\)$",
                     event["triage"]["verdict"])
    assert r.stderr.count("tfnative: sample ") == 3
