"""Hangs at exit on CPython 3.10-3.13 and the stripped 3.11: the verdict names what the exit waits for.

``tests/scripts/exit_hang.py``: the main code returns while a non-daemon thread waits (the main thread
waits in ``threading._shutdown``), or a ``__del__`` blocks while the interpreter tears the module down
(``_PyRuntime._finalizing`` set).  Small processes, all started together.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from ..utils import line_of, pyenv_pythons, run_tfnative, script, wait_for_file

PROGRAM = script("exit_hang.py")
PYTHONS = dict(pyenv_pythons())
if os.path.exists("/usr/bin/python3.11"):
    PYTHONS["stripped-3.11"] = "/usr/bin/python3.11"
# Debian's stripped interpreter has no symbols for its built-ins, and 3.10's code objects no qualified names.
STRIPPED_CALL = "a built-in function"


def _call(version, name):
    return STRIPPED_CALL if version.startswith("stripped") else name


CASES = [(v, mode) for v in sorted(PYTHONS) for mode in ("threads", "finalize")]


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exit")
    procs = {}
    try:
        for version, mode in CASES:
            ready = str(tmp / ("%s-%s" % (version, mode)))
            procs[(version, mode)] = (subprocess.Popen([PYTHONS[version], PROGRAM, mode, ready]), ready)
        out = {}
        for key, (proc, ready) in procs.items():
            wait_for_file(ready, proc=proc)
            deadline = time.monotonic() + 60
            r = None
            while time.monotonic() < deadline:  # until the exit has reached the place where it waits
                r = run_tfnative(["stack", "--pid", str(proc.pid), "--json", "-"])
                assert r.returncode == 0, r.stderr
                doc = json.loads(r.stdout)
                if doc.get("triage", {}).get("pattern"):
                    break
                time.sleep(0.2)
            out[key] = (proc.pid, doc, r.stderr)
        yield out
    finally:
        for proc, _ready in procs.values():
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_exit_waits_for_a_non_daemon_thread(snapshots, version):
    pid, doc, err = snapshots[(version, "threads")]
    triage = doc["triage"]
    assert triage["pattern"] == "exit_waits_for_threads", triage
    uploader = next(t for t in doc["events"][0]["threads"] if t.get("python_name") == "uploader")
    assert uploader["daemon"] is False
    heartbeat = next(t for t in doc["events"][0]["threads"] if t.get("python_name") == "heartbeat")
    assert heartbeat["daemon"] is True
    assert triage["verdict"].startswith(
        'the program has ended: the main thread waits in threading._shutdown for 1 non-daemon thread: '
        'thread %d "uploader" in upload at exit_hang.py:%d, blocked in %s'
        % (uploader["tid"], line_of(PROGRAM, "# UPLOAD_LINE"), _call(version, "lock.acquire()")))
    assert "heartbeat" not in triage["verdict"]
    assert "tfnative: verdict: " + triage["verdict"] in err


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_exit_blocked_while_the_interpreter_finalizes(snapshots, version):
    pid, doc, err = snapshots[(version, "finalize")]
    event = doc["events"][0]
    assert event["finalizing"] is True
    assert doc["triage"]["pattern"] == "interpreter_finalizing"
    assert doc["triage"]["verdict"] == (
        "the interpreter is shutting down (Py_FinalizeEx has begun) and the main thread is in %s at "
        "exit_hang.py:%d, blocked in %s" % ("__del__" if version == "3.10" else "Blocks.__del__",
                                            line_of(PROGRAM, "# DEL_LINE"), _call(version, "time.sleep()")))
