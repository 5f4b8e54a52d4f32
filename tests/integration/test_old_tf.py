"""TensorFlow wheels whose libraries carry DWARF units of the C++ runtime (2.16 to 2.20): the fast path holds.

Their ``libtensorflow_cc.so.2`` carries 22-30 units of libstdc++/libgcc and a ``.gnu_debuglink`` naming
``crti.o``; tfnative once took that for a debug build (issue #22).  The tests run on the version matrix's
older-TensorFlow venvs (``old_tf_pairs.py``): under ``CI`` on the oldest pair, ``py3.11-tf2.16.2``, which
``.ci/setup`` provisions (missing, the tests fail); elsewhere on every ready one (``tests/matrix/run --pair
PAIR`` makes them).  The stack of a hung ``tf.function`` on these versions is in ``test_old_tf_verdict.py``, which
shares its target with the verdict's checks.
"""

from __future__ import annotations

import glob
import json
import os
import resource
import subprocess

import pytest

from tfnative.core import dwarfcover

from ..utils import ROOT, line_of, load_json, requires_gdb, run_tfnative, script
from . import old_tf_pairs

OPEN_SESSION = os.path.join(ROOT, "examples", "open_session.py")
MATMUL = script("ops_matmul.py")

pytestmark = [requires_gdb, pytest.mark.tf]


@pytest.fixture(scope="module", params=old_tf_pairs.names())
def python(request):
    return old_tf_pairs.python_of(request.param)


@pytest.fixture(scope="module")
def libtf(python):
    """The pair's ``libtensorflow_cc.so.2``: it carries C++ runtime units, what these tests are about."""
    venv = os.path.dirname(os.path.dirname(python))
    libs = glob.glob(os.path.join(venv, "lib", "python3.*", "site-packages", "tensorflow", "libtensorflow_cc.so.2"))
    assert libs, "no libtensorflow_cc.so.2 in %s" % venv
    assert dwarfcover.cover(libs[0]).has_dwarf, "%s carries no DWARF unit: not what these tests are about" % libs[0]
    return libs[0]


def _gdb_loaded_symbols_of(log, name):
    """Whether gdb was told to read the full symbols of a library named ``name`` (the MI log)."""
    with open(log, errors="replace") as f:
        return any("sharedlibrary" in line and name in line for line in f)


def test_break_at_the_c_api_on_the_fast_path(tmp_path, python, libtf):
    out, log = tmp_path / "s.json", tmp_path / "gdb.log"
    r = run_tfnative(["attach", "--python", python, "--break", "TF_NewSession", "--json", str(out),
                      "--gdb-log", str(log), OPEN_SESSION], timeout=600)
    assert r.returncode == 0, r.stderr
    assert "result: [[5.0]]" in r.stdout
    frames = load_json(out)["events"][0]["threads"][0]["frames"]
    top = frames[0]
    assert (top["function"], top["library"]) == ("TF_NewSession", "libtensorflow_cc.so.2")  # not its PLT stub
    user = [(f["function"], os.path.basename(f["file"]), f["line"]) for f in frames
            if f["kind"] == "python" and f.get("user")]
    assert user[0] == ("make_session", "open_session.py", line_of(OPEN_SESSION, "tf.compat.v1.Session(graph="))
    assert not _gdb_loaded_symbols_of(str(log), "libtensorflow_cc")  # our index resolved it: no 20-30 s load
    assert "gdb reads it in full" not in r.stderr


def test_break_op_matmul_fires(tmp_path, python, libtf):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--python", python, "--break-op", "MatMul", "--max-hits", "2", "--json", str(out),
                      MATMUL], timeout=600)
    assert r.returncode == 0, r.stderr
    assert "cannot find the Compute" not in r.stderr and "never fired" not in r.stderr
    events = load_json(out)["events"]
    assert [e["location"] for e in events] == ["op MatMul", "op MatMul"], r.stderr
    for e in events:
        top = e["threads"][0]["frames"][0]
        assert e["op"]["type"] == "MatMul" and top["op"]["type"] == "MatMul"
        assert "::Compute(tensorflow::OpKernelContext*)" in top["function"]
    user = [(os.path.basename(f["file"]), f["line"]) for f in events[0]["threads"][0]["frames"]
            if f["kind"] == "python" and f.get("user")]
    assert user[0] == ("ops_matmul.py", line_of(MATMUL, "EAGER MATMUL"))
    assert events[1]["threads"][0]["tf_function"]["python_function"] == "layer"


def test_core_of_a_crash_in_a_py_function_on_the_fast_path(tmp_path, python, libtf):
    crash = script("tf_pyfunc_segv.py")
    proc = subprocess.run([python, crash], cwd=str(tmp_path), capture_output=True, timeout=600,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2))
    assert proc.returncode < 0, proc.stderr[-2000:]
    core = tmp_path / "core"
    assert core.exists(), "no core in %s (core_pattern?)" % tmp_path
    try:
        out = tmp_path / "c.json"
        r = run_tfnative(["core", str(core), "--json", str(out)], timeout=300)
        assert r.returncode == 0, r.stderr
        event = load_json(out)["events"][0]
        assert event["via"] == "cfi", r.stderr
        frames = event["threads"][0]["frames"]  # the thread that took the signal
        user = [(f["function"], f["line"]) for f in frames if f["kind"] == "python" and f.get("user")]
        assert user[0] == ("bad_callback", line_of(crash, "ctypes.string_at(0)"))
        assert any((f.get("op") or {}).get("type") == "EagerPyFunc" and "PyFuncOp::Compute" in f["function"]
                   for f in frames)
    finally:
        core.unlink()


def test_doctor_tells_no_debug_build(python, libtf):
    r = run_tfnative(["doctor", "--python", python, "--json"], timeout=300)
    assert r.returncode == 0, r.stderr
    reports = {os.path.basename(d["path"]): d for d in json.loads(r.stdout)}
    cc = reports["libtensorflow_cc.so.2"]
    assert cc["dwarf_units"] > 0 and cc["dwarf_runtime_units"] == cc["dwarf_units"]
    assert not cc["dwarf_own_code"] and not cc["can_see_lines"] and not cc["can_see_locals"]
    assert cc["next_preset"] == "tfn_lines"
    for d in reports.values():
        assert "install the separate debug file" not in d["verdict"], d["verdict"]
        if d["debuglink"] == "crti.o":
            assert not d["debuglink_plausible"] and d["debuglink_found"] is None
