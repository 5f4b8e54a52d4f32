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

import psutil
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


# --- watch --slurm-job: one watcher per node, the hang judged by the head across the nodes ---------------------

PEER = script("slurm_slow_peer.py")
WATCH_ARGS = ["--hang-after", "3", "--interval", "0.5"]
SLACK_S = 5.0  # seconds a report may take beyond --hang-after + 2 intervals on 2 loaded cores


def start_peer_job(slurm, tmp, busy_s, *extra, kill_on_bad_exit=False):
    """A 2 x 2 job of ``slurm_slow_peer.py`` (rank 3 the odd one): its id and {rank: (pid, node)}."""
    os.chmod(str(tmp), 0o755)
    (tmp / "job.sh").write_text("#!/bin/bash\nsrun %s%s %s %s %s 3 %s\n" % (
        "--kill-on-bad-exit=1 " if kill_on_bad_exit else "", sys.executable, PEER, tmp, busy_s, " ".join(extra)))
    r = slurm.run(["sbatch", "--parsable", "-N", "2", "--ntasks-per-node=2", "-D", str(tmp), "-o", str(tmp / "job.out"),
                   str(tmp / "job.sh")], cwd=ROOT)
    job_id = r.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 120
    while len(glob.glob(str(tmp / "rank-?"))) < 4:
        assert time.monotonic() < deadline, "the 4 ranks never started: %s" % (
            (tmp / "job.out").read_text() if (tmp / "job.out").exists() else "")
        time.sleep(0.2)
    ranks = {}
    for i in range(4):
        pid = int((tmp / ("rank-%d" % i)).read_text())
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        ranks[i] = (pid, env[b"SLURMD_NODENAME"].decode())
    return job_id, ranks


def watch_job(slurm, args, timeout=180):
    return subprocess.run(TFNATIVE + ["watch", "--slurm-job"] + args, capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=slurm.env(), stdin=subprocess.DEVNULL)


def no_watcher_left(job_id):
    """No node watcher of ours is left, nor the head's srun (the step ended with the head)."""
    deadline = time.monotonic() + 30

    def ours(argv):
        return ("--node-feed" in argv and "SLURM_JOB_ID=%s" % job_id in argv) or (
            "--job-name=tfnative-watch" in argv and "--jobid=%s" % job_id in argv)

    while True:
        left = [p.pid for p in psutil.process_iter(["cmdline"]) if ours(p.info["cmdline"] or [])]
        if not left or time.monotonic() > deadline:
            assert not left, "node watchers left running: %s" % left
            return
        time.sleep(0.2)


def test_watch_a_node_waiting_on_a_slow_peer_is_no_hang_the_whole_job_stalled_is(slurm, tmp_path):
    """Node n1's ranks wait (no CPU, no wake-ups) on node n2's ranks, which compute for 12 s: a watcher of n1
    alone would call it hung after 3 s.  The head judges every node: n1's ranks are named as stragglers (each
    once, with the stack at its wait), no hang is reported while n2 computes, and once the whole job has
    stalled, one report: every rank once, named by rank and node, each in its final wait, the odd rank 3 on
    n2 named; then --on-hang kill cancels the job and the watch exits 124."""
    job_id, ranks = start_peer_job(slurm, tmp_path, 12)
    out = tmp_path / "out"
    try:
        r = watch_job(slurm, [job_id] + WATCH_ARGS + ["--straggler-after", "2", "--on-hang", "kill", "--json",
                                                       str(tmp_path / "hang.jsonl"), "--out", str(out)])
        ended = time.time()
        assert r.returncode == 124, r.stderr
        assert "Traceback" not in r.stderr and "watched for hangs only" not in r.stderr, r.stderr
        assert r.stdout.count("tfnative: watch: hang: no process of Slurm job %s" % job_id) == 1, r.stdout
        sent = max(float((tmp_path / ("sent-%d" % i)).read_text()) for i in (2, 3))
        assert ended - sent <= 3 + 2 * 0.5 + SLACK_S, (ended - sent, r.stdout)
        # the stragglers: n1's two ranks, each named once, at the wait for their peer
        wait_line = "receive at %s:%d" % (PEER, line_of(PEER, "waits for the slow peer here"))
        for rank in (0, 1):
            pid, node = ranks[rank]
            named = [ln for ln in r.stdout.splitlines()
                     if ln.startswith("tfnative: watch: straggler: process %d on node %s " % (pid, node))]
            assert len(named) == 1, r.stdout
        stragglers = r.stdout.split("tfnative: watch: hang:")[0]
        assert stragglers.count(wait_line) == 2, stragglers
        assert not any("straggler: process %d " % ranks[i][0] in r.stdout for i in (2, 3)), r.stdout
        # the report: every rank once, named by Slurm, all in their final waits
        docs = [json.loads(ln) for ln in (tmp_path / "hang.jsonl").read_text().splitlines()]
        assert sorted((d["scheduler"]["rank"], d["pid"], d["scheduler"]["node"]) for d in docs) == sorted(
            (rank, pid, node) for rank, (pid, node) in ranks.items())
        assert {d["events"][0]["kind"] for d in docs} == {"hang"} and all(d["triage"] for d in docs)
        report, merged = r.stdout.split("tfnative: watch: hang:")[1].split("##### the job's 4 processes merged\n")
        together = "[py] hang_together at %s:%d" % (PEER, line_of(PEER, "the ranks hang here together"))
        alone = "[py] hang_alone at %s:%d" % (PEER, line_of(PEER, "the odd rank hangs here"))
        assert wait_line not in report and report.count(together) == 3 and report.count(alone) == 1, report
        assert [ln.endswith("[rank:0-2] (3 threads)") for ln in merged.splitlines() if together in ln] == [True], merged
        assert [ln.endswith("[rank:3] (1 thread)") for ln in merged.splitlines() if alone in ln] == [True], merged
        outlier = [ln for ln in r.stdout.splitlines() if ln.startswith("tfnative: watch: the outlier: ")]
        assert len(outlier) == 1 and "rank 3 on node n2 (slurm job %s, step 0), pid %d" % (
            job_id, ranks[3][0]) in outlier[0], outlier
        assert sorted(os.listdir(out)) == ["hang-1.html", "hang-1.jsonl", "hang-1.txt"]
        assert "ending the job (--on-hang kill): scancel %s" % job_id in r.stderr
        deadline = time.monotonic() + 60
        while job_id in slurm.jobs():
            assert time.monotonic() < deadline, "the job was not cancelled"
            time.sleep(0.5)
        no_watcher_left(job_id)
    finally:
        slurm.end_job(job_id)


def test_watch_a_crash_on_a_node_gives_its_report_and_the_jobs_status(slurm, tmp_path):
    """Rank 3 (node n2) dies of SIGSEGV and srun ends the job (``--kill-on-bad-exit``): the head prints the
    crash report of n2's watcher (the mixed stack at the fault, the user's line) and writes it to --json and
    --out; the watch ends with the job, with the crash's status, 139."""
    job_id, ranks = start_peer_job(slurm, tmp_path, 2, "crash", kill_on_bad_exit=True)
    out = tmp_path / "out"
    try:
        r = watch_job(slurm, [job_id] + WATCH_ARGS + ["--json", str(tmp_path / "crash.json"), "--out", str(out)])
        assert r.returncode == 139, r.stderr
        assert "Traceback" not in r.stderr
        head = "tfnative: watch: on node n2:\ntfnative: watch: crash: process %d, thread %d: SIGSEGV\n" % (
            ranks[3][0], ranks[3][0])
        assert head in r.stdout, r.stdout
        at = [ln for ln in r.stdout.splitlines() if "[py] crash_alone at %s:%d" % (
            PEER, line_of(PEER, "the odd rank crashes here")) in ln]
        assert len(at) == 1 and at[0].endswith("<-- your code"), r.stdout
        (doc,) = [json.loads(ln) for ln in (tmp_path / "crash.json").read_text().splitlines()]
        assert doc["pid"] == ranks[3][0] and doc["events"][-1]["signal"] == "SIGSEGV", doc["events"][-1].get("signal")
        assert sorted(os.listdir(out)) == ["crash-1.jsonl", "crash-1.txt"]
        no_watcher_left(job_id)
    finally:
        slurm.end_job(job_id)


def test_watch_ctrl_c_lets_every_rank_go_and_a_working_job_is_not_reported(slurm, job):
    """The module's job, whose ranks wake every 50 ms (working, by watch's rules): not reported over 3 x
    --hang-after; each rank is traced once, by its own node's watcher (none refused); Ctrl-C ends the watch
    with 130 and leaves every rank running, untraced."""
    job_id, ranks = job
    w = subprocess.Popen(TFNATIVE + ["watch", "--slurm-job", job_id, "--hang-after", "2", "--interval", "0.5"],
                         cwd=ROOT, env=slurm.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(8)
        for pid, _node in ranks.values():  # traced by its node's watcher (the crash watch), never stopped
            with open("/proc/%d/status" % pid) as f:
                status = f.read()
            assert "TracerPid:\t0\n" not in status and "State:\tt" not in status, status
        w.send_signal(signal.SIGINT)
        out, err = w.communicate(timeout=120)
        assert w.returncode == 130, err
        assert "hang:" not in out and "Traceback" not in err and "watched for hangs only" not in err, (out, err)
        for node in NODES:
            assert "%s: tfnative: watch: the head has gone: the processes are let go" % node in err, err
        for pid, _ in ranks.values():
            with open("/proc/%d/status" % pid) as f:
                status = f.read()
            assert "TracerPid:\t0\n" in status and ("State:\tS" in status or "State:\tR" in status), status
        no_watcher_left(job_id)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


def test_watch_kill_9_of_the_head_leaves_every_rank_running_untraced(slurm, job):
    """The head killed with SIGKILL: srun's standard input ends (its writer is gone), every node's watcher lets
    its ranks go and ends; the ranks run on, untraced, and no watcher is left."""
    job_id, ranks = job
    w = subprocess.Popen(TFNATIVE + ["watch", "--slurm-job", job_id, "--hang-after", "2", "--interval", "0.5"],
                         cwd=ROOT, env=slurm.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:  # every rank traced by its node's watcher
            traced = 0
            for pid, _node in ranks.values():
                with open("/proc/%d/status" % pid) as f:
                    traced += "TracerPid:\t0\n" not in f.read()
            if traced == len(ranks):
                break
            assert time.monotonic() < deadline, "the ranks were never all traced"
            time.sleep(0.2)
        w.kill()
        w.wait()
        deadline = time.monotonic() + 60
        for pid, _node in ranks.values():
            while True:
                with open("/proc/%d/status" % pid) as f:
                    status = f.read()
                if "TracerPid:\t0\n" in status:
                    break
                assert time.monotonic() < deadline, "rank pid %d still traced: %s" % (pid, status)
                time.sleep(0.2)
            assert "State:\tS" in status or "State:\tR" in status, status
        no_watcher_left(job_id)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


def test_watch_on_hang_core_has_each_node_write_its_ranks_cores(slurm, tmp_path):
    """--on-hang core on the whole job hung (no slow peer: BUSY_S 0): one report, then each node writes the
    cores of its own ranks under DIR/node-NAME/ (gdb's gcore, the ranks let go meanwhile) and the watch goes
    on; the ranks run on, untraced once the watch is ended."""
    job_id, ranks = start_peer_job(slurm, tmp_path, 0)
    out = tmp_path / "out"
    w = subprocess.Popen(TFNATIVE + ["watch", "--slurm-job", job_id] + WATCH_ARGS + ["--on-hang", "core", "--out",
                                                                                      str(out)],
                         cwd=ROOT, env=slurm.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while len(glob.glob(str(out / "node-*" / "core-1.*"))) < 4 or not all(
                os.path.getsize(p) > 0 for p in glob.glob(str(out / "node-*" / "core-1.*"))):
            assert time.monotonic() < deadline and w.poll() is None, "no 4 cores: %s" % os.listdir(out)
            time.sleep(0.5)
        time.sleep(2)
        w.send_signal(signal.SIGINT)
        stdout, err = w.communicate(timeout=120)
        assert w.returncode == 130 and "Traceback" not in err, err
        assert stdout.count("tfnative: watch: hang: no process of Slurm job %s" % job_id) == 1, stdout
        for rank, (pid, node) in ranks.items():
            assert os.path.getsize(out / ("node-%s" % node) / ("core-1.%d" % pid)) > 0, rank
            assert "node %s: 2 core file(s): " % node in err, err
            with open("/proc/%d/status" % pid) as f:
                status = f.read()
            assert "TracerPid:\t0\n" in status and "State:\tS" in status, status
        no_watcher_left(job_id)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
        slurm.end_job(job_id)


def test_watch_an_unknown_job_is_one_line(slurm):
    r = watch_job(slurm, ["999999"], timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        ln for ln in r.stderr.strip().splitlines() if ln.startswith("tfnative: error: Slurm job 999999 is unknown")]
