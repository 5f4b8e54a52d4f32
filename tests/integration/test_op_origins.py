"""--op-origins: which line made the op of a --break-op hit or of a crash in a kernel (field issue item 6)."""

from __future__ import annotations

import os

import pytest

from ..utils import line_of, load_json, requires_gdb, requires_tf, run_tfnative, script

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]


def _user_lines(frames):
    return [(os.path.basename(f["file"]), f["line"]) for f in frames if f.get("user")]


def test_crash_in_a_kernel_says_where_its_op_was_created(tmp_path):
    prog = script("tf_check_failed.py")
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--op-origins", "--json", str(out), prog], timeout=600)
    assert r.returncode == 128 + 6, r.stderr
    doc = load_json(out)
    op = doc["events"][0]["op"]
    body = line_of(prog, "return tf.raw_ops.FusedPadConv2D(")
    assert op["type"] == "FusedPadConv2D"
    assert _user_lines(op["created_at"])[-1] == ("tf_check_failed.py", body)  # the line in the tf.function body
    assert doc["triage"]["op"]["created_at"]["line"] == body
    assert "op FusedPadConv2D created at %s:%d" % (prog, body) in r.stderr
    assert not [n for n in os.listdir("/tmp") if n.startswith("tfnative-origins-")]


def test_gradient_op_names_its_forward_op(tmp_path):
    prog = script("tf_sqrt_grad.py")
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--op-origins", "--break-op", "SqrtGrad", "--json", str(out), prog], timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0.25       0.16666667]"
    op = load_json(out)["events"][0]["op"]
    assert op["type"] == "SqrtGrad"
    assert _user_lines(op["created_at"])[-1] == ("tf_sqrt_grad.py", line_of(prog, "# GRADIENT"))
    assert op["forward"]["type"] == "Sqrt"
    assert _user_lines(op["forward"]["created_at"])[-1] == ("tf_sqrt_grad.py", line_of(prog, "# FORWARD"))
    assert "Its forward op Sqrt" in r.stderr


def test_without_the_flag_the_script_gets_no_hook(tmp_path):
    r = run_tfnative(["attach", "--break-op", "SqrtGrad", script("tf_sqrt_grad.py")], timeout=600)
    assert r.returncode == 0, r.stderr
    assert "created at" not in r.stderr
