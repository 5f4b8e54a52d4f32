"""Who holds the GIL, who waits for it, who collects garbage: compared with pystack on the same process.

One process per interpreter (``tests/scripts/gil_holder.py``: the main thread
holds the GIL in a ``ctypes.PyDLL`` call made by a ``__del__`` during
``gc.collect()``, two threads spin and wait for the GIL), on every pyenv
CPython 3.10-3.13 and Debian's stripped ``/usr/bin/python3.11``.
"""

import os
import re
import subprocess
import sys

import pytest

from ..utils import line_of, pyenv_pythons, requires_gdb, script, stack_event

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
        yield request.param, p.pid
    finally:
        p.kill()
        p.wait()


def pystack_marks(pid, native):
    """{tid: [status, ...]} as ``pystack remote`` marks each thread ("Has the GIL", "Garbage collecting"...)."""
    args = [PYSTACK, "remote"] + (["--native"] if native else []) + [str(pid)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return {int(m.group(1)): [s for s in m.group(2).split(",") if s]
            for m in re.finditer(r"Traceback for thread (\d+) .*?\[(.*?)\]", r.stdout)}


def test_holder_waiters_and_collector_agree_with_pystack(holder, tmp_path):
    version, pid = holder
    r, event = stack_event(tmp_path, pid)
    threads = {t["tid"]: t for t in event["threads"]}
    held = [tid for tid, t in threads.items() if t["gil"] == "held"]
    waiting = sorted(tid for tid, t in threads.items() if t["gil"] == "waiting")
    assert held == [pid]  # the main thread, in hold_gil
    assert len(waiting) == 2
    assert [tid for tid, t in threads.items() if t.get("gc")] == [pid]
    main = threads[pid]
    where = [(f["function"], f["line"]) for f in main["frames"] if f["kind"] == "python"][:2]
    path = script("gil_holder.py")
    assert where == [("hold_gil", line_of(path, "PyDLL(None).sleep")), (
        "Holder.__del__" if version != "3.10" else "__del__", line_of(path, "        hold_gil()"))]
    # the kernel's view: the holder sleeps in libc's sleep (clock_nanosleep, or its restart after a hold)
    assert main["kernel"]["state"] == "S"
    assert main["kernel"]["syscall"] in ("clock_nanosleep", "nanosleep", "restart_syscall")
    assert "[holds the GIL] [in a garbage collection] [S in " in r.stdout

    theirs = pystack_marks(pid, native=True)
    assert [t for t, marks in theirs.items() if "Has the GIL" in marks] == held
    pystack_waiting = sorted(t for t, marks in theirs.items() if "Waiting for the GIL" in marks)
    if version == "stripped-3.11":
        assert pystack_waiting == []  # pystack names no waiter there: take_gil has no symbol
    else:
        assert pystack_waiting == waiting
    # without --native pystack reads the collector's flag (with it, the collector's symbols: none when stripped)
    assert [t for t, marks in pystack_marks(pid, native=False).items() if "Garbage collecting" in marks] == [pid]
