"""The fast path (surrogate symbol files + our own symbolizer) gives exactly the slow path's stacks."""

import subprocess
import sys

import pytest

from .conftest import load_json, requires_gdb, requires_tf, run_tfnative, script, wait_for_file

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]


def _frames(doc):
    return {t["tid"]: [(f["kind"], f["function"], f.get("address"), f.get("line")) for f in t["frames"]]
            for t in doc["events"][0]["threads"]}


def test_stack_fast_equals_full_symbols(tmp_path):
    ready = tmp_path / "ready"
    target = subprocess.Popen([sys.executable, script("tf_hang.py"), str(ready)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for_file(str(ready), 300, target)
        fast, slow = tmp_path / "fast.json", tmp_path / "slow.json"
        r1 = run_tfnative(["stack", "--pid", str(target.pid), "--all-threads", "--json", str(fast)], timeout=600)
        assert r1.returncode == 0, r1.stderr
        r2 = run_tfnative(["stack", "--pid", str(target.pid), "--all-threads", "--full-symbols", "--json",
                           str(slow)], timeout=900)
        assert r2.returncode == 0, r2.stderr
        a, b = _frames(load_json(fast)), _frames(load_json(slow))
        assert a.keys() == b.keys()
        # threads blocked in the same place both times: the same frames, names and addresses
        for tid in a:
            assert a[tid] == b[tid], tid
        names = [f[1] for fr in a.values() for f in fr]
        assert "TFE_Execute" in names  # named by our index: libtensorflow_cc.so.2 went through a surrogate
        assert any("ThreadPoolDevice::Compute(tensorflow::OpKernel*, tensorflow::OpKernelContext*)" in n
                   for n in names)
        assert not any(n == "??" for fr in a.values() for f in fr for n in [f[1]] if f[0] == "native"
                       and "tensorflow" in (f[1] or "")), names
    finally:
        target.kill()
        target.wait()


def test_attach_fast_equals_full_symbols(tmp_path):
    fast, slow = tmp_path / "fast.json", tmp_path / "slow.json"
    ex = ["examples/open_session.py", "--break", "TF_NewSession"]
    r1 = run_tfnative(["attach", *ex, "--json", str(fast)], timeout=600)
    r2 = run_tfnative(["attach", "--full-symbols", *ex, "--json", str(slow)], timeout=900)
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    strip = [[(f["kind"], f["function"], f["file"], f["line"], f.get("library")) for f in t["frames"]]
             for t in load_json(fast)["events"][0]["threads"]]
    strip2 = [[(f["kind"], f["function"], f["file"], f["line"], f.get("library")) for f in t["frames"]]
              for t in load_json(slow)["events"][0]["threads"]]
    assert strip == strip2


def test_cxx_breakpoint_in_a_surrogate_library(tmp_path):
    """A C++ name in libtensorflow_framework (a surrogate): resolved by our index, hit at its entry."""
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--break", "tensorflow::ThreadPoolDevice::Compute", "--json", str(out),
                      script("tf_function_small.py")], timeout=600)
    assert r.returncode == 0, r.stderr
    doc = load_json(out)
    assert doc["unresolved"] == [] and len(doc["events"]) == 1
    ev = doc["events"][0]
    assert ev["location"] == "tensorflow::ThreadPoolDevice::Compute"
    top = ev["threads"][0]["frames"][0]
    assert top["function"] == "tensorflow::ThreadPoolDevice::Compute(tensorflow::OpKernel*, " \
                              "tensorflow::OpKernelContext*)"
    assert top["library"] == "libtensorflow_framework.so.2"
    assert "value 6.0" in r.stdout
