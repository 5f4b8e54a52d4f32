"""The fast path (surrogate symbol files + our own symbolizer) gives exactly the slow path's stacks."""

import subprocess
import sys

import pytest

from ..utils import load_json, requires_gdb, requires_tf, run_tfnative, script, state_of, wait_for_file

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]


def _frames(doc):
    return {t["tid"]: [(f["kind"], f["function"], f.get("address"), f.get("line")) for f in t["frames"]]
            for t in doc["events"][0]["threads"]}


def _hung_tf(tmp_path):
    ready = tmp_path / "ready"
    target = subprocess.Popen([sys.executable, script("tf_hang.py"), str(ready)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    wait_for_file(str(ready), 300, target)
    return target


def _stack_json(tmp_path, pid, name, *options):
    out = tmp_path / ("%s.json" % name)
    r = run_tfnative(["stack", "--pid", str(pid), "--all-threads", "--native-all", *options, "--json", str(out)],
                     timeout=900)
    assert r.returncode == 0, r.stderr
    return load_json(out)["events"][0], r


@pytest.mark.slow
def test_stack_gdb_fast_symbols_equal_full_symbols(tmp_path):
    """Through gdb: surrogates + our symbolizer give exactly what gdb's full symbols give."""
    target = _hung_tf(tmp_path)
    try:
        fast, _ = _stack_json(tmp_path, target.pid, "fast", "--with-gdb")
        slow, _ = _stack_json(tmp_path, target.pid, "slow", "--full-symbols")
        assert fast["via"] == slow["via"] == "gdb"
        a, b = _frames({"events": [fast]}), _frames({"events": [slow]})
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


def _physical(frames):
    """Frames as the stack holds them: gdb's inlined and tail-call frames (from DWARF) left out."""
    return [f for f in frames if not f.get("inline") and not f.get("tailcall")]


def test_stack_without_gdb_equals_gdb(tmp_path):
    """The gdb-free snapshot (ptrace + .eh_frame + our index) unwinds every thread exactly as gdb does."""
    target = _hung_tf(tmp_path)
    try:
        cfi, r = _stack_json(tmp_path, target.pid, "cfi")
        assert "through gdb" not in r.stderr, r.stderr
        gdb, _ = _stack_json(tmp_path, target.pid, "gdb", "--with-gdb")
        assert cfi["via"] == "cfi" and gdb["via"] == "gdb"
        assert [t["tid"] for t in cfi["threads"]] == [t["tid"] for t in gdb["threads"]]
        by_tid = {t["tid"]: t for t in gdb["threads"]}
        for t in cfi["threads"]:
            assert t["name"] == by_tid[t["tid"]]["name"]
            assert t.get("tf_function") == by_tid[t["tid"]].get("tf_function")
            _same_physical_frames(t["frames"], by_tid[t["tid"]]["frames"])
        names_seen = {f["function"] for t in cfi["threads"] for f in t["frames"]}
        assert "TFE_Execute" in names_seen
        assert "tensorflow::PyFuncOp::Compute(tensorflow::OpKernelContext*)" in names_seen
        kernel = next(f for t in cfi["threads"] for f in t["frames"]
                      if f["function"] == "tensorflow::PyFuncOp::Compute(tensorflow::OpKernelContext*)")
        assert kernel["op"]["type"] == "EagerPyFunc"
        assert target.poll() is None  # still running, not stopped
        assert state_of(target.pid) in ("S", "R")
    finally:
        target.kill()
        target.wait()


def _same_physical_frames(mine, theirs):
    """``mine`` (tfnative's unwinder) against ``theirs`` (gdb): the same frames, in the same order."""
    theirs = _physical(theirs)
    assert len(mine) == len(theirs), ([f["function"] for f in mine], [f["function"] for f in theirs])
    for a, b in zip(mine, theirs):
        assert a["kind"] == b["kind"]
        if a["kind"] == "python":
            assert (a["function"], a["file"], a["line"]) == (b["function"], b["file"], b["line"])
            continue
        assert (a["address"], a["library"], a.get("op")) == (b["address"], b["library"], b.get("op"))
        assert "??" not in a["function"]
        if a["library"] != "libc.so.6":
            # libc's names differ only by alias: gdb takes the DWARF name of
            # libc6-dbg (___pthread_cond_wait), we the symbol (pthread_cond_wait)
            assert a["function"] == b["function"]


def _as_offsets(frames):
    """Native addresses as offsets from the first frame of their library: ASLR moves libraries, not code."""
    bases = {}
    for f in frames:
        if f["kind"] == "native":
            base = bases.setdefault(f["library"], int(f["address"], 16))
            f["address"] = "%s%+#x" % (f["library"], int(f["address"], 16) - base)
    return frames


@pytest.mark.slow
def test_attach_fast_equals_full_symbols(tmp_path):
    """At a hit, the stack tfnative unwinds itself (gdb gives only registers) is gdb's, with full symbols."""
    fast, slow = tmp_path / "fast.json", tmp_path / "slow.json"
    ex = ["examples/open_session.py", "--break", "TF_NewSession"]
    r1 = run_tfnative(["attach", *ex, "--native-all", "--json", str(fast)], timeout=600)
    r2 = run_tfnative(["attach", "--full-symbols", *ex, "--native-all", "--json", str(slow)], timeout=900)
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    a, b = load_json(fast)["events"][0], load_json(slow)["events"][0]
    assert a["via"] == "cfi" and b["via"] == "gdb"
    assert len(a["threads"]) == len(b["threads"]) == 1
    mine, theirs = a["threads"][0]["frames"], b["threads"][0]["frames"]
    assert mine[0]["function"] == "TF_NewSession" and mine[0]["library"] == "libtensorflow_cc.so.2"
    assert [f["function"] for f in mine if f["kind"] == "python"][-4:] == ["make_session", "build_model", "main",
                                                                          "<module>"]
    _same_physical_frames(_as_offsets(mine), _as_offsets(_physical(theirs)))


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
