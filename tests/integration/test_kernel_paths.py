"""The same facts for a ``-g`` kernel as for a ``-g0`` one, on every path (issue 35's first "Done when",
issue 36 item 2).

The corpus (``tests/custom_op/``, built by ``tests/kernels.py`` in both flavours, once per session):
``time_two_matrix`` (TF's own CHECK on a wrong-rank ``matrix<T>()``), ``zero_out_oob`` (an out-of-bounds
read: SIGSEGV), ``shape_check`` (a CHECK in the op's own shape function, and one in its kernel),
``hang_op`` (a kernel that waits forever).  ``tests/scripts/kernel_case.py`` runs one of them, eagerly or in
a tf.function.  A ``-g`` build carries DWARF, so its stacks are taken through gdb (file:line); a ``-g0``
build's by tfnative's own unwinder: the op, TensorFlow's fatal log line, the user's Python line and the
tf.function (or "eager") must not depend on which.

Runs, per flavour: ``attach --save-core --json`` of the TF CHECK (its core read again by ``tfnative core``),
``attach`` of the SIGSEGV in a tf.function, ``attach`` of the shape function's CHECK, a core the kernel
wrote (the kernel's own CHECK; ``kernel_case.py`` raises RLIMIT_CORE, ``core_pattern`` is ``core``), and
``stack --pid`` on the hang.  Each run is shared by the checks that read it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from ..installed import import_paths
from ..kernels import build_op, source
from ..utils import (
    SCRIPTS,
    assert_gone,
    descendants,
    line_of,
    load_json,
    requires_gdb,
    requires_tf,
    run_tfnative,
    wait_for_file,
)

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf,
              pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")]

CASE = os.path.join(SCRIPTS, "kernel_case.py")
FLAVOURS = ("g", "g0")
OPS = {"matrix": "time_two_matrix", "oob": "zero_out_oob", "shape": "shape_check", "hang": "hang_op"}
TF_CHECK = re.compile(r"tensorflow/core/framework/tensor_shape\.cc:\d+\] Check failed: NDIMS == dims\(\) \(2 vs\. 1\)")
SHAPE_FN_CHECK = "shape_check.cc:%d] Check failed: rank == 2 (1 vs. 2) ShapeCheck wants a matrix" % line_of(
    source("shape_check"), "tfn: the shape function's CHECK")
KERNEL_CHECK = ("shape_check.cc:%d] Check failed: input_tensor.dims() == 2 (1 vs. 2) ShapeCheck's kernel wants a "
                "matrix" % line_of(source("shape_check"), "tfn: the kernel's CHECK"))


# gdb's side of tfnative (gdb_scripts/tfnative_gdb, and tfnative.core beside it) from this tree, not from
# wherever the environment installed the package: the gdb path reads the Python frames with it.
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    import_paths() + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))


def run(args: List[str]) -> subprocess.CompletedProcess:
    return run_tfnative(args, timeout=300, env=ENV)


def _py_line(case: str) -> int:
    return line_of(CASE, "# tfn: %s" % case)


@pytest.fixture(scope="session")
def op_libs() -> Dict[Tuple[str, str], str]:
    """Every op of the corpus in both flavours: (case, flavour) -> library."""
    return {(case, flavour): build_op(name, flavour) for case, name in OPS.items() for flavour in FLAVOURS}


def facts(doc: Dict[str, Any]) -> Dict[str, Any]:
    """What a user reads off a crash document: the signal, the op, TF's log line, the user's line, the
    tf.function or eager."""
    t = doc["triage"]
    thread = doc["events"][-1]["threads"][0]
    return {"thread": {k: v for k, v in thread.items() if k not in ("frames", "python_frames", "tid", "name")},
            "signal": t["signal"], "op": (t["op"] or {}).get("type"), "log": t.get("log"),
            "user": t["nearest_user_frame"], "tf_function": (t["tf_function"] or {}).get("python_function"),
            "eager": t.get("eager", False)}


def kernel_frame(doc: Dict[str, Any], case: str) -> Dict[str, Any]:
    """The stopped thread's frame of the user's kernel (its ``Compute``, with its op) in ``case``'s library."""
    frames = doc["events"][-1]["threads"][0]["frames"]
    return next(f for f in frames if f["kind"] == "native" and f.get("op") and f["library"] == OPS[case] + ".so")


def _attach(libs: Dict[Tuple[str, str], str], case: str, flavour: str, mode: str, out: str,
            save_core: Optional[str] = None, *more: str) -> Tuple[subprocess.CompletedProcess, Dict[str, Any]]:
    args = ["attach", "--json", out, *more] + (["--save-core", save_core] if save_core else [])
    r = run(args + [CASE, libs[case, flavour], case, mode])
    assert r.returncode != 0 and "tfnative: triage:" in r.stderr, r.stderr[-3000:]
    return r, load_json(out)


@pytest.fixture(scope="module")
def tf_check(op_libs, tmp_path_factory) -> Iterator[Dict[str, Dict[str, Any]]]:
    """Per flavour: ``attach --save-core`` of TF's CHECK in the kernel (eager), and ``core`` of that core."""
    out: Dict[str, Dict[str, Any]] = {}
    for flavour in FLAVOURS:
        d = tmp_path_factory.mktemp("check_" + flavour)
        core = str(d / "saved.core")
        r, doc = _attach(op_libs, "matrix", flavour, "eager", str(d / "a.json"), save_core=core)
        c = run(["core", "--json", str(d / "c.json"), core])
        os.unlink(core)  # 250 MB
        assert c.returncode == 0, c.stderr
        out[flavour] = {"attach": doc, "attach_text": r.stdout + r.stderr, "core": load_json(d / "c.json"),
                        "core_text": c.stdout + c.stderr}
    yield out


@pytest.fixture(scope="module")
def segv_in_function(op_libs, tmp_path_factory) -> Dict[str, Dict[str, Any]]:
    """Per flavour: ``attach --op-origins`` of the out-of-bounds read, in a tf.function."""
    d = tmp_path_factory.mktemp("segv")
    return {flavour: _attach(op_libs, "oob", flavour, "function", str(d / ("%s.json" % flavour)), None,
                             "--op-origins")[1]
            for flavour in FLAVOURS}


@pytest.fixture(scope="module")
def shape_fn_check(op_libs, tmp_path_factory) -> Dict[str, Dict[str, Any]]:
    """Per flavour: ``attach`` of the CHECK in the op's own shape function (run while the tf.function is traced)."""
    d = tmp_path_factory.mktemp("shape")
    return {flavour: _attach(op_libs, "shape", flavour, "function", str(d / ("%s.json" % flavour)))[1]
            for flavour in FLAVOURS}


@pytest.fixture(scope="module")
def kernel_core(op_libs, tmp_path_factory) -> Dict[str, Dict[str, Any]]:
    """Per flavour: ``core`` of the core the kernel wrote when the user's own kernel CHECK aborted (eager)."""
    out = {}
    for flavour in FLAVOURS:
        d = tmp_path_factory.mktemp("kcore_" + flavour)
        p = subprocess.run([sys.executable, CASE, op_libs["shape", flavour], "shape", "eager", "core"], cwd=str(d),
                           capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert p.returncode == -6, p.stderr[-2000:]
        core = d / "core"
        assert core.exists(), "no core written: core_pattern is %s" % open("/proc/sys/kernel/core_pattern").read()
        c = run(["core", "--json", str(d / "c.json"), str(core)])
        os.unlink(core)
        assert c.returncode == 0, c.stderr
        out[flavour] = load_json(d / "c.json")
    return out


@pytest.fixture(scope="module")
def hang(op_libs, tmp_path_factory) -> Dict[str, Dict[str, Any]]:
    """Per flavour: ``stack --pid`` of a process hung inside the kernel (eager)."""
    out = {}
    for flavour in FLAVOURS:
        d = tmp_path_factory.mktemp("hang_" + flavour)
        ready = str(d / "ready")
        p = subprocess.Popen([sys.executable, CASE, op_libs["hang", flavour], "hang", "eager", ready],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            wait_for_file(ready, proc=p)
            doc = None
            for _ in range(50):  # ready is written just before the op is called: until the kernel waits
                r = run(["stack", "--pid", str(p.pid), "--json", str(d / "s.json")])
                assert r.returncode == 0, r.stderr
                doc = load_json(d / "s.json")
                if any(f.get("op") for f in doc["events"][0]["threads"][0]["frames"]):
                    break
            out[flavour] = doc
        finally:
            kids = descendants(p.pid)
            p.kill()
            p.wait(timeout=30)
            assert_gone(kids)
    return out


def hang_facts(doc: Dict[str, Any]) -> Dict[str, Any]:
    thread = doc["events"][0]["threads"][0]
    frames = thread["frames"]
    user = next(f for f in frames if f["kind"] == "python" and f.get("user"))
    return {"op": next(f["op"]["type"] for f in frames if f.get("op")), "verdict": doc["triage"]["verdict"],
            "user": (user["function"], user["file"], user["line"]), "tf_function": thread.get("tf_function"),
            "kernel": thread.get("kernel")}


def test_tf_check_in_the_kernel_under_attach(tf_check):
    """TF's CHECK: the op, TF's line, the user's line and "eager", -g as -g0; the -g kernel frame's .cc line."""
    g, g0 = (tf_check[f]["attach"] for f in FLAVOURS)
    assert facts(g) == facts(g0)
    assert facts(g)["op"] == "TimeTwoMatrix" and TF_CHECK.match(facts(g)["log"])
    assert facts(g)["user"] == {"function": "run_case", "file": CASE, "line": _py_line("matrix")}
    assert facts(g)["eager"] is True and facts(g)["tf_function"] is None
    frame = kernel_frame(g, "matrix")
    assert (os.path.basename(frame["file"]), frame["line"]) == (
        "time_two_matrix.cc", line_of(source("time_two_matrix"), "tfn: the wrong-rank access"))
    assert kernel_frame(g0, "matrix")["function"].startswith("TimeTwoMatrixOp<int>::Compute")
    for doc in (g, g0):  # absl's FailWithoutStackTrace ends in its call to abort(): named at return address - 1
        frames = doc["events"][0]["threads"][0]["frames"]
        assert "??" not in [f["function"] for f in frames[:frames.index(kernel_frame(doc, "matrix"))]]
    for flavour in FLAVOURS:
        text = tf_check[flavour]["attach_text"]
        assert "TensorFlow's log: " + facts(g)["log"] in text and "<-- op TimeTwoMatrix" in text
        assert "in tf.function ?" not in text and "the op ran eagerly" in text


def test_tf_check_from_the_core_attach_saved(tf_check):
    """``core`` of ``--save-core``'s core (gdb's gcore: no headers for the code mappings) reads what attach
    read: kernel frame, op, TF's line, the user's line; -g as -g0."""
    g, g0 = (tf_check[f]["core"] for f in FLAVOURS)
    assert facts(g) == facts(g0) == facts(tf_check["g"]["attach"])
    frame = kernel_frame(g, "matrix")
    assert (os.path.basename(frame["file"]), frame["line"]) == (
        "time_two_matrix.cc", line_of(source("time_two_matrix"), "tfn: the wrong-rank access"))
    for flavour in FLAVOURS:
        assert "could not be matched" not in tf_check[flavour]["core_text"]
        assert tf_check[flavour]["core"]["events"][0]["threads"][0]["merge"] == "ok"


def test_segv_in_a_tf_function_under_attach(segv_in_function):
    g, g0 = (segv_in_function[f] for f in FLAVOURS)
    assert facts(g) == facts(g0)
    assert facts(g)["op"] == "ZeroOutOob" and facts(g)["signal"] == "SIGSEGV"
    assert facts(g)["tf_function"] == "run_case" and facts(g)["eager"] is False
    assert facts(g)["user"]["file"] == CASE
    assert g["triage"]["op"]["created_at"] == g0["triage"]["op"]["created_at"] == {
        "function": "run_case", "file": CASE, "line": _py_line("oob")}  # the op's origin
    frame = kernel_frame(g, "oob")
    assert (os.path.basename(frame["file"]), frame["line"]) == (
        "zero_out_oob.cc", line_of(source("zero_out_oob"), "tfn: the out-of-bounds read"))


def test_check_in_the_ops_own_shape_function(shape_fn_check):
    """A CHECK in the user's shape function (run as the tf.function is traced): the user's log line."""
    g, g0 = (shape_fn_check[f] for f in FLAVOURS)
    assert facts(g) == facts(g0)
    assert facts(g)["log"].endswith(SHAPE_FN_CHECK) and facts(g)["op"] == "ShapeCheck"
    assert g["triage"]["op"]["from"] == "_apply_op_helper"
    assert facts(g)["user"] == {"function": "run_case", "file": CASE, "line": _py_line("shape")}
    frames = g["events"][0]["threads"][0]["frames"]
    assert any(f["kind"] == "native" and (f["file"] or "").endswith("shape_check.cc")
               and f["line"] == line_of(source("shape_check"), "tfn: the shape function's CHECK") for f in frames)


def test_the_kernels_own_check_from_a_core_the_kernel_wrote(kernel_core):
    g, g0 = (kernel_core[f] for f in FLAVOURS)
    assert facts(g) == facts(g0)
    assert facts(g)["op"] == "ShapeCheck" and facts(g)["log"].endswith(KERNEL_CHECK)
    assert facts(g)["user"] == {"function": "run_case", "file": CASE, "line": _py_line("shape")}
    assert facts(g)["eager"] is True
    frame = kernel_frame(g, "shape")
    assert (os.path.basename(frame["file"]), frame["line"]) == (
        "shape_check.cc", line_of(source("shape_check"), "tfn: the kernel's CHECK"))


def test_stack_pid_on_a_hang_inside_the_kernel(hang):
    g, g0 = (hang[f] for f in FLAVOURS)
    # the same facts, the verdict aside: it names the kernel's file:line where the build has DWARF (below)
    assert dict(hang_facts(g), verdict=None) == dict(hang_facts(g0), verdict=None)
    assert hang_facts(g)["op"] == "HangOp" and hang_facts(g)["user"] == ("run_case", CASE, _py_line("hang"))
    frame = kernel_frame(g, "hang")
    assert (os.path.basename(frame["file"]), frame["line"]) == (
        "hang_op.cc", line_of(source("hang_op"), "tfn: the wait no one ends"))
    assert g["events"][0]["via"] == "gdb" and g0["events"][0]["via"] == "cfi"
    # the verdict names the op, the kernel that does not return, what it waits in and the user's line
    for doc, at in ((g, "at hang_op.cc:%d" % frame["line"]), (g0, "in hang_op.so")):
        assert doc["triage"]["pattern"] == "kernel_does_not_return", doc["triage"]["verdict"]
        assert doc["triage"]["verdict"] == (
            "op HangOp: the main thread runs your kernel HangOpOp::Compute %s and it does not return, waiting in "
            "pthread_cond_wait, called from run_case at kernel_case.py:%d" % (at, _py_line("hang"))), doc["triage"]
