"""TensorFlow's debug switches on the launcher: each sets what it says, and its files are listed."""

import json
import os

import pytest

from ..utils import load_json, requires_gdb, requires_tf, run_tfnative, script

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]


def test_dump_graphs_and_vmodule(tmp_path):
    dumps = tmp_path / "graphs"
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--dump-graphs", str(dumps), "--vmodule", "executor=1", "--json", str(out),
                      script("tf_function_small.py")], timeout=600)
    assert r.returncode == 0, r.stderr
    assert "value 6.0" in r.stdout
    files = sorted(os.listdir(dumps))
    assert any(f.endswith(".pbtxt") for f in files), files
    doc = load_json(out)
    assert doc["dumps"] and all(p.startswith(str(dumps)) for p in doc["dumps"])
    assert "file(s) dumped" in r.stderr
    # TF_CPP_VMODULE=executor=1 reached TensorFlow (and TF_CPP_MIN_LOG_LEVEL=0 beat the script's default)
    assert "Process node:" in r.stderr


def test_without_switches_the_environment_is_untouched(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "XLA_"))}
    r = run_tfnative(["attach", script("env_probe.py")], input="\n", stdin=None, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["all_env"] == env


def test_bad_vmodule_is_one_line():
    r = run_tfnative(["attach", "--vmodule", "executor", script("exit_code.py")])
    assert r.returncode == 2 and r.stderr.startswith("tfnative: error: --vmodule") and r.stderr.count("\n") == 1
