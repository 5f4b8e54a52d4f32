"""tests/matrix/run itself: its usage errors, its list of pairs, and the table it makes from a real pytest run."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys

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
