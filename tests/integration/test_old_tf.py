"""TensorFlow wheels whose libraries carry DWARF units of the C++ runtime (2.16 to 2.20): the fast path holds.

Their ``libtensorflow_cc.so.2`` carries 22-30 units of libstdc++/libgcc and a ``.gnu_debuglink`` naming
``crti.o``; tfnative once took that for a debug build (issue #22).  Each test runs on every ready venv of the
version matrix's cache (``tests/matrix/pairs.py``: ``~/.cache/tfnative/venvs/<pair>/READY``) whose TensorFlow
library carries such units, as read from the file; create them with ``tests/matrix/run`` (or by hand: ``python -m
venv DIR && DIR/bin/pip install tensorflow-cpu==X pytest -e .``).
"""

from __future__ import annotations

import glob
import json
import os
import resource
import subprocess

import pytest

from tfnative.core import dwarfcover

from ..matrix.pairs import cache_dir, is_ready
from ..utils import ROOT, line_of, load_json, requires_gdb, run_tfnative, script, wait_for_file

OPEN_SESSION = os.path.join(ROOT, "examples", "open_session.py")
MATMUL = script("ops_matmul.py")
HANG = script("tf_hang.py")


def _venvs_with_runtime_dwarf():
    """(pair name, venv python, libtensorflow_cc path) of each ready venv whose TF library has runtime units."""
    out = []
    for venv in sorted(glob.glob(os.path.join(cache_dir(), "venvs", "py*-tf*"))):
        if not is_ready(venv):
            continue
        libs = glob.glob(os.path.join(venv, "lib", "python3.*", "site-packages", "tensorflow",
                                      "libtensorflow_cc.so.2"))
        if libs and dwarfcover.cover(libs[0]).has_dwarf:
            out.append(pytest.param(os.path.join(venv, "bin", "python"), libs[0], id=os.path.basename(venv)))
    return out


VENVS = _venvs_with_runtime_dwarf() or [pytest.param(None, None, marks=pytest.mark.skip(
    reason="no venv with TensorFlow 2.16-2.20 (a libtensorflow_cc.so.2 with C++ runtime DWARF) under %s/venvs; "
           "tests/matrix/run creates them" % cache_dir()))]

pytestmark = [requires_gdb, pytest.mark.tf, pytest.mark.parametrize("python,libtf", VENVS)]


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


def test_stack_of_a_hung_function_on_the_fast_path(tmp_path, python, libtf):
    ready, release = tmp_path / "ready", tmp_path / "release"
    target = subprocess.Popen([python, HANG, str(ready), str(release)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for_file(str(ready), 300, target)
        out = tmp_path / "s.json"
        # The callback polls (os.path.exists, then a 50 ms sleep): a snapshot may catch it in the check, once in a
        # while; taken again then, it is in the sleep, which is what the test reads.
        for _attempt in range(5):
            r = run_tfnative(["stack", "--pid", str(target.pid), "--json", str(out)], timeout=300)
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
        assert all(t.get("kernel") for t in event["threads"])  # thread states: only the fast path reads them
    finally:
        release.write_text("")
        try:
            target.wait(timeout=120)
        except subprocess.TimeoutExpired:
            target.kill()
            target.wait()


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
