"""``stack --slurm-job`` on a job of several nodes: a real 2-node Slurm on this machine
(``LocalSlurm(nodes=2)``: one ``slurmd -N nX`` per node, all sharing one process table) and a job of
2 nodes x 2 ranks of plain Python (``slurm_rank_odd.py``, no TensorFlow), rank 3 the odd one.

Each node's step must read its own node's ranks only: here every node's step also sees the other
node's ranks (a real cluster never shows them), so reading them too gave every rank once per node
(thread counts doubled), and two steps raced to hold the same rank (the loser refused).  The stack is
taken several times: the race showed in about half the runs.  The crash watch (``attach --slurm-job``)
finds its ranks the same way.

Under ``CI`` a Slurm that cannot be started fails the module (``.ci/setup`` installs it); elsewhere it
skips.
"""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ..slurmlocal import cluster_for_tests
from ..utils import ROOT, TFNATIVE, line_of, script

RANK = script("slurm_rank_odd.py")
NODES = ("n1", "n2")
RUNS = 4  # stack calls on the job: text and --json in turn
REFUSALS = ("not reported", "traced by", "security module", "refused", "Traceback", "error")


@pytest.fixture(scope="module")
def slurm():
    yield from cluster_for_tests(len(NODES))


@pytest.fixture(scope="module")
def job(slurm, tmp_path_factory):
    """The running 2 x 2 job: its id, and {rank: (pid, node)} as each rank's own environment says."""
    tmp = tmp_path_factory.mktemp("slurm-nodes")
    os.chmod(str(tmp), 0o755)
    ready = tmp / "ready"
    ready.mkdir()
    (tmp / "job.sh").write_text("#!/bin/bash\nsrun %s %s %s 3\n" % (sys.executable, RANK, ready))
    r = slurm.run(["sbatch", "--parsable", "-N", str(len(NODES)), "--ntasks-per-node=2", "-D", str(tmp),
                   "-o", str(tmp / "job.out"), str(tmp / "job.sh")], cwd=ROOT)
    job_id = r.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 120
        while len(glob.glob(str(ready / "rank-?"))) < 4:
            assert time.monotonic() < deadline, "the 4 ranks never started: %s" % (
                (tmp / "job.out").read_text() if (tmp / "job.out").exists() else "")
            time.sleep(0.2)
        ranks = {}
        for i in range(4):
            pid = int((ready / ("rank-%d" % i)).read_text())
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
            ranks[i] = (pid, env[b"SLURMD_NODENAME"].decode())
        assert sorted(node for _, node in ranks.values()) == ["n1", "n1", "n2", "n2"], ranks
        yield job_id, ranks
    finally:
        slurm.end_job(job_id)


def stack(slurm, args):
    return subprocess.run(TFNATIVE + ["stack"] + args, capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=slurm.env(), stdin=subprocess.DEVNULL)


def check_stderr(err, job_id, ranks):
    """Every rank named once, by its own node's step; no refusal of any kind."""
    assert not [w for w in REFUSALS if w in err], err
    assert "tfnative: job %s: 4 processes on 2 nodes" % job_id in err, err
    for rank, (pid, node) in ranks.items():
        named = [ln for ln in err.splitlines() if ": tfnative: process %d rank:%d " % (pid, rank) in ln]
        assert named == [ln for ln in named if ln.startswith(node + ": ")] and len(named) == 1, (rank, node, err)


def test_every_rank_once_named_by_rank_and_node(slurm, job):
    job_id, ranks = job
    odd_pid = ranks[3][0]
    times = []
    for run in range(RUNS):
        start = time.monotonic()
        r = stack(slurm, ["--slurm-job", job_id] + (["--json", "-"] if run % 2 else []))
        times.append(time.monotonic() - start)
        assert r.returncode == 0, r.stderr
        check_stderr(r.stderr, job_id, ranks)
        if run % 2:  # --json: the merged tree, each rank once, named by Slurm
            tree = json.loads(r.stdout)
            assert tree["tfnative_merge"] == 1
            procs = sorted(tree["processes"], key=lambda p: p["label"])
            assert [p["label"] for p in procs] == ["rank:0", "rank:1", "rank:2", "rank:3"], procs
            for rank, p in enumerate(procs):
                pid, node = ranks[rank]
                assert p["pid"] == pid and p["scheduler"]["node"] == node and p["scheduler"]["rank"] == rank
                assert p["scheduler"]["job"] == job_id and p["scheduler"]["local_rank"] == rank % 2
            assert tree["tree"]["members"] == ["rank:0", "rank:1", "rank:2", "rank:3"]
            assert tree["tree"]["threads"] == 8, tree["tree"]["threads"]  # two threads a rank, not doubled
            continue
        lines = r.stdout.splitlines()
        assert lines[0] == "4 processes, 8 threads: rank:0-3", r.stdout
        flagged = [ln for ln in lines if "<== OUTLIER" in ln]
        assert len(flagged) == 1, r.stdout
        assert "[py] main at %s:%d" % (RANK, line_of(RANK, "the odd rank goes its own way")) in flagged[0], flagged[0]
        assert flagged[0].endswith("[rank:3] (1 thread)   <== OUTLIER: rank 3 on node n2 (slurm job %s, step 0), "
                                   "pid %d" % (job_id, odd_pid)), flagged[0]
        assert lines[lines.index(flagged[0]) + 1].strip().startswith(
            "[py] wait_alone at %s:%d" % (RANK, line_of(RANK, "the odd rank waits here")))
        together = [ln for ln in lines if "[py] wait_with_the_others at %s:%d" % (
            RANK, line_of(RANK, "the ranks wait here together")) in ln]
        assert len(together) == 1 and together[0].endswith("[rank:0-2] (3 threads)"), r.stdout
        helpers = [ln for ln in lines if "[py] helper at %s:" % RANK in ln]
        assert len(helpers) == 1 and helpers[0].endswith("[rank:0-3] (4 threads)"), r.stdout
    for pid, _ in ranks.values():  # left running, untraced
        with open("/proc/%d/status" % pid) as f:
            assert "TracerPid:\t0\n" in f.read()
    print("stack --slurm-job on 2 nodes x 2 ranks: %s s" % ", ".join("%.2f" % t for t in times))


def test_folded_counts_each_thread_once(slurm, job):
    job_id, ranks = job
    r = stack(slurm, ["--slurm-job", job_id, "--folded"])
    assert r.returncode == 0, r.stderr
    check_stderr(r.stderr, job_id, ranks)
    assert sum(int(ln.rsplit(" ", 1)[1]) for ln in r.stdout.splitlines()) == 8, r.stdout
    alone = [ln for ln in r.stdout.splitlines() if ";[py] wait_alone at " in ln]
    assert len(alone) == 1 and alone[0].endswith(" 1"), r.stdout


def test_nodes_send_their_trees_and_the_head_merges_them(slurm, job, tmp_path):
    """Each node reduces its ranks to one tree (``stack --tree -``, LLNL STAT's way) and the head merges the
    trees: the view is the one the whole documents give (``--documents`` makes the nodes send those), and a
    node's tree holds its own two ranks, as a rank set."""
    job_id, ranks = job
    docs = tmp_path / "docs.jsonl"
    by_trees = stack(slurm, ["--slurm-job", job_id])
    by_docs = stack(slurm, ["--slurm-job", job_id, "--documents", str(docs)])
    assert by_trees.returncode == 0 and by_docs.returncode == 0, (by_trees.stderr, by_docs.stderr)
    check_stderr(by_trees.stderr, job_id, ranks)
    outlier = [ln for ln in by_trees.stdout.splitlines() if "<== OUTLIER" in ln]
    assert len(outlier) == 1 and "rank 3 on node n2" in outlier[0], by_trees.stdout
    assert by_trees.stdout == by_docs.stdout
    assert sorted(json.loads(ln)["pid"] for ln in docs.read_text().splitlines()) == sorted(
        pid for pid, _ in ranks.values())
    node = stack(slurm, ["--env", "SLURM_JOB_ID=%s" % job_id, "--env", "SLURMD_NODENAME=n2", "--tree", "-"])
    assert node.returncode == 0, node.stderr
    tree = json.loads(node.stdout)
    assert tree["tfnative_tree"] == 1
    assert sorted(p["label"] for p in tree["processes"]) == ["rank:2", "rank:3"]
    up, key, members, threads, frame = tree["nodes"][0]
    assert (up, key, members, threads, frame) == (-1, "", [["rank", "2-3"]], 4, None), tree["nodes"][0]


def test_crash_watch_watches_each_rank_once(slurm, job):
    """``attach --slurm-job``: each node's watch arms one ``attach --pid`` per rank of its own node (the
    other node's ranks would be attached twice, the second refused); Ctrl-C lets all four go."""
    job_id, ranks = job
    watch = subprocess.Popen(TFNATIVE + ["attach", "--slurm-job", job_id], cwd=ROOT, env=slurm.env(),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        for line in watch.stderr:
            seen.append(line)
            if sum("watching for a fatal signal" in ln for ln in seen) == 4:
                break
        watch.send_signal(signal.SIGINT)
        out, rest = watch.communicate(timeout=120)
        err = "".join(seen) + rest
        assert watch.returncode == 130 and "Traceback" not in err, err
        for node in NODES:
            mine = sorted((rank, pid) for rank, (pid, n) in ranks.items() if n == node)
            assert "%s: tfnative: watching 2 processes: %s\n" % (node, "; ".join(
                "rank %d on node %s (slurm job %s, step 0), pid %d" % (rank, node, job_id, pid)
                for rank, pid in mine)) in err, err
            for rank, pid in mine:
                assert err.count("%s: rank %d: tfnative: attached to %d " % (node, rank, pid)) == 1, err
                assert err.count("rank %d: tfnative: attached to" % rank) == 1, err
        for pid, _ in ranks.values():
            with open("/proc/%d/status" % pid) as f:
                assert "TracerPid:\t0\n" in f.read()
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()


def test_a_node_reads_its_own_nodes_processes_only(tmp_path):
    """No Slurm: Slurm's variables set by hand.  tfnative run as a task of node "a" (its own
    ``SLURMD_NODENAME``), asked for job X's processes, reads those of node "a" only: not node "b"'s, not
    one without a node (no task of the job's); run as no node's task, all three; an explicit
    ``--env SLURMD_NODENAME=b`` is taken as given."""
    job = "local%d" % os.getpid()
    sleep = "import sys, time; print('ready', flush=True); time.sleep(3600)"
    procs = {}
    try:
        for name, extra in (("a", {"SLURMD_NODENAME": "a"}), ("b", {"SLURMD_NODENAME": "b"}), ("none", {})):
            env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
            env.update(extra, SLURM_JOB_ID=job, SLURM_PROCID=str(len(procs)))
            procs[name] = subprocess.Popen([sys.executable, "-c", sleep], env=env, cwd=str(tmp_path),
                                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
            procs[name].stdout.readline()
        mine = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}

        def read(own, *envs):
            r = subprocess.run(TFNATIVE + ["stack", "--env", "SLURM_JOB_ID=" + job, *envs, "--json", "-"],
                               capture_output=True, text=True, timeout=300, cwd=ROOT, stdin=subprocess.DEVNULL,
                               env=dict(mine, **own))
            assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
            return sorted(json.loads(line)["pid"] for line in r.stdout.splitlines())

        assert read({"SLURMD_NODENAME": "a"}) == [procs["a"].pid]
        assert read({}) == sorted(p.pid for p in procs.values())
        assert read({"SLURMD_NODENAME": "a"}, "--env", "SLURMD_NODENAME=b") == [procs["b"].pid]
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
