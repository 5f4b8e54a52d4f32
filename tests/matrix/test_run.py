"""tests/matrix/run itself: its usage errors, its list of pairs, and the table it makes from a real pytest run."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys

import pytest

from . import pairs

RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run")


def load_run():
    loader = importlib.machinery.SourceFileLoader("matrix_run", RUN)
    spec = importlib.util.spec_from_loader("matrix_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_bad_pair_name_is_one_line():
    r = subprocess.run([sys.executable, RUN, "--pair", "py3.14-tf"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("tests/matrix/run: error: 'py3.14-tf' is not a pair name")


def test_list_names_every_pair_and_its_venv(tmp_path):
    env = dict(os.environ, TFNATIVE_CACHE=str(tmp_path))
    (tmp_path / "venvs" / "py3.15-notf").mkdir(parents=True)  # begun, never finished: no READY
    r = subprocess.run([sys.executable, RUN, "--list"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    assert [row[0] for row in rows] == pairs.PAIRS
    by = {row[0]: row[1:] for row in rows}
    assert by["py3.14-tf2.22.0rc0"] == ["missing", str(tmp_path / "venvs" / "py3.14-tf2.22.0rc0")]
    assert by["py3.15-notf"] == ["incomplete", "(no", "READY)", str(tmp_path / "venvs" / "py3.15-notf")]


def test_table_from_a_real_pytest_run(tmp_path):
    (tmp_path / "test_cells.py").write_text(
        "import pytest\n\n"
        "def test_doctor():\n    pass\n\n"
        "def test_py_core():\n    assert 1 + 1 == 3, 'the core shows no Python frame'\n\n"
        "def test_hang_verdict():\n    pytest.skip('no TensorFlow in pair py3.15-notf')\n\n"
        "def test_doctor_too():\n    pytest.skip('no TensorFlow in pair py3.15-notf')\n")
    junit = tmp_path / "j.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_cells.py"),
                    "--junitxml", str(junit)], capture_output=True, timeout=120, cwd=str(tmp_path))
    run = load_run()
    cells = run.parse_junit(str(junit))
    assert {c: v["result"] for c, v in cells.items()} == {"doctor": "pass", "py_core": "fail", "hang_verdict": "skip",
                                                          "doctor_too": "skip"}
    assert cells["py_core"]["reason"] == "AssertionError: the core shows no Python frame"
    assert cells["hang_verdict"]["reason"] == "no TensorFlow in pair py3.15-notf"
    text = run.table([{"pair": "py3.15-notf", "cells": cells}], markdown=False)
    head, row = text.splitlines()[:2]
    assert head.split() == ["pair"] + [h for _c, h in run.COLUMNS] + ["doctor_too"]
    assert row.split()[0] == "py3.15-notf"
    # one note for the cells that share a reason
    assert "[1] py3.15-notf, verdict, doctor_too: no TensorFlow in pair py3.15-notf" in text
    assert "[2] py3.15-notf, doctor" not in text
    assert "[2] py3.15-notf, py-core: AssertionError: the core shows no Python frame" in text
    cols = [h for _c, h in run.COLUMNS]
    values = dict(zip(["pair"] + cols + ["doctor_too"], [x.strip() for x in _split(row, head)]))
    assert (values["doctor"], values["py-core"], values["verdict"], values["newsession"], values["doctor_too"]) == (
        "pass", "FAIL [2]", "skip [1]", "-", "skip [1]")
    md = run.table([{"pair": "py3.15-notf", "cells": cells}], markdown=True)
    assert md.splitlines()[0].startswith("| pair | newsession |") and "| FAIL [2] |" in md


def _split(row: str, head: str) -> list:
    """The cells of a text-table row, cut where the header's columns start."""
    starts = [i for i in range(len(head)) if head[i] != " " and (i == 0 or head[i - 1] == " ")]
    return [row[a:b] for a, b in zip(starts, starts[1:] + [len(row)])]


def _pair_venv(tmp_path, name: str, key: str):
    """A real venv (no pip in it) where the cache keeps the pair's, its READY recording ``key``."""
    venv = tmp_path / "venvs" / name
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    ready = venv / "READY"
    ready.write_text("tensorflow-cpu==2.16.2 pytest -e %s\nkey: %s\n" % (pairs.ROOT, key))
    os.utime(ready, (1, 1))
    return venv, ready


def test_a_current_venv_is_left_alone(tmp_path, monkeypatch):
    """READY records the hash of the pair's requirements; provisioning again with the same hash does nothing."""
    monkeypatch.setenv("TFNATIVE_CACHE", str(tmp_path))
    name = pairs.OLDEST
    venv, ready = _pair_venv(tmp_path, name, pairs.requirements_key(name))
    before = sorted(p.name for p in venv.iterdir())
    assert pairs.ready_key(str(venv)) == pairs.requirements_key(name)
    assert load_run().provision(name) == str(venv)
    assert ready.stat().st_mtime == 1 and sorted(p.name for p in venv.iterdir()) == before
    assert not (tmp_path / "wheels").exists() and not (tmp_path / "matrix").exists()


def test_a_venv_made_from_other_requirements_is_brought_up_to_date(tmp_path, monkeypatch):
    """Another hash in READY (the requirements or pyproject.toml changed): pip installs them again, here in a venv
    without pip, which fails in one line naming the log; READY keeps the old hash."""
    monkeypatch.setenv("TFNATIVE_CACHE", str(tmp_path))
    name = pairs.OLDEST
    venv, ready = _pair_venv(tmp_path, name, "0123456789abcdef")
    run = load_run()
    with pytest.raises(run.pairs.PairError) as e:  # run imports pairs as a top-level module: its own class
        run.provision(name)
    log = tmp_path / "matrix" / "logs" / ("%s.provision.log" % name)
    assert str(e.value) == "pip install tensorflow-cpu==2.16.2 pytest into %s failed (exit 1); see %s" % (venv, log)
    assert "No module named pip" in log.read_text()
    assert pairs.ready_key(str(venv)) == "0123456789abcdef"


def test_requirements_keys():
    """The hash changes with the pair (its requirements); a READY from before the hashes has none."""
    keys = {pairs.requirements_key(n) for n in pairs.PAIRS}
    assert len(keys) == len(pairs.PAIRS)
    assert pairs.requirements_key(pairs.OLDEST) == pairs.requirements_key(pairs.OLDEST)
    assert pairs.requirements(pairs.OLDEST) == ["tensorflow-cpu==2.16.2", "pytest"]
    assert pairs.requirements("py3.15-notf") == ["pytest"]
    assert pairs.CI_PAIRS == [pairs.OLDEST, pairs.NEWEST] and set(pairs.CI_PAIRS) <= set(pairs.PAIRS)
    assert pairs.OLDEST in pairs.older_tf_pairs() and pairs.NEWEST not in pairs.older_tf_pairs()
