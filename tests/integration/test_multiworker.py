"""A real 3-worker MultiWorkerMirroredStrategy job on localhost whose worker 2 stalls before the step.

One job for the module (``mwms_launcher.py`` starts the workers as its children, each with its
``TF_CONFIG`` on free loopback ports): ``tfnative stack --children LAUNCHER --json -`` piped into
``tfnative merge -`` groups workers 0 and 1, waiting in the step's all-reduce, as ``worker:0-1`` and
singles out ``worker:2`` at its line; the same through ``pdsh -R exec``; ``--all-threads`` groups TF's
thread pools.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from ..utils import TFNATIVE, assert_gone, line_of, requires_tf, run_tfnative, script

pytestmark = [requires_tf, pytest.mark.tf, pytest.mark.slow]

LAUNCHER = script("mwms_launcher.py")
WORKER = script("mwms_worker.py")
TFNATIVE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "tfnative")


def _docs(text):
    return [json.loads(line) for line in text.splitlines()]


def _in_step(doc):
    main = doc["events"][0]["threads"][0]
    return any(f.get("function") == "TFE_Execute" for f in main["frames"])


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    ready = tmp_path_factory.mktemp("mwms")
    launcher = subprocess.Popen([sys.executable, LAUNCHER, str(ready)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    try:
        deadline = time.monotonic() + 600  # three TF processes connecting over gRPC on 2 busy cores
        while time.monotonic() < deadline:
            assert launcher.poll() is None, "the launcher exited with %s" % launcher.returncode
            if all((ready / ("worker-%d" % i)).exists() for i in range(3)):
                break
            time.sleep(0.5)
        workers = [int((ready / ("worker-%d" % i)).read_text().split()[0]) for i in range(3)]
        # workers 0 and 1 reach the step's wait some time after their "step" file
        while True:
            r = run_tfnative(["stack", "--children", str(launcher.pid), "--json", "-"])
            assert r.returncode == 0, r.stderr
            docs = _docs(r.stdout)
            by_task = {d["task"]["index"]: d for d in docs}
            if _in_step(by_task[0]) and _in_step(by_task[1]):
                break
            assert time.monotonic() < deadline, "workers 0 and 1 never waited in the step"
            time.sleep(1)
        yield {"launcher": launcher.pid, "workers": workers, "jsonl": r.stdout}
    finally:
        procs = []
        for pid in [launcher.pid] + workers:
            try:
                procs.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                pass
        for pid in workers + [launcher.pid]:
            try:
                os.kill(pid, signal.SIGKILL)  # the workers ignore SIGTERM
            except ProcessLookupError:
                pass
        launcher.wait()
        assert_gone(procs)


def test_children_documents(job):
    docs = _docs(job["jsonl"])
    assert sorted(d["pid"] for d in docs) == sorted(job["workers"])  # the launcher is no descendant of itself
    assert sorted((d["task"]["type"], d["task"]["index"]) for d in docs) == [("worker", i) for i in range(3)]
    for d in docs:
        assert d["host"] == os.uname().nodename and d["argv"][1:3] == [WORKER, d["argv"][2]]
        assert d["events"][0]["cluster"]["tasks"] == ["worker:0", "worker:1", "worker:2"]


def _check_tree(text):
    lines = text.splitlines()
    assert lines[0].startswith("3 processes, 3 threads: worker:0-2"), text
    flagged = [ln for ln in lines if "<== OUTLIER" in ln]
    assert len(flagged) == 1, text
    assert "[py] main at %s:%d" % (WORKER, line_of(WORKER, "stall()  # the stalled worker is late")) in flagged[0]
    assert "[worker:2] (1 thread)" in flagged[0]
    below = lines[lines.index(flagged[0]) + 1]
    assert "[py] stall at %s:%d" % (WORKER, line_of(WORKER, "the stalled worker waits here")) in below
    step = [ln for ln in lines if "[py] main at %s:%d" % (WORKER, line_of(WORKER, "the others wait in the step"))
            in ln]
    assert len(step) == 1 and "[worker:0-1] (2 threads)" in step[0], text
    after = lines[lines.index(step[0]):]
    assert any("TFE_Execute in libtensorflow_cc.so.2   [worker:0-1]" in ln for ln in after), text


def test_merge_singles_out_the_stalled_worker(job):
    r = subprocess.run(TFNATIVE + ["merge", "-"], input=job["jsonl"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    _check_tree(r.stdout)


@pytest.mark.skipif(shutil.which("pdsh") is None or not os.path.exists(TFNATIVE_SCRIPT),
                    reason="pdsh (.ci/setup installs it) or the tfnative script is missing")
def test_through_pdsh(job):
    fan = subprocess.run(["pdsh", "-S", "-R", "exec", "-w", "localhost", TFNATIVE_SCRIPT, "stack", "--children",
                          str(job["launcher"]), "--json", "-"], capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL)
    assert fan.returncode == 0, fan.stderr
    assert all(line.startswith("localhost: {") for line in fan.stdout.splitlines())
    r = subprocess.run(TFNATIVE + ["merge", "-"], input=fan.stdout, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    _check_tree(r.stdout)


def test_all_threads_groups_the_pools(job, tmp_path):
    pid = job["workers"][0]
    counts = []
    for options in ([], ["--no-group"]):
        out = tmp_path / "s.json"
        r = run_tfnative(["stack", "--pid", str(pid), "--all-threads", "--json", str(out)] + options)
        assert r.returncode == 0, r.stderr
        threads = json.loads(out.read_text())["events"][0]["threads"]  # the same snapshot's threads
        grouped = [ln for ln in r.stdout.splitlines() if ln[:1].isdigit() and " threads (" in ln]
        singles = [ln for ln in r.stdout.splitlines() if ln.startswith("Thread ")]
        assert sum(int(ln.split()[0]) for ln in grouped) + len(singles) == len(threads)  # every thread, once
        counts.append((len(grouped), len(singles)))
        if not options:
            assert any("tf_Compute" in ln for ln in grouped), grouped
            assert len(singles) + len(grouped) < len(threads) / 2, r.stdout
    assert counts[1][0] == 0  # --no-group: each thread on its own
