"""Python thread names and ``--locals``, read from memory, on CPython 3.10-3.13 and Debian's stripped 3.11.

One small program per interpreter (``tests/scripts/named_threads.py``: threads named ``loader-1`` and
``trainer`` blocked at known lines, with arguments and locals of known values), all started together.
tfnative's names and variables are checked against the program's own values and, where py-spy reads the
interpreter, against ``py-spy dump --locals --json`` on the same process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ..utils import line_of, pyenv_pythons, run_tfnative, script, wait_for_file

PROGRAM = script("named_threads.py")
STRIPPED = "/usr/bin/python3.11"
PYTHONS = dict(pyenv_pythons())
if os.path.exists(STRIPPED):
    PYTHONS["stripped-3.11"] = STRIPPED
PY_SPY = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")

LOAD = {"batch_index": ("41", True), "paths": ("('a.tfrecord',)", True), "options": ("{'cycle': 2}", True),
        "shard": ("'train-00041'", False), "sizes": ("[128, 256, 512, 1024, ... 1 more]", False),
        "ratio": ("0.25", False), "done": ("None", False)}
TRAIN = {"step": ("7", True), "flags": ("{'a': 1, 'b': 2}", False), "pair": ("(7, b'xy')", False),
         "active": ("True", False)}


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    """{version: (pid, text, json document)}: each program snapshotted once with --locals."""
    tmp = tmp_path_factory.mktemp("named")
    procs = {}
    try:
        for version, python in PYTHONS.items():
            ready = str(tmp / ("ready-" + version))
            procs[version] = (subprocess.Popen([python, PROGRAM, ready]), ready)
        out = {}
        for version, (proc, ready) in procs.items():
            wait_for_file(ready, proc=proc)
            path = tmp / ("%s.json" % version)
            r = run_tfnative(["stack", "--pid", str(proc.pid), "--locals", "--json", str(path)])
            assert r.returncode == 0, r.stderr
            with open(path) as f:
                out[version] = (proc.pid, r.stdout, json.load(f))
        out["py-spy"] = {v: _py_spy(p.pid) for v, (p, _r) in procs.items()}
        yield out
    finally:
        for proc, _ready in procs.values():
            proc.kill()
            proc.wait()


def _py_spy(pid: int):
    if not os.path.exists(PY_SPY):
        return None
    r = subprocess.run([PY_SPY, "dump", "--pid", str(pid), "--locals", "--json"], capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    return json.loads(r.stdout) if r.returncode == 0 else None


def _threads(doc):
    return doc["events"][0]["threads"]


def _frame(thread, function):
    return next(f for f in thread["frames"] if f["kind"] == "python" and f["function"] == function)


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_thread_names(targets, version):
    pid, text, doc = targets[version]
    names = {t["python_name"]: t for t in _threads(doc) if t.get("python_name")}
    assert set(names) == {"MainThread", "loader-1", "trainer"}
    assert names["MainThread"]["tid"] == pid
    # the OS name is kept in JSON; the text shows threading's name (all three inherit the process's OS name)
    assert len({t["name"] for t in names.values()}) == 1
    assert 'Thread %d "loader-1"' % names["loader-1"]["tid"] in text
    assert 'Thread %d "trainer"' % names["trainer"]["tid"] in text
    spy = targets["py-spy"][version]
    assert spy is not None, "py-spy (a dev dependency) could not read the process"
    if spy:
        assert {t["os_thread_id"]: t["thread_name"] for t in spy} == \
            {t["tid"]: t["python_name"] for t in names.values()}


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_locals(targets, version):
    _pid, text, doc = targets[version]
    by_name = {t.get("python_name"): t for t in _threads(doc)}
    for thread, function, marker, expected in ((by_name["loader-1"], "load", "LOADER_LINE", LOAD),
                                               (by_name["trainer"], "train", "TRAINER_LINE", TRAIN)):
        frame = _frame(thread, function)
        assert frame["line"] == line_of(PROGRAM, "# " + marker)
        got = {v["name"]: (v["repr"], v["arg"]) for v in frame["variables"]}
        assert got == expected
        assert list(got) == list(expected)  # in the frame's own order: arguments first
        # the text shows them under the frame's line
        lines = text.splitlines()
        at = next(i for i, ln in enumerate(lines) if "[py] %s at " % function in ln and thread_has(lines, i, thread))
        shown = [ln.strip() for ln in lines[at + 1: at + 1 + len(expected)]]
        assert shown == ["%s = %s%s" % (k, r, "  (argument)" if a else "") for k, (r, a) in expected.items()]
    spy = targets["py-spy"][version]
    if spy:  # the same variables, in the same order, as py-spy reads them
        for t in spy:
            for f in t["frames"]:
                if f["name"] in ("load", "train"):
                    ours = _frame(next(x for x in _threads(doc) if x["tid"] == t["os_thread_id"]), f["name"])
                    assert [v["name"] for v in ours["variables"]] == [v["name"] for v in f["locals"]]


def thread_has(lines, index, thread):
    """Whether the frame line at ``index`` belongs to ``thread``'s block (the nearest header above it)."""
    header = next(ln for ln in reversed(lines[:index]) if ln.startswith("Thread "))
    return header.startswith("Thread %d " % thread["tid"])


def test_no_locals_without_the_flag(targets, tmp_path):
    version = sorted(PYTHONS)[0]
    pid = targets[version][0]
    r = run_tfnative(["stack", "--pid", str(pid), "--json", "-"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert all("variables" not in f for t in _threads(doc) for f in t["frames"])
    assert {t.get("python_name") for t in _threads(doc)} == {"MainThread", "loader-1", "trainer"}


def test_locals_through_gdb(targets):
    """``--with-gdb`` reads the same variables (gdb's capture uses the same reader)."""
    version = "3.12" if "3.12" in PYTHONS else sorted(PYTHONS)[0]
    pid = targets[version][0]
    r = run_tfnative(["stack", "--pid", str(pid), "--locals", "--with-gdb", "--json", "-"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["events"][0]["via"] == "gdb"
    loader = next(t for t in _threads(doc) if t.get("python_name") == "loader-1")
    assert {v["name"]: (v["repr"], v["arg"]) for v in _frame(loader, "load")["variables"]} == LOAD
