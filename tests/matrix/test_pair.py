"""The feature checks of the version matrix, run on one (Python, TensorFlow) pair (see ``conftest.py``).

Every target program runs under the pair's interpreter; tfnative runs as a user who installed it beside
TensorFlow would run it.  Each check asserts what a user reads: which frames, in which order, at which
file:line, which op, which verdict.  One test per column of the matrix table (``tests/matrix/run``); the names
(``test_<column>``) are the table's columns.  Processes are shared where checks can share them: one hung
TensorFlow process for the ``stack`` checks, one named-threads program for thread names and locals.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import time

import pytest

from ..utils import ROOT, assert_gone, descendants, line_of, load_json, script, state_of, wait_for_file

MATRIX_SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
OPEN_SESSION = os.path.join(ROOT, "examples", "open_session.py")
PYFUNC_SEGV = script("tf_pyfunc_segv.py")
HANG = script("tf_hang.py")
MATMUL = os.path.join(MATRIX_SCRIPTS, "matmul_function.py")
SQRT = os.path.join(MATRIX_SCRIPTS, "sqrt_negative.py")
NAMED = script("named_threads.py")
GIL = script("gil_holder.py")
SEGV = script("segv.py")
UNAME = script("nested_uname.py")
KERNEL_COMPUTE = "::Compute(tensorflow::OpKernelContext*)"

pytestmark = pytest.mark.matrix


def exact_line(path: str, text: str) -> int:
    """1-based number of the line of ``path`` that is ``text`` (whitespace around it ignored)."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if line.strip() == text:
                return i
    raise AssertionError("no line %r in %s" % (text, path))


def py_frames(frames: list, path: str = None) -> list:
    """(function, line) of the Python frames, only those in ``path`` if given."""
    return [(f["function"], f["line"]) for f in frames if f["kind"] == "python"
            and (path is None or f.get("file") == path)]


def index(frames: list, pred, what: str) -> int:
    for i, f in enumerate(frames):
        if pred(f):
            return i
    raise AssertionError("no %s among the frames %s" % (what, [f["function"] for f in frames]))


def qualified(pair, name: str) -> str:
    """A function's name as frames show it: its qualified name from 3.11 on (co_qualname), its bare name before."""
    major, minor = (int(x) for x in pair.name[2:].split("-")[0].split("."))
    return name if (major, minor) >= (3, 11) else name.rsplit(".", 1)[-1]


def raise_core_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def make_core(pair, path: str, tmp) -> str:
    """Run ``path`` under the pair's python in ``tmp`` until it dumps core; the core's path."""
    proc = subprocess.run([pair.python, path], cwd=str(tmp), preexec_fn=raise_core_limit, capture_output=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr[-2000:]
    core = os.path.join(str(tmp), "core")
    assert os.path.exists(core), "no core in %s (core_pattern is %s)" % (tmp, open(
        "/proc/sys/kernel/core_pattern").read().strip())
    return core


def json_run(pair, tmp_path, args: list, name: str = "s", expect_rc=0, timeout: float = 600) -> tuple:
    """``tfnative ARGS --json FILE``: (completed run, document); the exit status checked."""
    out = tmp_path / ("%s.json" % name)
    r = pair.run(args + ["--json", str(out)], timeout=timeout)
    assert r.returncode == expect_rc, "exit %s, expected %s: %s" % (r.returncode, expect_rc, r.stderr[-3000:])
    return r, load_json(out)


def stop_all(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


# --- TensorFlow checks -------------------------------------------------------------------------------------------


def peak_rss_mb(pid: int) -> int:
    """VmHWM of a live process in MB (0 if it is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


def run_watching_gdb(cmd: list, tmp, timeout: float = 600) -> tuple:
    """Run ``cmd`` (output captured to files) while watching the gdb it starts: (completed run, gdb's peak RSS in
    MB).  Reading ``libtensorflow_cc.so.2``'s symbols in full costs gdb about 2 GB; tfnative's fast path, tens of
    MB."""
    out, err = open(tmp / "stdout", "w+"), open(tmp / "stderr", "w+")
    with out, err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, text=True, cwd=ROOT)
        peak, deadline = 0, time.monotonic() + timeout
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                for child in descendants(proc.pid):
                    try:
                        if child.name() == "gdb":
                            peak = max(peak, peak_rss_mb(child.pid))
                    except Exception:  # gone meanwhile
                        pass
                time.sleep(0.1)
        finally:
            stop_all([proc])
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read()), peak


@pytest.fixture(scope="module")
def newsession(tf_pair, tmp_path_factory):
    """One ``attach --break TF_NewSession`` run on examples/open_session.py, its gdb watched and its MI logged."""
    tmp = tmp_path_factory.mktemp("newsession")
    r, peak = run_watching_gdb(tf_pair.tfnative + ["attach", *tf_pair.python_option(), OPEN_SESSION, "--break",
                                                   "TF_NewSession", "--json", str(tmp / "s.json"),
                                                   "--gdb-log", str(tmp / "gdb.log")], tmp)
    assert r.returncode == 0, "exit %s: %s" % (r.returncode, r.stderr[-3000:])
    with open(tmp / "gdb.log", errors="replace") as f:
        gdb_log = f.read()
    return r, load_json(tmp / "s.json"), peak, gdb_log


def test_tf_newsession(newsession):
    """attach --break TF_NewSession: the stop in TensorFlow's C API, the user's call chain above it."""
    r, doc, _peak, _log = newsession
    assert "result: [[5.0]]" in r.stdout  # the script ran on after the stop
    (event,) = doc["events"]
    frames = event["threads"][0]["frames"]
    assert frames[0]["function"] == "TF_NewSession" and frames[0]["library"] == "libtensorflow_cc.so.2"
    first_user = index(frames, lambda f: f["kind"] == "python" and f.get("file") == OPEN_SESSION, "user frame")
    assert first_user > 0  # the user's line above the C API frame
    assert py_frames(frames, OPEN_SESSION) == [
        ("make_session", line_of(OPEN_SESSION, "return tf.compat.v1.Session(graph=graph)")),
        ("build_model", line_of(OPEN_SESSION, "sess = make_session(graph)")),
        ("main", line_of(OPEN_SESSION, "sess, y = build_model()")),
        ("<module>", exact_line(OPEN_SESSION, "main()")),
    ]
    assert doc["triage"]["nearest_user_frame"] == {
        "function": "make_session", "file": OPEN_SESSION,
        "line": line_of(OPEN_SESSION, "return tf.compat.v1.Session(graph=graph)")}


def test_fast_attach(newsession):
    """The same run took tfnative's fast path: gdb never read TensorFlow's huge symbol tables in full (about
    2 GB of gdb memory and 20-30 s when it does), and tfnative did not fall back to it.  On TF 2.16-2.20, whose
    ``libtensorflow_cc.so.2`` carries C++ runtime DWARF and a ``.gnu_debuglink`` naming ``crti.o``, tfnative once
    took that for a debug build and had gdb read it (issue #22)."""
    r, _doc, peak, gdb_log = newsession
    assert "fast symbols unavailable" not in r.stderr, r.stderr[-2000:]
    assert "gdb reads it in full" not in r.stderr, r.stderr[-2000:]
    assert 0 < peak < 1000, "gdb's peak RSS was %d MB: it read a TensorFlow library's symbols in full" % peak
    # our index resolved TF_NewSession: gdb was never told to load libtensorflow_cc's symbols
    assert not [ln for ln in gdb_log.splitlines() if "sharedlibrary" in ln and "libtensorflow_cc" in ln]


def _check_pyfunc_segv(doc: dict, event: dict) -> None:
    """The crashed thread: the callback's line above PyFuncOp::Compute, whose op is EagerPyFunc; the main
    thread at the user's call."""
    assert event["signal"] == "SIGSEGV"
    crashed = event["threads"][0]
    assert crashed["tid"] == event["thread"]
    frames = crashed["frames"]
    i_cb = index(frames, lambda f: f["kind"] == "python" and f["function"] == "bad_callback", "bad_callback")
    assert frames[i_cb]["file"] == PYFUNC_SEGV and frames[i_cb]["line"] == line_of(PYFUNC_SEGV, "ctypes.string_at(0)")
    i_kernel = index(frames, lambda f: "PyFuncOp::Compute" in (f["function"] or ""), "PyFuncOp::Compute")
    assert i_cb < i_kernel
    assert (frames[i_kernel].get("op") or {}).get("type") == "EagerPyFunc", frames[i_kernel]
    mains = [t for t in event["threads"] if t["tid"] == doc["pid"]]
    assert mains, "the main thread %s is not shown" % doc["pid"]
    assert py_frames(mains[0]["frames"], PYFUNC_SEGV) == [
        ("train", line_of(PYFUNC_SEGV, "return step(tf.constant(1.0))")), ("<module>", exact_line(PYFUNC_SEGV,
                                                                                                  "train()"))]


def test_pyfunc_segv_attach(tf_pair, tmp_path, autograph_files):
    """A segfault in a tf.py_function callback, under attach."""
    out = tmp_path / "s.json"
    proc = subprocess.Popen(tf_pair.tfnative + ["attach", *tf_pair.python_option(), "--json", str(out), PYFUNC_SEGV],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            cwd=ROOT)
    time.sleep(1)
    tree = descendants(proc.pid)
    try:
        _, err = proc.communicate(timeout=600)
    finally:
        stop_all([proc])
    assert proc.returncode == 128 + signal.SIGSEGV, err[-3000:]
    doc = load_json(out)
    assert doc["exit"] == {"signal": "SIGSEGV"}
    _check_pyfunc_segv(doc, doc["events"][0])
    assert "op EagerPyFunc" in err and "nearest user frame bad_callback at %s:" % PYFUNC_SEGV in err
    assert_gone(tree)


def test_pyfunc_segv_core(tf_pair, tmp_path, autograph_files):
    """The same segfault, read from the kernel's core dump."""
    core = make_core(tf_pair, PYFUNC_SEGV, tmp_path)
    try:
        r, doc = json_run(tf_pair, tmp_path, ["core", core])
        assert doc["events"][0]["via"] == "cfi", r.stderr[-2000:]  # tfnative's own unwinder, no gdb
        _check_pyfunc_segv(doc, doc["events"][0])
    finally:
        os.unlink(core)


def test_break_op_matmul(tf_pair, tmp_path):
    """--break-op MatMul on a tf.function's MatMul: one hit in the kernel, op MatMul, the user's line."""
    r, doc = json_run(tf_pair, tmp_path, ["attach", *tf_pair.python_option(), "--break-op", "MatMul",
                                          "--max-hits", "5", MATMUL])
    assert "result 54.0" in r.stdout
    assert [e["location"] for e in doc["events"]] == ["op MatMul"], r.stderr[-3000:]
    (event,) = doc["events"]
    assert event["op"]["type"] == "MatMul"
    hit = event["threads"][0]
    top = hit["frames"][0]
    assert KERNEL_COMPUTE in (top["function"] or "") and top["op"]["type"] == "MatMul", top
    # the kernel works for the user's tf.function, and the user's call of it is on a stack of the event
    assert (hit.get("tf_function") or {}).get("python_function") == "layer", hit.get("tf_function")
    call = ("main", line_of(MATMUL, "# CALL LINE"))
    assert [t["tid"] for t in event["threads"] if call in py_frames(t["frames"], MATMUL)], \
        "no thread at main, %s:%d" % (MATMUL, call[1])
    assert doc["triage"]["breakpoints"] == {"op MatMul": 1}


@pytest.fixture(scope="module")
def hung(tf_pair, tmp_path_factory):
    """One tf_hang.py process (a tf.function blocked in its tf.py_function callback) for the stack checks."""
    tmp = tmp_path_factory.mktemp("hang")
    ready, release = tmp / "ready", tmp / "release"
    proc = subprocess.Popen([tf_pair.python, HANG, str(ready), str(release)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        pid = int(wait_for_file(str(ready), 300, proc))
        yield pid, release, proc
    finally:
        stop_all([proc])


def _hang_stack(tf_pair, tmp_path, hung) -> tuple:
    pid = hung[0]
    r, doc = json_run(tf_pair, tmp_path, ["stack", "--pid", str(pid), "--all-threads"], timeout=300)
    assert state_of(pid) in ("S", "R")
    return pid, r, doc


def test_hang_stack(tf_pair, tmp_path, hung):
    """stack --pid of a hung tf.function: the callback's line above PyFuncOp::Compute (op EagerPyFunc) on a
    worker thread, the main thread in TFE_Execute under the user's call."""
    pid, r, doc = _hang_stack(tf_pair, tmp_path, hung)
    threads = {t["tid"]: t for t in doc["events"][0]["threads"]}
    main = threads[pid]["frames"]
    i_exec = index(main, lambda f: f["function"] == "TFE_Execute", "TFE_Execute")
    i_main = index(main, lambda f: f["kind"] == "python" and f["function"] == "main", "main")
    assert i_exec < i_main and main[i_main]["line"] == line_of(HANG, 'print("result"')
    workers = [t for t in threads.values() if ("slow_callback", line_of(HANG, "time.sleep(0.05)")) in
               py_frames(t["frames"], HANG) or ("slow_callback", line_of(HANG, "while RELEASE")) in
               py_frames(t["frames"], HANG)]
    assert len(workers) == 1 and workers[0]["tid"] != pid
    wf = workers[0]["frames"]
    i_cb = index(wf, lambda f: f["function"] == "slow_callback", "slow_callback")
    i_kernel = index(wf, lambda f: "PyFuncOp::Compute" in (f["function"] or ""), "PyFuncOp::Compute")
    assert i_cb < i_kernel and (wf[i_kernel].get("op") or {}).get("type") == "EagerPyFunc", wf[i_kernel]
    assert "<-- op EagerPyFunc" in r.stdout


def test_hang_verdict(tf_pair, tmp_path, hung):
    """The verdict names the tf.function the main thread waits for and the callback that holds it up."""
    pid, r, doc = _hang_stack(tf_pair, tmp_path, hung)
    t = doc["triage"]
    lines = "(%d|%d)" % (line_of(HANG, "time.sleep(0.05)"), line_of(HANG, "while RELEASE"))
    assert t["pattern"] == "waiting_on_executor", t["verdict"]
    assert t["verdict"].startswith("the main thread waits for tf.function step at tf_hang.py:%d; " % line_of(
        HANG, 'print("result"')), t["verdict"]
    assert re.search(r"the work is on .*thread (\d+) in the tf\.py_function callback slow_callback at "
                     r"tf_hang\.py:%s" % lines, t["verdict"]), t["verdict"]
    assert "tfnative: verdict: " + t["verdict"] in r.stderr


def test_check_numerics_sqrt(tf_pair, tmp_path):
    """--check-numerics on tf.sqrt of a negative in a tf.function: op Sqrt, made at the user's line."""
    r, doc = json_run(tf_pair, tmp_path, ["attach", *tf_pair.python_option(), "--check-numerics", SQRT],
                      expect_rc=1)
    assert "InvalidArgumentError" in r.stderr
    [event] = [e for e in doc["events"] if e["kind"] == "numerics"]
    assert event["op"]["type"] == "Sqrt", event["op"]
    created = [(f["file"], f["line"]) for f in event["op"]["created_at"] if f.get("user")]
    assert created[-1] == (SQRT, line_of(SQRT, "# NAN LINE")), created
    live = [(f["file"], f["line"]) for f in event["threads"][0]["frames"] if f["kind"] == "python" and f.get("user")]
    assert live[:1] == [(SQRT, line_of(SQRT, "# CALL LINE"))], live
    assert doc["triage"]["op"]["created_at"]["line"] == line_of(SQRT, "# NAN LINE")
    assert "NaN/Inf made by op Sqrt" in r.stderr


def test_doctor(tf_pair):
    """doctor on the pair's TensorFlow: exit 0, the TF libraries named, and the truth about a stock wheel:
    functions can be broken on, but no TensorFlow file:line or locals without a debug build."""
    r = tf_pair.run(["doctor", *tf_pair.python_option(), "--json"], timeout=120)
    assert r.returncode == 0, r.stderr
    docs = {os.path.basename(d["path"]): d for d in json.loads(r.stdout)}
    assert {"libtensorflow_cc.so.2", "libtensorflow_framework.so.2"} <= set(docs), sorted(docs)
    venv = os.path.dirname(os.path.dirname(tf_pair.python))
    for name in ("libtensorflow_cc.so.2", "libtensorflow_framework.so.2"):
        d = docs[name]
        assert os.path.realpath(d["path"]).startswith(os.path.realpath(venv) + "/"), d["path"]
        assert d["can_break_functions"] and not d["can_see_lines"] and not d["can_see_locals"], (name, d["verdict"])
        assert "no file:line" in d["verdict"] and d["next_preset"], (name, d["verdict"])
        assert "install the separate debug file" not in d["verdict"], (name, d["verdict"])
    text = tf_pair.run(["doctor", *tf_pair.python_option()], timeout=120)
    assert text.returncode == 0 and "libtensorflow_cc.so.2" in text.stdout


# --- plain-Python checks (every pair, 3.15 included) -------------------------------------------------------------


@pytest.fixture(scope="module")
def named(pair, tmp_path_factory):
    """One named_threads.py process: threads "loader-1" and "trainer" blocked at known lines."""
    ready = str(tmp_path_factory.mktemp("named") / "ready")
    proc = subprocess.Popen([pair.python, NAMED, ready], stdin=subprocess.DEVNULL)
    try:
        wait_for_file(ready, 60, proc)
        yield proc.pid
    finally:
        stop_all([proc])


def test_py_stack(pair, tmp_path, named):
    """stack --pid: every thread with its Python name and its frames at the program's lines, in call order."""
    r, doc = json_run(pair, tmp_path, ["stack", "--pid", str(named)], timeout=120)
    threads = {t.get("python_name"): t for t in doc["events"][0]["threads"]}
    assert {"MainThread", "loader-1", "trainer"} <= set(threads), sorted(map(str, threads))
    assert threads["MainThread"]["tid"] == named
    assert py_frames(threads["MainThread"]["frames"], NAMED) == [
        ("main", line_of(NAMED, "# MAIN_LINE")), ("<module>", exact_line(NAMED, "main()"))]
    assert py_frames(threads["loader-1"]["frames"], NAMED) == [("load", line_of(NAMED, "# LOADER_LINE"))]
    assert py_frames(threads["trainer"]["frames"], NAMED) == [("train", line_of(NAMED, "# TRAINER_LINE"))]
    assert 'Thread %d "loader-1"' % threads["loader-1"]["tid"] in r.stdout
    assert state_of(named) in ("S", "R")


def test_py_locals(pair, tmp_path, named):
    """stack --locals: arguments and locals of known values, in the frame's order."""
    _r, doc = json_run(pair, tmp_path, ["stack", "--pid", str(named), "--locals"], timeout=120)
    threads = {t.get("python_name"): t for t in doc["events"][0]["threads"]}
    load = next(f for f in threads["loader-1"]["frames"] if f["kind"] == "python" and f["function"] == "load")
    train = next(f for f in threads["trainer"]["frames"] if f["kind"] == "python" and f["function"] == "train")
    assert [(v["name"], v["repr"], v["arg"]) for v in load.get("variables", [])] == [
        ("batch_index", "41", True), ("paths", "('a.tfrecord',)", True), ("options", "{'cycle': 2}", True),
        ("shard", "'train-00041'", False), ("sizes", "[128, 256, 512, 1024, ... 1 more]", False),
        ("ratio", "0.25", False), ("done", "None", False)]
    assert [(v["name"], v["repr"], v["arg"]) for v in train.get("variables", [])] == [
        ("step", "7", True), ("flags", "{'a': 1, 'b': 2}", False), ("pair", "(7, b'xy')", False),
        ("active", "True", False)]


def test_py_gil(pair, tmp_path):
    """stack --pid: the GIL holder (the main thread, in a C call made by __del__ in a garbage collection) and
    the two threads waiting for it."""
    proc = subprocess.Popen([pair.python, GIL], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline() == b"ready\n"
        r, doc = json_run(pair, tmp_path, ["stack", "--pid", str(proc.pid)], timeout=120)
    finally:
        stop_all([proc])
    threads = {t["tid"]: t for t in doc["events"][0]["threads"]}
    assert [tid for tid, t in threads.items() if t.get("gil") == "held"] == [proc.pid]
    assert len([tid for tid, t in threads.items() if t.get("gil") == "waiting"]) == 2
    assert [tid for tid, t in threads.items() if t.get("gc")] == [proc.pid]
    assert py_frames(threads[proc.pid]["frames"], GIL)[:2] == [
        ("hold_gil", line_of(GIL, "PyDLL(None).sleep")),
        (qualified(pair, "Holder.__del__"), line_of(GIL, "        hold_gil()"))]
    assert "[holds the GIL]" in r.stdout


def test_py_core(pair, tmp_path):
    """core of a Python program that segfaults in ctypes: the signal, the Python frames at their lines."""
    core = make_core(pair, SEGV, tmp_path)
    try:
        _r, doc = json_run(pair, tmp_path, ["core", core], timeout=120)
    finally:
        os.unlink(core)
    event = doc["events"][0]
    assert (event["signal"], event["fault_address"]) == ("SIGSEGV", "0x0")
    assert event["threads"][0]["tid"] == event["thread"]
    assert py_frames(event["threads"][0]["frames"], SEGV) == [
        ("poke", line_of(SEGV, "ctypes.string_at(0)")), ("main", exact_line(SEGV, "poke()")),
        ("<module>", exact_line(SEGV, "main()"))]


def test_py_attach_break(pair, tmp_path):
    """attach --break uname: the stop in libc under the Python call chain, native and Python frames merged."""
    r, doc = json_run(pair, tmp_path, ["attach", *pair.python_option(), "--break", "uname", UNAME, "x"],
                      timeout=120)
    assert "done ['x']" in r.stdout
    thread = doc["events"][0]["threads"][0]
    assert thread["merge"] == "ok"
    assert "uname" in thread["frames"][0]["function"]
    assert py_frames(thread["frames"], UNAME) == [
        ("leaf", line_of(UNAME, "os.uname()")), ("middle", line_of(UNAME, "return leaf()")),
        (qualified(pair, "Runner.run"), line_of(UNAME, "return middle()")),
        ("<module>", line_of(UNAME, "Runner().run()"))]
