"""``attach --repro`` and ``core --repro`` on a real crash on a resource input (issue #45):
``tests/scripts/tf_resource_gather.py``, tensorflow/tensorflow issue #106497's ResourceGather abort, its variable's
value changed after it was made and the gather buried in a tf.function.  The script tfnative writes makes the
variable with the value it had at the crash and passes its handle; it dies the same way under tfnative's check,
and alone in a fresh directory, and names nothing of the original.  One run of the original, under ``attach
--save-core``, gives both the live reproducer and the core read again by ``core --repro``."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys

import pytest

from ..utils import ROOT, load_json, requires_gdb, requires_tf, run_tfnative

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]

SCRIPT = ROOT + "/tests/scripts/tf_resource_gather.py"
CHECK = "tensor_shape.cc:362] Check failed: d < dims() (1 vs. 1)"
VARIABLE = "resource = tf.Variable(tf.constant([10.5, 20.5, 30.5, 40.5, 50.5], shape=[5], dtype=tf.float32))"
CALL = "tf.raw_ops.ResourceGather(resource=resource.handle, indices=indices, batch_dims=1, dtype=tf.float32)"


def _repro_line(stderr: str, name: str) -> None:
    line = next((x for x in stderr.splitlines() if "tfnative: repro:" in x), "(no repro line)")
    assert line == ("tfnative: repro: %s (4 lines) dies of SIGABRT in op ResourceGather, as the original did: %s"
                    % (name, CHECK)), stderr[-3000:]


def _script_rebuilds_the_variable(path) -> None:
    """The script: the variable made with the value it had at the crash (not the one it was made with), its
    handle passed to the op; nothing of the original's code."""
    text = path.read_text()
    assert VARIABLE in text.splitlines() and CALL in text.splitlines(), text
    assert "indices = tf.constant([1, 3, 4], shape=[3], dtype=tf.int32)" in text, text
    assert not re.search(r"lookup|table|floormod|assign_add|tf_resource_gather|tf\.function", text), text


def _dies_alone(tmp_path, path) -> None:
    """The script alone: plain python, a fresh directory, no core; SIGABRT with the same Check failed line, in
    ResourceGather's wrapper (faulthandler's stack)."""
    alone = tmp_path / "alone"
    alone.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-X", "faulthandler", str(path)], cwd=str(alone), capture_output=True,
                          text=True, timeout=300, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    assert proc.returncode == -signal.SIGABRT, proc.stderr[-2000:]
    assert CHECK in proc.stderr, proc.stderr[-2000:]
    assert re.search(r'File ".*gen_resource_variable_ops\.py", line \d+ in resource_gather', proc.stderr), \
        proc.stderr[-2000:]
    assert list(alone.iterdir()) == []


def test_a_variable_input_is_rebuilt_live_and_from_the_core(tmp_path):
    out, repro, core = tmp_path / "s.json", tmp_path / "repro.py", tmp_path / "saved.core"
    r = run_tfnative(["attach", "--json", str(out), "--repro", str(repro), "--save-core", str(core), SCRIPT],
                     timeout=600)
    assert r.returncode == 128 + signal.SIGABRT, r.stderr[-3000:]
    # the report's op line shows the variable behind the handle
    assert re.search(r"^op ResourceGather\(resource: resource\[\]=variable float32\[5\], indices: int32\[3\]="
                     r"\[1,3,4\]; batch_dims=1, dtype=float32\)$", r.stdout + r.stderr, re.M), r.stderr[-3000:]
    _repro_line(r.stderr, "repro.py")
    doc = load_json(out)
    handle = doc["triage"]["op"]["inputs"][0]["resource"]
    assert (handle["type"], handle["variable"]["dtype"], handle["variable"]["shape"]) == (
        "N10tensorflow3VarE", "float32", [5]), handle
    assert handle["device"].endswith("/device:CPU:0"), handle
    rep = doc["triage"]["reproducer"]
    assert rep["inputs"][0] == {"dtype": "float32", "shape": [5], "variable": True}, rep
    assert (rep["check"]["outcome"], rep["check"]["signal"], rep["check"]["op"]) == (
        "same", "SIGABRT", "ResourceGather"), rep
    _script_rebuilds_the_variable(repro)
    _dies_alone(tmp_path, repro)

    # the core of the same crash: the same handle and variable read from the core's memory
    assert core.exists(), r.stderr[-3000:]
    out2, repro2 = tmp_path / "c.json", tmp_path / "from_core.py"
    r = run_tfnative(["core", str(core), os.path.realpath(sys.executable), "--json", str(out2), "--repro",
                      str(repro2)], timeout=600)
    core.unlink()
    assert r.returncode == 0, r.stderr[-3000:]
    _repro_line(r.stderr, "from_core.py")
    assert load_json(out2)["triage"]["reproducer"]["check"]["outcome"] == "same"
    assert repro2.read_text() == repro.read_text()
    _dies_alone(tmp_path, repro2)


def test_a_resource_that_is_no_variable_is_named_and_refused(tmp_path):
    """``tests/scripts/tf_table_export.py`` (issue #125503): the input is a lookup table's handle; the op line and
    the refusal name it, its type and why no script is written."""
    out, repro = tmp_path / "s.json", tmp_path / "repro.py"
    r = run_tfnative(["attach", "--json", str(out), "--repro", str(repro), ROOT + "/tests/scripts/tf_table_export.py"],
                     timeout=600)
    assert r.returncode == 128 + signal.SIGABRT, r.stderr[-3000:]
    assert re.search(r"^op LookupTableExportV2\(table_handle: resource\[\]; Tkeys=string, Tvalues=string\)$",
                     r.stdout + r.stderr, re.M), r.stderr[-3000:]
    line = next((x for x in r.stderr.splitlines() if "tfnative: repro:" in x), "(no repro line)")
    assert re.fullmatch(r"tfnative: repro: not written: op LookupTableExportV2: input 0 \(table_handle\), resource "
                        r"\S+, is not rebuilt: a tensorflow::lookup::LookupInterface, not a variable \(tfnative "
                        r"rebuilds variables alone\)", line), line
    assert not repro.exists()
    handle = load_json(out)["triage"]["op"]["inputs"][0]["resource"]
    assert handle["type"] == "N10tensorflow6lookup15LookupInterfaceE" and "variable" not in handle, handle
