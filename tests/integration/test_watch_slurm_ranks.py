"""Issue #44 on the test Slurm: ``watch --slurm-job`` catches a stuck rank of a real MultiWorkerMirroredStrategy
job of 2 nodes x 4 ranks (``LocalSlurm(nodes=2)``: one ``slurmd -N nX`` per node on this machine).

Each task runs ``mwms_steps.py``'s worker (``mwms_slurm_steps.py``: its ``TF_CONFIG`` from ``SLURM_PROCID``),
an all-reduce a step; worker 5 (node n2) stalls at step 5 while the seven others wait for it in the step's
all-reduce.  One watcher per node reads its four ranks; the head judges the job across both nodes: within
--hang-after + 2 intervals of the watch being armed (the stall began before: the watch starts on a running
job) the headline and under it the culprit named by its rank and node, from what every node read of its ranks
without holding any (``facts``, sent before the report's documents), then one report naming the same rank in
its text (no line twice) and on every document of the JSON, with why it does not come: it sleeps (its line), or
it is stopped (SIGSTOP, seen by its node's crash catcher, the fact sent to the head).  --on-hang kill cancels
the job: exit 124, no rank and no node watcher left.

Under ``CI`` a Slurm that cannot be started fails the module (``.ci/setup`` installs it); elsewhere it skips.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from tfnative.core.docschema import check_document

from ..slurmlocal import cluster_for_tests
from ..utils import ROOT, TFNATIVE, assert_gone, has_tensorflow, line_of, script
from .test_slurm_nodes import SLACK_S, no_watcher_left

pytestmark = pytest.mark.skipif(not has_tensorflow(), reason="needs TensorFlow")
WORKER = script("mwms_slurm_steps.py")
STEPS = script("mwms_steps.py")
NODES, PER_NODE = ("n1", "n2"), 4
RANKS = len(NODES) * PER_NODE
CULPRIT = 5  # the second rank of node n2 (Slurm's block distribution)
CONNECT_S = 300  # 8 TF workers connect in ~25 s on 2 idle cores; far longer beside other work
HEADLINE = "tfnative: watch: hang: "
CULPRIT_LINE = "tfnative: watch: the culprit: "
FREE_PORTS = script("free_ports.py")  # ports below the ephemeral range (the script says why)


@pytest.fixture(scope="module")
def slurm():
    yield from cluster_for_tests(len(NODES))


def start_job(slurm, tmp, mode):
    """The 2 x 4 job, worker CULPRIT stalled at step 5 by ``mode``: its id, {rank: (pid, node)}."""
    os.chmod(str(tmp), 0o755)
    (tmp / "job.sh").write_text('#!/bin/bash\nexport MWMS_PORTS=$(%s %s %d)\nsrun --kill-on-bad-exit=0 %s %s %s %d '
                                '%d %s\n' % (sys.executable, FREE_PORTS, RANKS, sys.executable, WORKER, tmp, RANKS,
                                              CULPRIT, mode))
    r = slurm.run(["sbatch", "--parsable", "-N", str(len(NODES)), "--ntasks-per-node=%d" % PER_NODE, "-D", str(tmp),
                   "-o", str(tmp / "job.out"), str(tmp / "job.sh")], cwd=ROOT)
    job_id = r.stdout.strip().split(";")[0]
    deadline = time.monotonic() + CONNECT_S
    stalled = tmp / ("worker-%d" % CULPRIT)
    while not stalled.exists() or stalled.read_text().split()[-1] != mode:
        out = (tmp / "job.out").read_text() if (tmp / "job.out").exists() else ""
        # (a worker that died, e.g. of a port taken, leaves the others waiting for it: say so at once)
        assert time.monotonic() < deadline and job_id in slurm.jobs() and ": Exited with exit code" not in out, (
            "worker %d never stalled: %s" % (CULPRIT, out))
        time.sleep(0.2)
    ranks = {}
    for i in range(RANKS):
        pid = int((tmp / ("worker-%d" % i)).read_text().split()[0])
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        ranks[i] = (pid, env[b"SLURMD_NODENAME"].decode())
    assert sorted(node for _, node in ranks.values()) == sorted(NODES * PER_NODE), ranks
    return job_id, ranks


def armed(ranks, w, timeout=120):
    """Wait until every rank is traced by its node's watcher (the watch is armed)."""
    deadline = time.monotonic() + timeout
    while True:
        traced = 0
        for pid, _node in ranks.values():
            with open("/proc/%d/status" % pid) as f:
                traced += "TracerPid:\t0\n" not in f.read()
        if traced == len(ranks):
            return
        assert time.monotonic() < deadline and w.poll() is None, "the ranks were never all traced"
        time.sleep(0.2)


class Lines:
    """A stream's lines as they come, each with the moment it came (``time.monotonic``)."""

    def __init__(self, stream):
        self.lines = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            self.lines.append((time.monotonic(), line))

    def text(self):
        self.thread.join(timeout=30)
        return "".join(line for _, line in self.lines)

    def first(self, prefix):
        """When the first line that starts with ``prefix`` came, and the line (None, "" where none did)."""
        return next(((t, line.rstrip("\n")) for t, line in self.lines if line.startswith(prefix)), (None, ""))


def watch_fault(slurm, tmp, mode, hang_after, interval, act=None):
    """``watch --slurm-job --on-hang kill --json`` on the job, ``act(pid)`` done to the culprit once the watch is
    armed: what a user sees of it, with the moments (from then) of the headline, the first culprit line and the
    watch's end."""
    job_id, ranks = start_job(slurm, tmp, mode)
    procs = [psutil.Process(pid) for pid, _ in ranks.values()]
    json_path = tmp / "hang.jsonl"
    w = subprocess.Popen(TFNATIVE + ["watch", "--slurm-job", job_id, "--hang-after", str(hang_after), "--interval",
                                     str(interval), "--on-hang", "kill", "--json", str(json_path)],
                         cwd=ROOT, env=slurm.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = Lines(w.stdout), Lines(w.stderr)
    try:
        armed(ranks, w)
        if act is not None:
            act(ranks[CULPRIT][0])
        t0 = time.monotonic()
        w.wait(timeout=hang_after + 2 * interval + SLACK_S + 120)
        took = time.monotonic() - t0
        result = Result(took, w.returncode, out.text(), err.text(), ranks, job_id)
        for name, prefix in (("hang_at", HEADLINE), ("named_at", CULPRIT_LINE)):
            at, line = out.first(prefix)
            setattr(result, name, None if at is None else at - t0)
            if name == "named_at":
                result.first = line
        report_at = out.lines[-1][0] - t0 if out.lines else None  # the report's last line
        print("headline %s s, culprit named %s s, the report's end %s s, ended %.1f s after the watch was armed\n"
              "%s\n%s" % (result.hang_at, result.named_at, report_at, took, result.out, result.err))
        deadline = time.monotonic() + 60
        while job_id in slurm.jobs():
            assert time.monotonic() < deadline, "the job was not cancelled"
            time.sleep(0.5)
        assert_gone(procs, timeout=30)  # no rank left running or stopped, on any node
        no_watcher_left(job_id)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
        slurm.end_job(job_id)
    docs = [json.loads(ln) for ln in json_path.read_text().splitlines()] if json_path.exists() else []
    for doc in docs:
        check_document(doc)
    result.docs = docs
    return result


class Result:
    def __init__(self, took, status, out, err, ranks, job_id):
        self.took, self.status, self.out, self.err, self.ranks, self.job_id = took, status, out, err, ranks, job_id
        self.hang_at = self.named_at = None
        self.first, self.docs = "", []


def check(r, hang_after, interval, cause):
    """Exit 124; the headline, then under it the culprit named by rank and node within --hang-after + 2 intervals
    of the watch being armed (before the report holds anything), the report in time (then the job's cancel and
    the step's end), every rank of both nodes in it, the same culprit in its text (no line twice) and on every
    document; the report's last line on the culprit and the culprit's JSON."""
    pid, node = r.ranks[CULPRIT]
    assert node == "n2", r.ranks
    assert r.status == 124 and "Traceback" not in r.err, r.err
    assert r.out.count("tfnative: watch: hang: no process of Slurm job %s" % r.job_id) == 1, r.out
    who = "tfnative: watch: the culprit: worker:%d (pid %d on node n2), " % (CULPRIT, pid)
    assert r.first.startswith(who), r.out
    assert r.hang_at is not None and r.named_at is not None and r.hang_at <= r.named_at, r.out
    assert r.out.index(HEADLINE) < r.out.index(r.first), r.out
    assert r.named_at <= hang_after + 2 * interval, (r.named_at, r.out)
    assert "ending the job (--on-hang kill): scancel %s" % r.job_id in r.err, r.err
    assert r.took <= hang_after + 2 * interval + SLACK_S + 30, r.took  # the report, then scancel and the step's end
    assert sorted(d["pid"] for d in r.docs) == sorted(p for p, _ in r.ranks.values()), r.docs
    lines = [ln for ln in r.out.splitlines() if ln.startswith(CULPRIT_LINE)]
    assert all(ln.startswith(who) for ln in lines) and len(set(lines)) == len(lines), lines  # one rank; no line twice
    named = [d["events"][0].get("culprit") or {} for d in r.docs]
    assert all(c.get("pid") == pid and c.get("label") == "worker:%d" % CULPRIT and c.get("node") == "n2"
               and c.get("cause") == cause for c in named), named
    return r.first, lines[-1], named[0]


def test_a_rank_that_sleeps_on_node_n2_is_named_by_rank_and_node(slurm, tmp_path):
    result = watch_fault(slurm, tmp_path, "sleep", 8.0, 2.0)
    first, line, culprit = check(result, 8.0, 2.0, "sleeps")
    stall = "mwms_steps.py:%d" % line_of(STEPS, "# STALL_LINE")
    for said in (first, line):  # (the same line: the report's stacks add nothing to it, and it is said once)
        assert "the rank the others wait for: it sleeps (or polls with time.sleep) at stall at %s" % stall in said, said
    assert culprit["how"] == "peers_wait"


def test_a_rank_stopped_on_node_n2_is_named_with_its_signal(slurm, tmp_path):
    """SIGSTOP to worker 5 once the watch is armed: its node's crash catcher sees the group stop (and answers it:
    it stays stopped), its node sends the fact with the report's documents; the head names it stopped by
    SIGSTOP.  TensorFlow's heartbeat timeout (~10 s after the SIGSTOP) may end its peers while the nodes hold
    them for the report (they were finalizing in one run): then it is "the process the job waits for"."""
    result = watch_fault(slurm, tmp_path, "stop", 5.0, 1.25, act=lambda pid: os.kill(pid, signal.SIGSTOP))
    first, line, culprit = check(result, 5.0, 1.25, "stopped")
    assert ("the rank the others wait for: it is stopped (state T, by SIGSTOP): none of its threads runs until "
            "SIGCONT" in first), first
    assert ("the rank the others wait for: it is stopped (state T, by SIGSTOP): none of its threads runs until "
            "SIGCONT" in line or "the process the job waits for: it is stopped (state T, by SIGSTOP): " in line), line
    assert culprit["signal"] == "SIGSTOP" and culprit["how"] == "stopped", culprit
