"""The hang verdict on TensorFlow 2.16 to 2.20, whose pool threads have no names (all show as ``python``).

On the version matrix's older-TensorFlow venvs (``old_tf_pairs.py``: under ``CI`` the oldest pair,
``py3.11-tf2.16.2``, which ``.ci/setup`` provisions; elsewhere every ready one), ``tfnative stack --pid`` (the fast
path, then ``--with-gdb``) on

- ``tests/scripts/tf_hang.py``: a ``tf.function`` blocked in a ``tf.py_function`` callback: the verdict names
  the main thread's call, the inter-op worker and the callback's line, as on 2.21 (where the worker is
  named ``tf_Compute``); the kernel frame under the callback runs op ``EagerPyFunc``; the fast path's stack of
  it reads the callback at its sleep through tfnative's own unwinder, with every thread's kernel state (one
  target, held for the module, serves these checks);
- ``tests/scripts/tf_stuck.py pool``: the inter-op pool (2 threads) exhausted by callbacks: the verdict
  says so, having told the inter-op pool's idle-or-busy workers from the intra-op pool's by what TensorFlow
  recorded for them, not by their OS names;
- ``tests/scripts/tf_data_hang.py``: a parallel ``tf.data`` map whose ``tf.py_function`` blocks, iterated by
  the main thread: the verdict names the iterator's line and tf.data's threads in the callback.
"""

import subprocess

import pytest

from ..utils import held, line_of, load_json, requires_gdb, run_tfnative, script
from . import old_tf_pairs

pytestmark = [requires_gdb, pytest.mark.tf]

HANG = script("tf_hang.py")
STUCK = script("tf_stuck.py")
DATA = script("tf_data_hang.py")


@pytest.fixture(scope="module", params=old_tf_pairs.names())
def python(request):
    return old_tf_pairs.python_of(request.param)


def stack(tmp_path, pid, *options, name="s"):
    out = tmp_path / ("%s.json" % name)
    r = run_tfnative(["stack", "--pid", str(pid), *options, "--json", str(out)], timeout=300)
    assert r.returncode == 0, r.stderr
    return r, load_json(out)


@pytest.fixture(scope="module")
def hung(python, tmp_path_factory):
    """The pid of tf_hang.py blocked in its callback, under one venv's python."""
    with held(python, HANG, tmp_path_factory.mktemp("hang")) as proc:
        yield proc.pid


def test_stack_of_a_hung_function_on_the_fast_path(hung, tmp_path):
    out = tmp_path / "s.json"
    # The callback polls (os.path.exists, then a 50 ms sleep): a snapshot may catch it in the check, once in a
    # while; taken again then, it is in the sleep, which is what the test reads.
    for _attempt in range(5):
        r = run_tfnative(["stack", "--pid", str(hung), "--json", str(out)], timeout=300)
        assert r.returncode == 0, r.stderr
        event = load_json(out)["events"][0]
        assert event["via"] == "cfi", r.stderr  # tfnative's own unwinder, not gdb reading the libraries
        callback = [t for t in event["threads"]
                    if any(f["kind"] == "python" and f["function"] == "slow_callback" for f in t["frames"])]
        assert len(callback) == 1
        frames = callback[0]["frames"]
        py = [(f["function"], f["line"]) for f in frames if f["kind"] == "python"]
        if py[0] == ("slow_callback", line_of(HANG, "time.sleep(0.05)")):
            break
        # caught in the loop's check: in os.path.exists, or on the while line itself
        assert ("slow_callback", line_of(HANG, "os.path.exists(RELEASE)")) in py[:2], py[:3]
    assert py[0] == ("slow_callback", line_of(HANG, "time.sleep(0.05)"))
    assert any((f.get("op") or {}).get("type") == "EagerPyFunc" and "PyFuncOp::Compute" in f["function"]
               for f in frames)
    assert all(t.get("kernel") for t in event["threads"])  # thread states


@pytest.mark.parametrize("path", [(), ("--with-gdb",)], ids=["fast", "gdb"])
def test_hung_callback_names_worker_and_callback(hung, tmp_path, path):
    r, doc = stack(tmp_path, hung, *path)
    event, t = doc["events"][0], doc["triage"]
    threads = {th["tid"]: th for th in event["threads"]}
    assert all(th["name"] == "python" for th in threads.values())  # these versions name no thread
    assert t["pattern"] == "waiting_on_executor", t["verdict"]
    (worker,) = t["pool"]["busy"]
    callback = [f for f in threads[worker]["frames"] if f["kind"] == "python" and f["function"] == "slow_callback"]
    assert callback and callback[0]["file"] == HANG
    loop = range(line_of(HANG, "while RELEASE"), line_of(HANG, "return x * 2"))
    assert callback[0]["line"] in loop
    # blocked in its sleep, or (rarely) caught between two: the kernel state, on gdb's path too (read before gdb
    # stops the threads)
    states = ("blocked in", "running")
    assert t["verdict"] in [
        "the main thread waits for tf.function step at tf_hang.py:%d; the work is on the inter-op pool's thread %d "
        "in the tf.py_function callback slow_callback at tf_hang.py:%d, %s time.sleep()" % (
            line_of(HANG, 'print("result"'), worker, callback[0]["line"], state) for state in states]
    assert "tfnative: verdict: " + t["verdict"] in r.stderr
    kernel = [f for f in threads[worker]["frames"] if "PyFuncOp::Compute" in (f.get("function") or "")]
    assert kernel and kernel[0]["op"]["type"] == "EagerPyFunc"
    pool = event["pool"]
    assert pool["name"] is None and pool["exact"] is True
    assert sorted(pool["busy"] + pool["idle"]) == sorted(pool["pools"]["inter-op"])
    assert pool["threads"] == len(pool["pools"]["inter-op"]) >= 1
    assert pool["pools"]["intra-op"]  # the CPU device's Eigen pool: other workers, not the inter-op pool's


def test_pool_exhausted_without_thread_names(python, tmp_path):
    proc = subprocess.Popen([python, STUCK, "pool"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline() == b"ready\n"
        for i in range(60):  # the callers reach the executor some time after "ready"
            _r, doc = stack(tmp_path, proc.pid, name="s%d" % i)
            if doc["triage"]["pattern"] == "pool_exhausted":
                break
    finally:
        proc.kill()
        proc.wait()
    t = doc["triage"]
    assert t["pattern"] == "pool_exhausted", t["verdict"]
    assert t["pool"]["threads"] == 2 and t["pool"]["idle"] == [] and t["pool"]["exact"]
    callback = line_of(STUCK, "    EVENT.wait()")
    assert t["verdict"].startswith(
        "TensorFlow's inter-op pool is exhausted: all 2 threads of the inter-op pool are inside tf.py_function "
        "callbacks or wait for the GIL (threads %s in the tf.py_function callback wait_for_event at tf_stuck.py:%d, "
        "blocked in lock.acquire() under Condition.wait); " % (", ".join(map(str, t["pool"]["busy"])), callback))
    assert "the main thread waits for tf.function set_step at tf_stuck.py:%d" % line_of(
        STUCK, "        set_step(x)") in t["verdict"]


def test_tf_data_map_callback(python, tmp_path):
    with held(python, DATA, tmp_path) as proc:
        r, doc = stack(tmp_path, proc.pid)
    t = doc["triage"]
    assert t["pattern"] == "waiting_on_tf_data", t["verdict"]
    event = doc["events"][0]
    workers = [th for th in event["threads"]
               if any(f["kind"] == "python" and f["function"] == "slow_map" for f in th["frames"])]
    assert workers and all(th["tid"] in event["pool"]["pools"]["tf.data"] for th in workers)
    lines = {f["line"] for th in workers for f in th["frames"] if f.get("function") == "slow_map"}
    assert lines <= set(range(line_of(DATA, "while RELEASE"), line_of(DATA, "return x * 2")))
    assert t["verdict"].startswith(
        "the main thread waits for the next element of a tf.data iterator at tf_data_hang.py:%d; the work is on "
        "tf.data thread" % line_of(DATA, "for x in ds:"))
    assert "in the tf.py_function callback slow_map at tf_data_hang.py:" in t["verdict"]
    assert "tfnative: verdict: " + t["verdict"] in r.stderr
