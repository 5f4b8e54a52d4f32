"""Who holds the GIL and who waits for it, compared with pystack on the same process."""

import os
import re
import subprocess
import sys

import pytest

from ..conftest import pyenv_pythons, requires_gdb, run_tfnative, script

pytestmark = requires_gdb

STRIPPED = "/usr/bin/python3.11"
PYSTACK = os.path.join(os.path.dirname(sys.executable), "pystack")
PYTHONS = dict(pyenv_pythons())
if os.path.exists(STRIPPED):
    PYTHONS["stripped-3.11"] = STRIPPED


@pytest.fixture(scope="module", params=sorted(PYTHONS))
def holder(request):
    p = subprocess.Popen([PYTHONS[request.param], script("gil_holder.py")], stdout=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline() == b"ready\n"
        yield p.pid
    finally:
        p.kill()
        p.wait()


def _pystack_marks(pid):
    r = subprocess.run([PYSTACK, "remote", "--native", str(pid)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"Traceback for thread (\d+) .*?\[(.*?)\]", r.stdout)}


def test_holder_and_waiters_agree_with_pystack(holder):
    r = run_tfnative(["stack", "-p", str(holder)])
    assert r.returncode == 0, r.stderr
    ours = {int(m.group(1)): m.group(2) for m in re.finditer(r'^Thread (\d+) ".*?"(?: \[(.*)\])?', r.stdout, re.M)}
    held = [t for t, mark in ours.items() if mark == "holds the GIL"]
    waiting = sorted(t for t, mark in ours.items() if mark == "waiting for the GIL")
    assert held == [holder]  # the main thread, in hold_gil
    assert len(waiting) == 2
    theirs = _pystack_marks(holder)
    assert [t for t, m in theirs.items() if m == "Has the GIL"] == held
    pystack_waiting = sorted(t for t, m in theirs.items() if m == "Waiting for the GIL")
    if pystack_waiting:  # pystack names no waiter on the stripped 3.11 (no take_gil symbol)
        assert pystack_waiting == waiting
