"""More TensorFlow checks of the version matrix, on the same pair as ``test_pair.py`` (see ``conftest.py``).

``test_pair.py`` has the checks issue #22 lists; these are the other TF-aware features a user of a new
(Python, TensorFlow) pair relies on, each asserted as a user reads it: TensorFlow's own fatal log line and the
op of the aborting kernel (a real ``Check failed`` abort, read from the kernel's ``OpKernel`` in memory),
``--op-origins`` (the line that made the op, and a gradient's forward op), AutoGraph's generated frames mapped
back to the user's function and lines, the thread views of a stuck process (a tf.data pipeline's workers,
TensorFlow's inter-op pool exhausted by callbacks), and ``watch`` of a TensorFlow job (a hang reported and the job
ended, a crash reported with the job's own status, a healthy step loop never reported).  Every tfnative attach
and watch gets its own ``TMPDIR`` so that what it and its target leave there (AutoGraph's generated files after a
crash, tfnative's own directories) is checked and removed here, not in the shared ``/tmp``.

Run from a checkout whose pair venvs were provisioned from another checkout (their editable tfnative points
there): put this checkout first, ``PYTHONPATH=$PWD:$PWD/gdb_scripts``, and the pair's own tfnative runs its code.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import time
from typing import Optional

import psutil
import pytest

from tfnative.core.docschema import check_document

from ..kernels import build_op, source
from ..utils import (
    ROOT,
    assert_gone,
    assert_running_untraced,
    held,
    line_of,
    load_json,
    script,
    state_of,
    tracer_of,
    wait_for_file,
)

ABORT = script("tf_check_failed.py")
SQRT_GRAD = script("tf_sqrt_grad.py")
AUTOGRAPH = script("tf_autograph.py")
DATA = script("tf_data_hang.py")
STUCK = script("tf_stuck.py")
BUSY = script("tf_busy_matmul.py")
USE_ZERO_OUT = script("use_zero_out.py")
KERNEL_CASE = script("kernel_case.py")
KERNEL_HANG = script("kernel_hang.py")
DATA_MAP = os.path.join(ROOT, "tests", "hangs", "data_map_event.py")
MWMS_PEER = os.path.join(ROOT, "tests", "hangs", "mwms_missing_peer.py")
STEPS = script("tf_watch_steps.py")
GENERATED = re.compile(r"__autograph_generated_file\w*\.py$")
# Native frames of the interpreter that only carry a Python-to-C call along (a user never needs them).
GLUE = ("cfunction_call", "_PyObject_MakeTpCall", "method_vectorcall", "slot_tp_call", "_PyFunction_Vectorcall",
        "_PyEval_Vector", "PyObject_Vectorcall", "run_mod")

pytestmark = pytest.mark.matrix


def tf_run(pair, tmp, args: list, expect_rc: int, timeout: float = 600) -> tuple:
    """``tfnative ARGS --json FILE`` with TMPDIR=``tmp/t``: (completed run, document, what is left in TMPDIR
    besides AutoGraph's generated files)."""
    tmpdir = tmp / "t"
    tmpdir.mkdir()
    out = tmp / "s.json"
    r = pair.run(args + ["--json", str(out)], timeout=timeout, env=dict(os.environ, TMPDIR=str(tmpdir)))
    try:
        assert r.returncode == expect_rc, "exit %s, expected %s: %s" % (r.returncode, expect_rc, r.stderr[-3000:])
        left = sorted(n for n in os.listdir(tmpdir) if not GENERATED.search(n) and n != "__pycache__")
        return r, load_json(out), left
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def user_lines(frames: list) -> list:
    return [(f["file"], f["line"]) for f in frames if f.get("user")]


@pytest.fixture(scope="module")
def abort(tf_pair, tmp_path_factory):
    """One ``attach --op-origins`` run of tf_check_failed.py: FusedPadConv2D on a scalar aborts in
    ``tensor_shape.cc`` (``Check failed: d < dims() (1 vs. 0)``) inside its kernel, on an executor thread."""
    return tf_run(tf_pair, tmp_path_factory.mktemp("abort"),
                  ["attach", *tf_pair.python_option(), "--op-origins", ABORT], expect_rc=128 + signal.SIGABRT)


def test_tf_abort_log(abort):
    """A Check-failed abort is one fatal SIGABRT event carrying TensorFlow's fatal log line, read from memory;
    the script's own stderr still has TensorFlow's line."""
    r, doc, left = abort
    (event,) = doc["events"]
    assert (event["kind"], event["signal"], event["fatal"]) == ("signal", "SIGABRT", True)
    assert re.search(r"tensor_shape\.cc:\d+\] Check failed: d < dims\(\) \(1 vs\. 0\)$", event["log"] or ""), \
        event.get("log")
    assert doc["triage"]["log"] == event["log"]
    assert "TensorFlow's log: " + event["log"] in r.stderr
    assert "Check failed: d < dims() (1 vs. 0)" in r.stderr.split("=== tfnative:")[0]
    assert left == [], left


def test_tf_abort_kernel_op(abort):
    """The aborting kernel's frame names its op (read from the OpKernel object), the triage too; the user's
    line is the call of the tf.function, found from the thread that called it."""
    r, doc, _left = abort
    event = doc["events"][0]
    stopped = event["threads"][0]
    kernels = [f for f in stopped["frames"] if "FusedResizeConv2DUsingGemmOp" in (f["function"] or "")]
    assert kernels and (kernels[0].get("op") or {}).get("type") == "FusedPadConv2D", kernels[:1]
    assert doc["triage"]["op"]["type"] == "FusedPadConv2D"
    call = line_of(ABORT, "print(bad_pad_conv(")
    assert doc["triage"]["nearest_user_frame"] == {"function": "<module>", "file": ABORT, "line": call}
    assert "nearest user frame <module> at %s:%d" % (ABORT, call) in r.stderr
    # the interpreter's call glue is hidden, under whatever names its build gives it (an LTO build's clones)
    shown = re.findall(r"^\s*#\d+\s+(\S+) in \S*python3", r.stderr, re.M)
    assert shown and not [n for n in shown if n.split(".")[0] in GLUE], shown
    if not any(f["kind"] == "python" for f in stopped["frames"]):  # the kernel ran on an executor thread
        fn = stopped.get("tf_function") or {}
        assert fn.get("python_function") == "bad_pad_conv", fn
        (caller,) = [t for t in event["threads"] if t["tid"] == fn["called_by"]]
        assert [f["line"] for f in caller["frames"] if f.get("user")] == [call]


def test_tf_abort_core(tf_pair, tmp_path):
    """``core`` of the same abort, dumped by the kernel: TensorFlow's fatal log line read from the core's memory,
    the kernel frame's op, the user's line."""
    env = dict(os.environ, TMPDIR=str(tmp_path))  # AutoGraph's generated file outlives the abort: keep it here
    proc = subprocess.run([tf_pair.python, ABORT], cwd=str(tmp_path), preexec_fn=raise_core_limit, env=env,
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == -signal.SIGABRT, proc.stderr[-2000:]
    core = tmp_path / "core"
    assert core.exists(), "no core in %s (core_pattern is %s)" % (tmp_path, open(
        "/proc/sys/kernel/core_pattern").read().strip())
    try:
        out = tmp_path / "c.json"
        r = tf_pair.run(["core", str(core), "--json", str(out)], timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        doc = load_json(out)
    finally:
        core.unlink()
    event = doc["events"][0]
    assert event["signal"] == "SIGABRT"
    assert re.search(r"tensor_shape\.cc:\d+\] Check failed: d < dims\(\) \(1 vs\. 0\)$", event.get("log") or ""), \
        event.get("log")
    # the same line TensorFlow wrote on the script's stderr
    assert event["log"].split("] ", 1)[0].rsplit("/", 1)[-1] in proc.stderr
    assert doc["triage"]["log"] == event["log"]
    assert doc["triage"]["op"]["type"] == "FusedPadConv2D"
    assert doc["triage"]["nearest_user_frame"]["line"] == line_of(ABORT, "print(bad_pad_conv(")


def raise_core_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def test_op_origins_crash(abort):
    """--op-origins: the aborting op was made at the line of the tf.function's body."""
    r, doc, _left = abort
    op = doc["events"][0]["op"]
    body = line_of(ABORT, "return tf.raw_ops.FusedPadConv2D(")
    assert op["type"] == "FusedPadConv2D"
    assert user_lines(op["created_at"])[-1] == (ABORT, body), user_lines(op["created_at"])
    assert doc["triage"]["op"]["created_at"]["line"] == body
    assert "op FusedPadConv2D created at %s:%d" % (ABORT, body) in r.stderr


def test_op_origins_gradient(tf_pair, tmp_path):
    """--op-origins with --break-op SqrtGrad: the gradient op's line and its forward op Sqrt's line."""
    r, doc, left = tf_run(tf_pair, tmp_path, ["attach", *tf_pair.python_option(), "--op-origins", "--break-op",
                                              "SqrtGrad", SQRT_GRAD], expect_rc=0)
    assert r.stdout.strip() == "[0.25       0.16666667]"
    assert [e["location"] for e in doc["events"]] == ["op SqrtGrad"], r.stderr[-3000:]
    op = doc["events"][0]["op"]
    assert op["type"] == "SqrtGrad"
    assert user_lines(op["created_at"])[-1] == (SQRT_GRAD, line_of(SQRT_GRAD, "# GRADIENT"))
    assert op["forward"]["type"] == "Sqrt"
    assert user_lines(op["forward"]["created_at"])[-1] == (SQRT_GRAD, line_of(SQRT_GRAD, "# FORWARD"))
    assert "Its forward op Sqrt" in r.stderr
    assert left == [], left


def test_autograph(tf_pair, tmp_path):
    """Tracing a tf.range loop under AutoGraph: no frame left in AutoGraph's generated file; the loop body's
    ops at the loop body's line of the user's function, the converted location kept beside it."""
    r, doc, _left = tf_run(tf_pair, tmp_path, ["attach", *tf_pair.python_option(), "--break", "TF_FinishOperation",
                                               "--max-hits", "80", "--full", AUTOGRAPH], expect_rc=0)
    assert "total 14" in r.stdout
    frames = [f for e in doc["events"] for t in e["threads"] for f in t["frames"] if f["kind"] == "python"]
    assert not [f for f in frames if GENERATED.search(f["file"] or "")]
    mapped = [f for f in frames if f.get("converted")]
    assert mapped and all(GENERATED.search(f["converted"]["file"]) for f in mapped)
    body = line_of(AUTOGRAPH, "total += tf.math.square(i)")
    hits = [f for f in mapped if f["line"] == body]
    assert hits and all(f["function"] == "accumulate" and f["file"] == AUTOGRAPH and f["user"] for f in hits)
    assert any(f["converted"]["function"].endswith("loop_body") for f in hits)
    assert {f["line"] for f in mapped} >= {line_of(AUTOGRAPH, "total = tf.constant(0)"),
                                           line_of(AUTOGRAPH, "for i in"), body}
    assert "[AutoGraph: ran as " in r.stderr and "tf_autograph.py:%d  <-- your code" % body in r.stderr


def stack_doc(pair, tmp, pid: int, name: str = "s") -> tuple:
    """``tfnative stack --pid PID --json FILE``: (completed run, document); exit 0 and the target left running
    checked."""
    out = tmp / ("%s.json" % name)
    r = pair.run(["stack", "--pid", str(pid), "--json", str(out)], timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert state_of(pid) in ("S", "R")
    return r, load_json(out)


def test_tf_data_view(tf_pair, tmp_path):
    """stack --pid of a loop waiting on a tf.data iterator whose map callback blocks: the callback's threads
    are tf.data's (told by what they run), the verdict names the user's loop and the callback; the pipeline
    runs on once released."""
    with held(tf_pair.python, DATA, tmp_path) as proc:
        r, doc = stack_doc(tf_pair, tmp_path, proc.pid)
    t = doc["triage"]
    assert t["pattern"] == "waiting_on_tf_data", t["verdict"]
    event = doc["events"][0]
    workers = [th for th in event["threads"] if any(f["kind"] == "python" and f["function"] == "slow_map"
                                                    for f in th["frames"])]
    assert workers
    tids = [th["tid"] for th in workers]
    # the verdict names them as tf.data's threads; where TF names no pool thread, the pool summary places them
    said = [int(x) for group in re.findall(r"tf\.data threads? ([\d, ]+) in ", t["verdict"]) for x in group.split(",")]
    assert sorted(said) == sorted(tids), (tids, t["verdict"])
    if "pools" in event["pool"]:
        assert set(tids) <= set(event["pool"]["pools"]["tf.data"]), event["pool"]
    lines = {f["line"] for th in workers for f in th["frames"] if f.get("function") == "slow_map"}
    assert lines <= set(range(line_of(DATA, "while RELEASE"), line_of(DATA, "return x * 2"))), lines
    assert t["verdict"].startswith("the main thread waits for the next element of a tf.data iterator at "
                                   "tf_data_hang.py:%d; the work is on tf.data thread" % line_of(DATA, "for x in ds:"))
    assert "in the tf.py_function callback slow_map at tf_data_hang.py:" in t["verdict"]
    assert "tfnative: verdict: " + t["verdict"] in r.stderr


def test_inter_op_pool(tf_pair, tmp_path):
    """stack --pid of a process whose two inter-op threads both wait inside tf.py_function callbacks: the pool
    is exhausted, each of its threads at the callback's line, and the tf.function calls that wait for it."""
    proc = subprocess.Popen([tf_pair.python, STUCK, "pool"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline() == b"ready\n"
        end = time.monotonic() + 180
        for i in range(1000):  # the callers reach the executor some time after "ready"
            r, doc = stack_doc(tf_pair, tmp_path, proc.pid, name="s%d" % i)
            if doc["triage"]["pattern"] == "pool_exhausted" or time.monotonic() > end:
                break
            time.sleep(0.5)
    finally:
        proc.kill()
        proc.wait()
    t = doc["triage"]
    assert t["pattern"] == "pool_exhausted", t["verdict"]
    assert t["pool"]["threads"] == 2 and t["pool"]["idle"] == [], t["pool"]
    threads = {th["tid"]: th for th in doc["events"][0]["threads"]}
    callback = line_of(STUCK, "    EVENT.wait()")
    for tid in t["pool"]["busy"]:
        user = [(f["function"], f["line"]) for f in threads[tid]["frames"] if f.get("user")]
        assert user[:1] == [("wait_for_event", callback)], (tid, user)
    assert "in the tf.py_function callback wait_for_event at tf_stuck.py:%d" % callback in t["verdict"]
    assert "the main thread waits for tf.function set_step at tf_stuck.py:%d" % line_of(
        STUCK, "        set_step(x)") in t["verdict"]
    assert "tfnative: verdict: " + t["verdict"] in r.stderr


def test_break_op_pid(tf_pair, tmp_path):
    """attach --pid --break-op MatMul on a running job (a venv's python: its executable is the base
    interpreter, which cannot import the venv's TensorFlow): the op is checked against the TensorFlow the process
    loaded, a hit in the MatMul kernel at the user's loop line, and the job runs on, untraced."""
    ready = tmp_path / "ready"
    proc = subprocess.Popen([tf_pair.python, BUSY, str(ready)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        wait_for_file(str(ready), 300, proc)
        bad = tf_pair.run(["attach", "--pid", str(proc.pid), "--break-op", "matmul"], timeout=300)
        assert bad.returncode != 0 and "Traceback" not in bad.stderr
        assert bad.stderr.strip().splitlines()[-1].startswith("tfnative: error: --break-op matmul: TensorFlow has no "
                                                             "op type of that name; candidates: MatMul"), bad.stderr
        out = tmp_path / "s.json"
        r = tf_pair.run(["attach", "--pid", str(proc.pid), "--break-op", "MatMul", "--max-hits", "1", "--json",
                         str(out)], timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert_running_untraced(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    doc = load_json(out)
    assert [e["location"] for e in doc["events"]] == ["op MatMul"], r.stderr[-3000:]
    top = doc["events"][0]["threads"][0]["frames"][0]
    assert "::Compute(tensorflow::OpKernelContext*)" in (top["function"] or "") and top["op"]["type"] == "MatMul"
    loop = ("<module>", line_of(BUSY, "step(a, b)  # the busy loop"))
    assert [t for t in doc["events"][0]["threads"] if loop in [(f["function"], f["line"]) for f in t["frames"]
                                                                if f["kind"] == "python" and f["file"] == BUSY]]


def test_custom_op_break(tf_pair, tmp_path):
    """A custom op (tensorflow/custom-op's ``zero_out``) compiled with g++ against the pair's TensorFlow headers
    (``-g -O1``, cached by content hash): ``attach --break-op ZeroOut`` is pending until the library registers the
    type, then stops in the op's own kernel at its ``.cc`` line, the op named, the user's Python line below."""
    so = build_op("zero_out", "g", python=tf_pair.python)
    out = tmp_path / "s.json"
    r = tf_pair.run(["attach", *tf_pair.python_option(), "--break-op", "ZeroOut", "--json", str(out), USE_ZERO_OUT,
                     so], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[[1, 0], [0, 0]]" in r.stdout
    assert "tfnative: --break-op ZeroOut: pending until a library registers it\n" in r.stderr
    (event,) = load_json(out)["events"]
    assert event["location"] == "op ZeroOut" and event["op"]["type"] == "ZeroOut"
    frames = event["threads"][0]["frames"]
    assert (frames[0]["function"] or "").startswith("ZeroOutOp::Compute"), frames[0]
    assert (os.path.basename(frames[0]["file"] or ""), frames[0]["line"]) == (
        "zero_out.cc", line_of(source("zero_out"), "tfn: the kernel's Compute"))
    assert user_lines(frames)[:1] == [(USE_ZERO_OUT, line_of(USE_ZERO_OUT, "tfn: the Python line that calls the op"))]


def test_custom_op_check(tf_pair, tmp_path):
    """A custom op whose kernel fails TensorFlow's own CHECK (``time_two_matrix``: ``matrix<T>()`` of a vector),
    built ``-g`` and ``-O2 -g0`` against the pair's headers: under ``attach`` both give the same op, the same
    ``Check failed`` line and the user's line; the ``-g`` build's kernel frame has its ``.cc`` line."""
    seen = {}
    for flavour in ("g", "g0"):
        so = build_op("time_two_matrix", flavour, python=tf_pair.python)
        (tmp_path / flavour).mkdir()
        r, doc, _left = tf_run(tf_pair, tmp_path / flavour, ["attach", *tf_pair.python_option(), KERNEL_CASE, so,
                                                             "matrix", "eager"], expect_rc=128 + signal.SIGABRT)
        event = doc["events"][-1]
        frames = event["threads"][0]["frames"]
        kernel = next(f for f in frames if f.get("op"))
        seen[flavour] = (kernel["op"]["type"], re.sub(r"\.cc:\d+\]", ".cc:N]", event["log"] or ""),
                         user_lines(frames)[:1])
        if flavour == "g":
            assert (os.path.basename(kernel["file"] or ""), kernel["line"]) == (
                "time_two_matrix.cc", line_of(source("time_two_matrix"), "tfn: the wrong-rank access")), kernel
    assert seen["g"] == seen["g0"], seen
    op, log, user = seen["g"]
    assert op == "TimeTwoMatrix" and "Check failed: NDIMS == dims() (2 vs. 1)" in log, seen
    assert user == [(KERNEL_CASE, line_of(KERNEL_CASE, "# tfn: matrix"))], seen


def test_custom_op_hang(tf_pair, tmp_path):
    """Hangs in custom ops built against the pair's headers, each read by one ``stack --pid``: a kernel that locks
    its own ``tensorflow::mutex`` twice (``-g``: the self-deadlock with the frame that holds it, whether the
    pair's ``tsl::mutex`` is an ``absl::Mutex`` or nsync's ``nsync_mu``), an async kernel that never calls
    ``done`` (``-O2 -g0``).  The self-lock's kernel frames are the user's.  The async kernel's are on no stack:
    its ``ComputeAsync`` has returned (that is the bug), so the main thread waits in TensorFlow's
    ``AsyncOpKernel::Compute``; what the user reads there is the op and their own Python line."""
    cases = {"self_lock": ("self_lock", "g", "self_deadlock"), "never_done": ("async_never_done", "g0",
                                                                            "async_never_done")}
    procs = {}
    try:
        for case, (name, flavour, _pattern) in cases.items():
            so = build_op(name, flavour, python=tf_pair.python)
            procs[case] = subprocess.Popen([tf_pair.python, KERNEL_HANG, so, case, str(tmp_path / case)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           stdin=subprocess.DEVNULL, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        for case, proc in procs.items():
            wait_for_file(str(tmp_path / case), 300, proc)
        for case, proc in procs.items():
            out = tmp_path / ("%s.json" % case)
            r = tf_pair.run(["stack", "--pid", str(proc.pid), "--json", str(out)], timeout=300)
            assert r.returncode == 0, r.stderr[-3000:]
            doc = load_json(out)
            assert doc["triage"]["pattern"] == cases[case][2], doc["triage"]["verdict"]
            if case == "self_lock":
                main = next(t for t in doc["events"][0]["threads"] if t["tid"] == proc.pid)
                assert any(f.get("class") == "user" for f in main["frames"] if f["kind"] == "native"), main["frames"]
            assert_running_untraced(proc.pid)
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    held = line_of(source("self_lock"), "tfn: the kernel calls the helper")
    again = line_of(source("self_lock"), "tfn: the helper takes it again")
    verdict = load_json(tmp_path / "self_lock.json")["triage"]["verdict"]
    assert "(self-deadlock) in SelfLockOp::Compute at self_lock.cc:%d" % held in verdict, verdict
    assert "it locks it again in SelfLockOp::Refresh at self_lock.cc:%d" % again in verdict, verdict
    verdict = load_json(tmp_path / "never_done.json")["triage"]["verdict"]
    assert verdict.startswith("op KfAllReduce: its async kernel returned without calling done; no thread works "
                              "on it"), verdict
    assert "from kernel_hang.py:%d" % line_of(KERNEL_HANG, "tfn: KfAllReduce hangs here") in verdict, verdict


# --- watch (issue #37): the job launched by the pair's tfnative under the pair's interpreter -------------------


class PairWatch:
    """``tfnative watch [--python PAIR'S] ARGS`` in a session of its own with its own ``TMPDIR``, its standard
    output and error in files under ``tmp``; every process of its tree seen while it ran is kept (``seen``) so
    that ``close`` can check that none is left behind, stopped or traced."""

    def __init__(self, pair, tmp, args: list) -> None:
        self.tmpdir = tmp / "t"
        self.tmpdir.mkdir()
        self.out_path, self.err_path = tmp / "w.out", tmp / "w.err"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(pair.tfnative + ["watch", *pair.python_option(), *args], cwd=ROOT,
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
                                         env=dict(os.environ, TMPDIR=str(self.tmpdir)))
        self.seen: dict = {}
        self.marked: Optional[float] = None

    def out(self) -> str:
        return self.out_path.read_text()

    def err(self) -> str:
        return self.err_path.read_text()

    def tree(self) -> list:
        """The watcher and its descendants now (each one remembered in ``seen``)."""
        try:
            me = psutil.Process(self.proc.pid)
            procs = [me] + me.children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        for p in procs:
            self.seen.setdefault(p.pid, p)
        return procs

    def wait_for_file(self, path, timeout: float) -> str:
        try:
            return wait_for_file(str(path), timeout, self.proc)
        except AssertionError as e:
            raise AssertionError("%s:\n%s\n%s" % (e, self.out()[-3000:], self.err()[-3000:])) from None
        finally:
            self.tree()

    def finish(self, timeout: float, mark: Optional[str] = None) -> int:
        """The watcher's exit status once it has ended by itself (its tree looked at as it runs); where ``mark``
        is given, ``marked`` is when that text first showed in its output."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, "the watcher did not end within %.0f s:\n%s\n%s" % (
                timeout, self.out()[-3000:], self.err()[-3000:])
            self.tree()
            if mark is not None and self.marked is None and mark in self.out():
                self.marked = time.monotonic()
            time.sleep(0.1)
        return self.proc.returncode

    def close(self) -> list:
        """End whatever is left of the session, check nothing of it is left (alive, stopped or traced), remove
        ``TMPDIR``; what was left there besides AutoGraph's generated files."""
        self.tree()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for p in self.seen.values():
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        self.proc.wait()
        try:
            assert_gone(list(self.seen.values()))
            return sorted(n for n in os.listdir(self.tmpdir) if not GENERATED.search(n) and n != "__pycache__")
        finally:
            shutil.rmtree(self.tmpdir, ignore_errors=True)


def documents(path) -> list:
    """The documents of a JSON Lines file (``watch --json``), each checked against the schema."""
    with open(path) as f:
        docs = [json.loads(line) for line in f if line.strip()]
    for doc in docs:
        check_document(doc)
    return docs


def watch_hang(pair, tmp, program: str, hang_after: float, pattern: str, verdict: str) -> None:
    """``watch --hang-after S --interval 1 --on-hang kill --json --out PROGRAM READY`` of a hang program of
    ``tests/hangs`` (READY holds its pid, written just before it blocks): reported within --hang-after plus two
    intervals, with the verdict ``stack`` gives (``pattern``; ``verdict`` and the line marked ``# hangs here: main``
    start it); the job ended, the watch exits 124, nothing left; ``--json`` one document (the pair's interpreter
    ran it) whose event is a hang, ``--out`` the text, JSON Lines and HTML reports."""
    ready, out_dir, json_path = tmp / "ready", tmp / "out", tmp / "hang.jsonl"
    w = PairWatch(pair, tmp, ["--hang-after", str(hang_after), "--interval", "1", "--on-hang", "kill", "--json",
                              str(json_path), "--out", str(out_dir), program, str(ready)])
    try:
        job = int(w.wait_for_file(ready, 180))
        t_ready = time.monotonic()
        assert w.finish(90, mark="hang: no process of the job") == 124, w.err()[-3000:]
        assert_gone(list(w.seen.values()))  # the job ended with the watch, nothing left stopped or traced
        text = w.out()
        assert "=== tfnative: hang: pid %d made no progress" % job in text, text[-3000:]
        assert "ending the job (--on-hang kill)" in w.err()
        # reported within --hang-after plus two intervals, and a snapshot's time on 2 loaded cores
        assert w.marked is not None and w.marked - t_ready <= hang_after + 2 * 1 + 5, w.marked - t_ready
        (doc,) = documents(json_path)
        assert doc["pid"] == job and doc["events"][0]["kind"] == "hang"
        assert doc["argv"][:2] == [pair.python, program]  # the job ran under the pair's interpreter
        where = "%s:%d" % (os.path.basename(program), line_of(program, "# hangs here: main"))
        t = doc["triage"]
        assert t["pattern"] == pattern, t["verdict"]
        assert t["verdict"].startswith(verdict + where), t["verdict"]
        assert "verdict: " + t["verdict"] in text
        assert sorted(os.listdir(out_dir)) == ["hang-1.html", "hang-1.jsonl", "hang-1.txt"]
        assert [d["triage"] for d in documents(out_dir / "hang-1.jsonl")] == [t]
        assert where in (out_dir / "hang-1.txt").read_text()
        assert "<html" in (out_dir / "hang-1.html").read_text().lower()
        assert job in w.seen
    finally:
        left = w.close()
    assert left == [], left


def test_watch_hang(tf_pair, tmp_path):
    """A tf.data map callback waiting on an event nobody sets (its thread waking now and then to wait again),
    ``--hang-after 4``: the verdict ``waiting_on_tf_data`` at the main thread's ``next``."""
    watch_hang(tf_pair, tmp_path, DATA_MAP, 4, "waiting_on_tf_data",
               "the main thread waits for the next element of a tf.data iterator at ")


def test_watch_peer(tf_pair, tmp_path):
    """``MultiWorkerMirroredStrategy()`` waiting for a worker that never starts: gRPC's pollers and timers wake
    every 5 s only to wait again, which is no progress (``--hang-after 7``, over those 5 s); the verdict
    ``waiting_on_peer`` at the strategy's line."""
    watch_hang(tf_pair, tmp_path, MWMS_PEER, 7, "waiting_on_peer", "the main thread waits at ")


def test_watch_crash(tf_pair, tmp_path):
    """A real ``Check failed`` abort in a kernel (tf_check_failed.py, as ``abort`` runs it) under ``watch --json
    FILE``: the crash report ``attach`` gives (SIGABRT, the op FusedPadConv2D, TensorFlow's fatal log line, the
    user's line), then the job's own status, 134; no process left, stopped or traced."""
    json_path = tmp_path / "crash.jsonl"
    w = PairWatch(tf_pair, tmp_path, ["--json", str(json_path), ABORT])
    try:
        assert w.finish(240) == 128 + signal.SIGABRT, w.err()[-3000:]
        assert_gone(list(w.seen.values()))  # the job died of its abort, let go by the crash watch
        text = w.out()
        assert text.count("tfnative: watch: crash: process ") == 1, text[-3000:]
        assert "tfnative: watch: the job was killed by SIGABRT" in w.err()
        (doc,) = documents(json_path)
        assert doc["argv"] == [tf_pair.python, ABORT] and doc["exit"] == {"signal": "SIGABRT"}
        (event,) = doc["events"]
        assert (event["kind"], event["signal"], event["fatal"]) == ("signal", "SIGABRT", True)
        assert re.search(r"tensor_shape\.cc:\d+\] Check failed: d < dims\(\) \(1 vs\. 0\)$", event["log"] or ""), \
            event.get("log")
        assert doc["triage"]["log"] == event["log"]
        kernels = [f for f in event["threads"][0]["frames"] if f.get("op")]
        assert kernels and kernels[0]["op"]["type"] == "FusedPadConv2D", event["threads"][0]["frames"][:8]
        assert doc["triage"]["op"]["type"] == "FusedPadConv2D"
        call = line_of(ABORT, "print(bad_pad_conv(")
        assert doc["triage"]["nearest_user_frame"] == {"function": "<module>", "file": ABORT, "line": call}
        assert "FusedPadConv2D" in text and "Check failed: d < dims() (1 vs. 0)" in text
        assert "tf_check_failed.py:%d" % call in text
        assert doc["pid"] in w.seen
    finally:
        left = w.close()
    assert left == [], left


def test_watch_healthy(tf_pair, tmp_path):
    """A healthy TensorFlow step loop (a slow tf.data pipeline repeating the same wait element after element, a
    tf.function, a sleep at the same line every step) watched with ``--hang-after 4`` for three times that: it
    steps on and is never reported, traced by the crash watch and never stopped; kill -9 of the watcher leaves it
    running, untraced, stepping on."""
    ready, hang_after = tmp_path / "ready", 4
    w = PairWatch(tf_pair, tmp_path, ["--hang-after", str(hang_after), "--interval", "1", STEPS, str(ready)])
    try:
        job = int(w.wait_for_file(ready, 180))
        before = w.out().count("step ")
        time.sleep(3 * hang_after)
        assert w.proc.poll() is None, w.err()[-3000:]
        assert w.out().count("step ") - before >= 3 * hang_after // 2, w.out()[-3000:]  # it stepped all along
        # no report (TensorFlow's own log lines, on the same stderr, may say "change")
        said = re.findall(r"tfnative: (?:watch: )?(?:hang|straggler|still hung).*", w.out() + w.err())
        assert said == [], said
        assert tracer_of(job) == w.proc.pid and state_of(job) in ("S", "R", "D")  # the crash watch's, running
        assert job in w.seen
        os.kill(w.proc.pid, signal.SIGKILL)
        w.proc.wait()
        assert_running_untraced(job)
        steps = w.out().count("step ")
        time.sleep(2)
        assert w.out().count("step ") > steps, w.out()[-3000:]
    finally:
        left = w.close()
    assert left == [], left


CORPUS_PAD = os.path.join(ROOT, "tests", "corpus", "fused_pad_conv2d_eager.py")


def test_corpus_repro(tf_pair, tmp_path):
    """``attach --repro`` of a real crash of the corpus (tensorflow/tensorflow issue #125505: FusedPadConv2D aborts
    in ``tensor_shape.cc``): the op line names the inputs and attributes read from memory (its NodeDef and OpDef,
    in the layout of the pair's protobuf runtime: 3.21's on TF 2.16, 6.x's on 2.21 and 2.22), and the script
    written dies the same way under tfnative's own check (docs/repro.md, "Versions").  Then ``core --repro`` of
    the same crash's core (``--save-core``): the same op line, the same script, which dies the same way too."""
    repro, core = tmp_path / "repro.py", tmp_path / "saved.core"
    r, doc, left = tf_run(tf_pair, tmp_path, ["attach", *tf_pair.python_option(), "--repro", str(repro),
                                              "--save-core", str(core), CORPUS_PAD], expect_rc=128 + signal.SIGABRT)
    try:
        _same_repro(r, doc, repro)
        assert left == [], left
        again, out = tmp_path / "again.py", tmp_path / "c.json"
        c = tf_pair.run(["core", str(core), tf_pair.python, "--repro", str(again), "--json", str(out)], timeout=600)
    finally:
        core.unlink(missing_ok=True)  # some 300 MB
    assert c.returncode == 0, c.stderr[-3000:]
    _same_repro(c, load_json(out), again)
    assert again.read_text() == repro.read_text()  # the core's memory gave the inputs and attributes the live one did


def _same_repro(r, doc, repro) -> None:
    """The op line names FusedPadConv2D's inputs and attributes; the script written dies the same way."""
    assert ("op FusedPadConv2D(input: float32[3,2], paddings: int32[4,2]=[0,0,1,1,1,1,0,0], filter: float32[3,3,1,1]; "
            'mode="REFLECT", strides=[1,1,1,1], padding="VALID")') in (r.stdout + r.stderr).splitlines(), \
        r.stderr[-3000:]
    rep = doc["triage"].get("reproducer") or {}
    line = [s for s in r.stderr.splitlines() if s.startswith("tfnative: repro: ")]
    assert rep.get("check", {}).get("outcome") == "same", line
    assert re.match(r"tfnative: repro: %s \(\d+ lines\) dies of SIGABRT in op FusedPadConv2D, as the "
                    r"original did: (tensorflow/core/framework/)?tensor_shape\.cc:\d+\] "  # TF 2.16: the path
                    r"Check failed: d < dims\(\) \(2 vs\. 2\)$" % re.escape(repro.name), line[-1]), line
    assert rep["attrs"] == {"mode": "REFLECT", "strides": {"list": [1, 1, 1, 1]}, "padding": "VALID"}, rep
    assert "tf.raw_ops.FusedPadConv2D(input=input, paddings=paddings, filter=filter, " in repro.read_text()
