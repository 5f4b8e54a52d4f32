"""``tfnative stack --pid`` on a script that a ``tfnative attach`` session holds: the session answers.

gdb traces the script, so ``stack`` cannot hold it itself; the session takes the snapshot, the script
runs on, and the session's socket is gone when it ends.  A listener on the same address that is not
the target's session is not believed (``tests/unit/test_sessionsock.py``).  A small script (no TensorFlow).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

from tfnative.sources import sessionsock

from ..utils import TFNATIVE, line_of, run_tfnative, script, tracer_of, wait_for_file

SLEEPER = script("sleeper.py")


def _state(pid: int) -> str:
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_stack_of_a_script_under_attach(tmp_path):
    ready = tmp_path / "pid"
    session = subprocess.Popen(TFNATIVE + ["attach", SLEEPER, str(ready)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    pid = None
    try:
        wait_for_file(str(ready), proc=session)
        pid = int(ready.read_text())
        assert tracer_of(pid) != 0  # gdb holds it
        r = run_tfnative(["stack", "--pid", str(pid), "--json", "-"], timeout=120)
        assert r.returncode == 0, r.stderr
        assert "held by a tfnative attach session" in r.stderr
        doc = json.loads(r.stdout)
        (thread,) = [t for t in doc["events"][0]["threads"] if t["tid"] == pid]
        py = [(f["function"], f["line"]) for f in thread["frames"] if f["kind"] == "python"]
        last = len(open(SLEEPER).read().splitlines())  # the module's last line calls main()
        assert py == [("wait_here", line_of(SLEEPER, "time.sleep(0.05)")),
                      ("main", line_of(SLEEPER, "wait_here(sys.argv")), ("<module>", last)]
        assert doc["triage"]["verdict"]
        # again, with --locals: the session reads them too; the script runs on between the two
        r = run_tfnative(["stack", "--pid", str(pid), "--locals", "--json", "-"], timeout=120)
        assert r.returncode == 0, r.stderr
        frames = json.loads(r.stdout)["events"][0]["threads"][0]["frames"]
        wait = next(f for f in frames if f.get("function") == "wait_here")
        assert {v["name"]: v["repr"] for v in wait["variables"]}["path"] == repr(str(ready))
        assert _state(pid) != "T"
        with open("/proc/net/unix") as f:
            assert sessionsock.address(pid)[1:] in f.read()
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        _out, err = session.communicate(timeout=120)
    assert err.count("answered tfnative stack --pid %d" % pid) == 2, err
    assert session.returncode == 128 + signal.SIGKILL
    with open("/proc/net/unix") as f:  # the session's socket went with it (abstract: no file at all)
        assert sessionsock.address(pid)[1:] not in f.read()
