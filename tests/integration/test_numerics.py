"""--check-numerics on programs users run: XLA-compiled functions left as they are, one failure one event."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ..utils import ROOT, line_of, load_json, requires_gdb, requires_tf, run_tfnative, script

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]


def test_xla_function_is_not_instrumented_and_runs_as_without_tfnative(tmp_path):
    prog = script("tf_xla_nan.py")
    plain = subprocess.run([sys.executable, prog], capture_output=True, text=True, timeout=300, cwd=ROOT)
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--check-numerics", "--json", str(out), prog], timeout=600)
    assert plain.returncode == r.returncode == 0, r.stderr
    assert plain.stdout == r.stdout == "loss nan\n"
    assert "tfnative: --check-numerics: train_step is compiled by XLA (jit_compile=True): not instrumented" in r.stderr
    assert r.stderr.count("not instrumented") == 1
    assert "DebugNumericSummaryV2" not in r.stderr and "CheckNumerics" not in r.stderr
    assert load_json(out)["events"] == []


def test_eager_keras_failure_is_one_event(tmp_path):
    prog = script("keras_eager_nan.py")
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--check-numerics", "--json", str(out), prog], timeout=600)
    assert r.returncode == 1, r.stderr
    doc = load_json(out)
    (event,) = doc["events"]
    assert event["kind"] == "numerics" and event["op"]["type"] == "Log"
    assert r.stderr.count("=== tfnative: NaN/Inf made by op Log") == 1
    created = doc["triage"]["op"]["created_at"]
    assert (created["file"], created["line"]) == (prog, line_of(prog, "keras.ops.log(x)"))
    assert "sitecustomize" not in r.stderr.split("triage:")[-1]


def test_nan_out_of_an_xla_function_is_said_so_and_no_xla_finds_its_op(tmp_path):
    """Keras compiles its step with XLA; the NaN is seen by the next eager op.  tfnative says it came out of
    the XLA function (not instrumented) and --numerics-no-xla finds the op inside; the hook is in no
    traceback the user reads."""
    prog = script("keras_xla_nan.py")
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--check-numerics", "--json", str(out), prog], timeout=600)
    assert r.returncode == 1, r.stderr
    doc = load_json(out)
    (event,) = doc["events"]
    assert event["op"]["type"] == "OptionalGetValue" and event["op"]["from_xla"] == ["one_step_on_data"]
    assert doc["triage"]["op"]["from_xla"] == ["one_step_on_data"]
    assert r.stderr.count("=== tfnative: NaN/Inf out of the XLA-compiled function one_step_on_data "
                          "(seen by op OptionalGetValue;") == 1
    assert "--numerics-no-xla" in r.stderr.split("triage:")[-1]
    traceback = r.stderr[r.stderr.index("Traceback (most recent call last):"):]
    assert "sitecustomize" not in traceback and "outside_xla" not in traceback
    assert "File \"%s\", line %d, in <module>" % (prog, line_of(prog, "model.fit(")) in traceback

    out2 = tmp_path / "n.json"
    r = run_tfnative(["attach", "--check-numerics", "--numerics-no-xla", "--json", str(out2), prog], timeout=600)
    assert r.returncode == 1, r.stderr
    assert "tfnative: --numerics-no-xla: one_step_on_data runs without XLA" in r.stderr
    doc = load_json(out2)
    (event,) = doc["events"]
    assert event["op"]["type"] == "Log" and "from_xla" not in event["op"]
    created = doc["triage"]["op"]["created_at"]
    assert (created["file"], created["line"]) == (prog, line_of(prog, "keras.ops.log(x)"))


def test_numerics_no_xla_needs_check_numerics():
    r = run_tfnative(["attach", "--numerics-no-xla", script("tf_xla_nan.py")], timeout=60)
    assert r.returncode != 0
    assert r.stderr.strip().splitlines()[-1] == "tfnative: error: --numerics-no-xla goes with --check-numerics"
