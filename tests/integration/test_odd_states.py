"""Processes in odd states: a leader gone by pthread_exit, a process exiting meanwhile, Ctrl-C at start."""

import signal
import subprocess
import sys
import time

import pytest

from ..utils import TFNATIVE, load_json, run_tfnative, script, wait_for_file

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def test_leader_exited_live_threads_shown(tmp_path):
    """Main thread ended by pthread_exit (State: Z, Threads: 3): the two workers are snapshotted."""
    ready = tmp_path / "ready"
    target = subprocess.Popen([sys.executable, script("leaderless.py"), str(ready)])
    try:
        wait_for_file(str(ready), 60, target)
        for _ in range(200):  # the leader's exit follows the ready file
            with open("/proc/%d/status" % target.pid) as f:
                if "State:\tZ" in f.read():
                    break
            time.sleep(0.05)
        out = tmp_path / "s.json"
        r = run_tfnative(["stack", "--pid", str(target.pid), "--json", str(out)], timeout=300)
        assert r.returncode == 0, r.stderr
        ev = load_json(out)["events"][0]
        assert ev["pid"] == target.pid and ev["via"] == "cfi"
        assert "the main thread %d has exited (pthread_exit)" % target.pid in " ".join(ev["warnings"])
        assert len(ev["threads"]) == 2 and target.pid not in [t["tid"] for t in ev["threads"]]
        for t in ev["threads"]:
            python = [f["function"] for f in t["frames"] if f["kind"] == "python"]
            assert python[0] == "worker" and python[-1] == "Thread._bootstrap", python
            assert t["frames"][-1]["function"] == "clone3" or t["frames"][-1]["function"] == "clone"
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()


def test_process_exiting_meanwhile_is_said(tmp_path):
    """A target that exits while tfnative starts: a snapshot, or one line saying it exited; never another story."""
    for delay in [0.1 + 0.01 * i for i in range(16)]:  # around tfnative's start-up time, here
        target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(%r)" % (0.3 + delay)])
        time.sleep(0.3)
        r = run_tfnative(["stack", "--pid", str(target.pid)], timeout=300)
        target.wait()
        if r.returncode != 0:
            assert r.stderr.strip().splitlines()[-1] in (
                "tfnative: error: process %d exited" % target.pid,
                "tfnative: error: process %d exited while it was being read" % target.pid,
                "tfnative: error: no process with pid %d" % target.pid,
                "tfnative: error: process %d is a zombie: it has exited" % target.pid), r.stderr
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr and "SYS_PTRACE" not in r.stderr


@pytest.mark.parametrize("after", [0.12, 0.16, 0.2])
def test_ctrl_c_while_loading_prints_no_traceback(after):
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # CPython's own start (site, before any code of tfnative's runs) dies of an early SIGINT with its
        # own traceback; on a loaded machine it can outlast ``after``, so the signal comes after it.
        start = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        after = max(after, time.monotonic() - start + 0.02)
        p = subprocess.Popen(TFNATIVE + ["stack", "--pid", str(target.pid)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(after)
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=120)
        assert "Traceback" not in err, err
        # 130: interrupted in a command; -SIGINT: the signal landed while the interpreter was exiting
        # (its handlers already restored), which a shell shows as 130 too
        assert p.returncode in (0, 1, 130, -signal.SIGINT), (p.returncode, err)
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()
