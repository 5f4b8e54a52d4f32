"""``attach --break-op TYPE --repro FILE`` (issue #45): at each stop, a script of that op on the inputs its kernel
got there.  One attach run on ``tests/scripts/tf_break_op_repro.py`` (Cumsum with computed inputs and attributes off
their defaults: eager on 100 elements, whose values go to the data file, then in a tf.function on an executor
thread); its two scripts then run alone, in a fresh directory, and give the op's input and result byte for byte as
the original printed them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from ..utils import SCRIPTS, line_of, load_json, requires_gdb, requires_tf, run_tfnative

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]

SCRIPT = os.path.join(SCRIPTS, "tf_break_op_repro.py")
# Runs each script given as ``python FILE`` would, alone, and prints its ``x`` input's and its result's dtype,
# shape and checksum as the original script does.
_RUN = r"""
import hashlib, runpy, sys
for label, path in zip(("EAGER", "FUNCTION"), sys.argv[1:]):
    g = runpy.run_path(path, run_name="__main__")
    for name, t in ((label + "_INPUT", g["x"]), (label, g["result"])):
        print(name, t.dtype.name, t.shape.as_list(), hashlib.sha256(t.numpy().tobytes()).hexdigest(), flush=True)
"""


def _sums(stdout: str) -> dict:
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in stdout.splitlines()
            if line.split(" ", 1)[0] in ("EAGER_INPUT", "EAGER", "FUNCTION_INPUT", "FUNCTION")}


def test_each_break_op_stop_writes_a_script_of_that_op_on_its_inputs(tmp_path):
    work, out = tmp_path / "work", tmp_path / "s.json"
    work.mkdir()
    r = run_tfnative(["attach", "--break-op", "Cumsum", "--max-hits", "2", "--json", str(out),
                      "--repro", str(work / "out.py"), SCRIPT], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    original = _sums(r.stdout)
    assert len(original) == 4, r.stdout
    lines = [x for x in r.stderr.splitlines() if x.startswith("tfnative: repro:")]
    assert lines == ["tfnative: repro: out.py (7 lines) runs op Cumsum on the inputs of hit 1; alone, it returned "
                     "int64[10,10]",
                     "tfnative: repro: out.2.py (5 lines) runs op Cumsum on the inputs of hit 2; alone, it returned "
                     "int64[3,4]"], r.stderr[-3000:]
    assert sorted(os.listdir(work)) == ["out.2.py", "out.py", "out.py.npz"]
    events = load_json(out)["events"]
    assert [e["location"] for e in events] == ["op Cumsum", "op Cumsum"]
    eager, function = (e["reproducer"] for e in events)
    assert eager == {"path": str(work / "out.py"), "op": "Cumsum", "attrs": {"exclusive": True, "reverse": True},
                     "inputs": [{"dtype": "int64", "shape": [10, 10]}, {"dtype": "int32", "shape": []}],
                     "data": str(work / "out.py.npz"),
                     "check": {"outcome": "returned", "outputs": [{"dtype": "int64", "shape": [10, 10]}]}}, eager
    assert function == {"path": str(work / "out.2.py"), "op": "Cumsum", "attrs": {"exclusive": True},
                        "inputs": [{"dtype": "int64", "shape": [3, 4]}, {"dtype": "int32", "shape": []}],
                        "check": {"outcome": "returned", "outputs": [{"dtype": "int64", "shape": [3, 4]}]}}, function
    # the function's stop is on an executor thread, the eager one under the user's line
    assert events[1]["threads"][0]["tf_function"]["python_function"] == "scan_rows"
    assert any(f.get("line") == line_of(SCRIPT, "EAGER LINE") for f in events[0]["threads"][0]["frames"])
    for name, call in (("out.py", "tf.raw_ops.Cumsum(x=x, axis=axis, exclusive=True, reverse=True)"),
                       ("out.2.py", "tf.raw_ops.Cumsum(x=x, axis=axis, exclusive=True)")):
        text = (work / name).read_text()
        assert "result = %s\nprint(result)\n" % call in text, text
        for mine in ("tf_break_op_repro", "scan_rows", "make_input", "checksum", "hashlib", "Generator", "first",
                     "second", SCRIPTS):
            assert mine not in text, (mine, text)
    # alone: a fresh directory with the scripts and the data file only, plain python
    alone = tmp_path / "alone"
    alone.mkdir()
    for name in os.listdir(work):
        shutil.copy(work / name, alone / name)
    ran = subprocess.run([sys.executable, "-c", _RUN, "out.py", "out.2.py"], cwd=str(alone), capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert _sums(ran.stdout) == original, (ran.stdout, r.stdout)
