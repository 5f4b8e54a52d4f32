"""A TensorFlow process busy in big matmuls: oneDNN's JIT kernels (no CFI) on the intra-op threads.

Five snapshots in a row: none through gdb, every thread unwound to its
start, and a thread caught in JIT code shows the kernel's caller (oneDNN's
GEMM driver), recovered and marked.
"""

import subprocess
import sys

import pytest

from ..utils import load_json, requires_tf, run_tfnative, script, wait_for_file

pytestmark = [requires_tf, pytest.mark.tf]

THREAD_ENDS = ("_start", "clone3", "clone")


@pytest.fixture(scope="module")
def busy_tf(tmp_path_factory):
    ready = tmp_path_factory.mktemp("busy") / "ready"
    target = subprocess.Popen([sys.executable, script("tf_busy_matmul.py"), str(ready)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for_file(str(ready), 300, target)
        yield target
    finally:
        target.kill()
        target.wait()


def test_five_snapshots_without_gdb(busy_tf, tmp_path):
    in_jit = 0
    for i in range(5):
        out = tmp_path / ("s%d.json" % i)
        r = run_tfnative(["stack", "--pid", str(busy_tf.pid), "--all-threads", "--native-all", "--json", str(out)],
                         timeout=600)
        assert r.returncode == 0, r.stderr
        assert "through gdb" not in r.stderr, r.stderr
        ev = load_json(out)["events"][0]
        assert ev["via"] == "cfi"
        for t in ev["threads"]:
            names = [f["function"] for f in t["frames"]]
            assert names[-1] in THREAD_ENDS, (t["tid"], names)
            assert "error" not in t, t["error"]
            for k, f in enumerate(t["frames"]):
                if f.get("library") == "[anon:jit]" and k + 1 < len(t["frames"]):
                    caller = t["frames"][k + 1]
                    if caller.get("recovered"):
                        in_jit += 1
                        assert caller["recovered"] in ("frame-pointer", "scan")
                        assert caller["library"] == "libtensorflow_cc.so.2" and "dnnl::" in caller["function"]
        main = next(t for t in ev["threads"] if t["tid"] == busy_tf.pid)
        assert [f["function"] for f in main["frames"] if f["kind"] == "python"][-1] == "<module>"
    assert busy_tf.poll() is None
    # the matmuls run in oneDNN's JIT kernels most of the time: some snapshot catches a thread there
    assert in_jit, "no thread caught in JIT code in 5 snapshots"
