"""TensorFlow wheels whose libraries carry DWARF units of the C++ runtime (2.16 to 2.20): the fast path holds.

Their ``libtensorflow_cc.so.2`` carries 22-30 units of libstdc++/libgcc and a ``.gnu_debuglink`` naming
``crti.o``; tfnative once took that for a debug build (issue #22).  The tests run on the version matrix's
older-TensorFlow venvs (``old_tf_pairs.py``): under ``CI`` on the oldest pair, ``py3.11-tf2.16.2``, which
``.ci/setup`` provisions (missing, the tests fail); elsewhere on every ready one (``tests/matrix/run --pair
PAIR`` makes them).  The stack of a hung ``tf.function`` on these versions is in ``test_old_tf_verdict.py``, which
shares its target with the verdict's checks; ``attach --break TF_NewSession`` on the fast path (gdb never told to
load ``libtensorflow_cc.so.2``) and ``core`` of a crash in a ``tf.py_function`` read by tfnative's own unwinder are
checked on every pair of the matrix, these included (``tests/matrix/test_pair.py``: ``test_fast_attach``,
``test_pyfunc_segv_core``).
"""

from __future__ import annotations

import glob
import json
import os

import pytest

from tfnative.core.binary import dwarfcover

from ..utils import line_of, load_json, requires_gdb, run_tfnative, script
from . import old_tf_pairs

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
