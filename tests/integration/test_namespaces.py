"""tfnative stack --pid on a process in its own mount namespace: its files are read through /proc/PID/root."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time

import pytest

from ..conftest import load_json, run_tfnative, script

PYENV = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.11.*")))

SETUP = """set -e
mount -t tmpfs none /mnt
mkdir -p /mnt/tfnx/py /mnt/tfnx/app
mount --bind "$1" /mnt/tfnx/py
cp "$2" /mnt/tfnx/app/sleeper.py
exec /mnt/tfnx/py/bin/python3.11 /mnt/tfnx/app/sleeper.py "$3"
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not PYENV,
                    reason="needs root, unshare and a pyenv CPython 3.11")
def test_stack_of_a_process_in_another_mount_namespace(tmp_path):
    ready = tmp_path / "ready"
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "bash", "-c", SETUP, "setup",
                             PYENV[-1], script("sleeper.py"), str(ready)])
    try:
        deadline = time.monotonic() + 60
        while not (ready.exists() and ready.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        pid = int(ready.read_text())
        assert not os.path.exists("/mnt/tfnx/py/bin/python3.11")  # the target's paths do not exist here
        out = tmp_path / "s.json"
        res = run_tfnative(["stack", "--pid", str(pid), "--json", str(out)], timeout=120)
        assert res.returncode == 0, res.stderr
        frames = load_json(out)["events"][0]["threads"][0]["frames"]
        py = [(f["function"], f["file"], f["line"]) for f in frames if f["kind"] == "python"]
        assert py == [("wait_here", "/mnt/tfnx/app/sleeper.py", 10), ("main", "/mnt/tfnx/app/sleeper.py", 14),
                      ("<module>", "/mnt/tfnx/app/sleeper.py", 17)]
        native = [f["function"] for f in frames if f["kind"] == "native"]
        assert native[:2] == ["clock_nanosleep", "time_sleep"] and "??" not in native
        assert "through gdb" not in res.stderr and "warning" not in res.stderr  # no fallback, no complaint
    finally:
        proc.kill()
        proc.wait(timeout=30)
