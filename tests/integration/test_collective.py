"""The verdict on a real 2-worker MultiWorkerMirroredStrategy job whose worker 1 never runs the step.

Worker 0's ``train_step`` (an all-reduce) stays pending: its main thread waits
for the tf.function and no thread runs its ops.  Both workers run on this
machine, connected over gRPC on loopback (they ignore SIGTERM: SIGKILL ends them).
"""

import json
import os
import subprocess
import sys
import time

import pytest

from ..utils import free_ports, line_of, load_json, requires_gdb, requires_tf, run_tfnative, script

pytestmark = [requires_gdb, requires_tf]

SCRIPT = script("tf_collective.py")


@pytest.fixture(scope="module")
def job():
    cluster = {"worker": ["127.0.0.1:%d" % p for p in free_ports(2)]}
    workers = []
    try:
        for i in range(2):
            config = {"cluster": cluster, "task": {"type": "worker", "index": i}}
            env = dict(os.environ, TF_CONFIG=json.dumps(config))
            workers.append(subprocess.Popen([sys.executable, SCRIPT], stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env))
        for w in workers:
            assert w.stdout.readline() == b"ready\n", "a worker did not get ready"
        yield workers
    finally:
        for w in workers:
            w.kill()
            w.wait()


def test_pending_collective_step(job, tmp_path):
    pid = job[0].pid
    end = time.monotonic() + 180
    for i in range(10000):  # worker 0 reaches the step's wait some time after "ready"
        out = tmp_path / ("s%d.json" % i)
        r = run_tfnative(["stack", "--pid", str(pid), "--json", str(out)])
        assert r.returncode == 0, r.stderr
        doc = load_json(out)
        if doc["triage"]["pattern"] == "function_without_thread" or time.monotonic() > end:
            break
        time.sleep(0.5)
    t = doc["triage"]
    assert t["pattern"] == "function_without_thread", t["verdict"]
    assert t["pool"]["busy"] == [] and t["pool"]["threads"] >= 1
    assert t["verdict"] == (
        "the main thread waits for tf.function train_step at tf_collective.py:%d, and no thread runs its ops (all "
        "%d tf_Compute threads wait for work): this process is task worker:0 of a 2-task cluster (TF_CONFIG), so a "
        "collective op waits for its peers" % (line_of(SCRIPT, "# worker 0: waits here"), t["pool"]["threads"]))
    assert doc["events"][0]["cluster"] == {"task": "worker:0", "tasks": ["worker:0", "worker:1"]}
    assert "tfnative: verdict: " + t["verdict"] in r.stderr
