"""Issue #44: ``tfnative watch`` on a real MultiWorkerMirroredStrategy job on localhost catches a stuck rank.

``tests/scripts/mwms_steps.py`` launches RANKS workers that train in steps (an all-reduce each); one of them
sleeps for ever at step 5 while the others wait in the step's all-reduce.  The waiting ranks' gRPC threads
(``event_engine``, ``grpc_global_timer``, ``lifeguard``...) wake dozens of times in 10 s: those are the
runtime's wake-ups, not the job's progress, and the hang is reported within --hang-after + 2 intervals of the
stall, the culprit named as the outlier; --on-hang kill ends the job (exit 124), nothing is left.  The same job
with no culprit is never reported.
"""

import os
import signal
import time

import pytest

from tfnative.core.docschema import check_document

from ..utils import assert_gone, has_tensorflow, line_of, script
from .test_watch import SNAPSHOT_SLACK, Watcher, documents

pytestmark = pytest.mark.skipif(not has_tensorflow(), reason="needs TensorFlow")
STEPS = script("mwms_steps.py")
RANKS = 3
HANG_AFTER, INTERVAL = 8.0, 2.0
CONNECT_S = 240  # the workers connect in ~30 s on 2 idle cores; far longer beside other work


def _wait_for_worker(tmp_path, index, what, w, timeout=CONNECT_S):
    path = tmp_path / ("worker-%d" % index)
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text() if path.exists() else ""
        if text.split(" ")[-1:] == [what]:
            return int(text.split()[0])
        assert time.monotonic() < deadline, "worker %d never wrote %r:\n%s" % (index, what, w.err())
        assert w.proc.poll() is None, "the watcher exited with %s:\n%s" % (w.proc.returncode, w.err())
        time.sleep(0.1)


def test_a_rank_that_sleeps_at_step_5_is_reported_in_time_as_the_outlier(tmp_path):
    culprit = 1
    json_path = str(tmp_path / "hang.jsonl")
    w = Watcher(tmp_path, ["watch", "--hang-after", str(HANG_AFTER), "--interval", str(INTERVAL), "--on-hang",
                           "kill", "--json", json_path, STEPS, str(tmp_path), str(RANKS), str(culprit), "sleep"])
    try:
        pid = _wait_for_worker(tmp_path, culprit, "sleep", w)
        t_stall = time.monotonic()
        procs = w.tree()[1:]
        w.wait_for("hang: no process of the job has progressed", HANG_AFTER + 2 * INTERVAL + SNAPSHOT_SLACK + 60)
        took = time.monotonic() - t_stall
        status = w.finish(60)
        out, err = w.out(), w.err()
        print("reported %.1f s after the stall\n%s\n%s" % (took, out, err))
        assert took <= HANG_AFTER + 2 * INTERVAL + SNAPSHOT_SLACK, took
        assert status == 124, err
        docs = documents(json_path)
        for doc in docs:
            check_document(doc)
        ranks = [d for d in docs if "TF_CONFIG" not in str(d.get("process", {}).get("cmdline", ""))
                 and d["pid"] != w.proc.pid]
        assert pid in [d["pid"] for d in ranks]
        stall = "mwms_steps.py:%d" % line_of(STEPS, "# STALL_LINE")
        step = "mwms_steps.py:%d" % line_of(STEPS, "# STEP_LINE")
        assert stall in out and step in out
        outlier = next(line for line in out.splitlines() if line.startswith("tfnative: watch: the outlier: "))
        assert "pid %d" % pid in outlier or "rank:%d" % culprit in outlier or "worker:%d" % culprit in outlier, outlier
        assert_gone(procs)
    finally:
        w.kill_all()


def test_the_healthy_job_is_never_reported(tmp_path):
    w = Watcher(tmp_path, ["watch", "--hang-after", str(HANG_AFTER), "--interval", str(INTERVAL), STEPS,
                           str(tmp_path), str(RANKS), "-1", "sleep"])
    try:
        _wait_for_worker(tmp_path, 0, "5", w)
        procs = w.tree()[1:]
        time.sleep(3 * HANG_AFTER)
        assert w.proc.poll() is None, w.err()
        assert "hang" not in w.out() and "hang" not in w.err(), (w.out(), w.err())
        os.kill(w.proc.pid, signal.SIGTERM)
        assert w.finish(60) == 128 + signal.SIGTERM, w.err()
        assert_gone(procs)
    finally:
        w.kill_all()
