"""A real single-node Slurm (``tests/slurmlocal.py``: its own munged, slurmctld, slurmd and config,
started for this module and stopped at its end, nothing left running) and real jobs through it.

- A 3-task ``MultiWorkerMirroredStrategy`` job (``sbatch``; each task ``mwms_slurm_worker.py``, its
  ``TF_CONFIG`` from ``SLURM_PROCID`` and free ports) whose rank 2 stalls before the step: one job for
  the module.  ``tfnative stack --slurm-job J`` (one ``srun --overlap`` task per node) prints the merged
  tree naming the stalled rank by its Slurm rank at its line; ``--json``/``--documents``/``--folded``.
- Every refusal of ``--slurm-job``: an unknown job, a finished one, ``--overlap`` refused by the site
  (a ``cli_filter/lua`` in the client's configuration), tfnative missing on the node, ``srun`` missing,
  another user's job (``runuser`` to ``nobody``, where an interpreter it may run can import tfnative).
- The crash watch: ``tfnative attach --slurm-job J`` on a 3-task job whose rank 1 segfaults.

Under ``CI`` a Slurm that cannot be started fails the module (``.ci/setup`` installs it); elsewhere it
skips.  The node commands run this checkout's tfnative: ``sys.executable -m tfnative`` with the
working directory at the repository's root, which ``srun`` keeps for its tasks.
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from ..installed import import_paths
from ..slurmlocal import cluster_for_tests
from ..utils import ROOT, TFNATIVE, has_tensorflow, line_of, script

WORKER = script("mwms_worker.py")
SLURM_WORKER = script("mwms_slurm_worker.py")
SEGV = script("slurm_rank_segv.py")
HOST = os.uname().nodename.split(".")[0]


@pytest.fixture(scope="module")
def slurm():
    yield from cluster_for_tests(1)


def tfnative(slurm, args, timeout=300, env=None, **kw):
    """``tfnative ARGS`` against the private cluster, from the repository's root."""
    return subprocess.run(TFNATIVE + args, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=env or slurm.env(), stdin=subprocess.DEVNULL, **kw)


def sbatch(slurm, tmp, body, ntasks=3):
    """Submit a job script (``#!/bin/bash`` + BODY) that runs in ``tmp`` (nothing lands in the checkout);
    its job id."""
    path = os.path.join(str(tmp), "job.sh")
    with open(path, "w") as f:
        f.write("#!/bin/bash\n%s\n" % body)
    r = slurm.run(["sbatch", "--parsable", "-n", str(ntasks), "-D", str(tmp), "-o", os.path.join(str(tmp), "job.out"),
                   path], cwd=ROOT)
    return r.stdout.strip().split(";")[0]


def job_state(slurm, job):
    r = slurm.run(["squeue", "-h", "--states=all", "-j", job, "-o", "%T"], check=False)
    return r.stdout.strip()


def wait_for(test, timeout, what):
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.5)


FREE_PORTS = script("free_ports.py")  # 3 ports below the ephemeral range (the script says why)


@pytest.fixture(scope="module")
def mwms(slurm, tmp_path_factory):
    """The stalled 3-rank MWMS job: its id, its workers' pids, the first merged tree that showed ranks 0
    and 1 waiting in the step."""
    if not has_tensorflow():
        pytest.skip("tensorflow is not installed in this Python")
    tmp = tmp_path_factory.mktemp("slurm-mwms")
    os.chmod(str(tmp), 0o755)
    ready = tmp / "ready"
    ready.mkdir()
    job = sbatch(slurm, tmp, 'export MWMS_PORTS=$(%s %s 3)\nsrun --kill-on-bad-exit=0 %s %s %s 2'
                 % (sys.executable, FREE_PORTS, sys.executable, SLURM_WORKER, ready))
    try:
        def up():
            state = job_state(slurm, job)
            assert state in ("PENDING", "RUNNING", "CONFIGURING"), "job %s is %s: %s" % (
                job, state, (tmp / "job.out").read_text() if (tmp / "job.out").exists() else "")
            return all((ready / ("worker-%d" % i)).exists() for i in range(3))

        wait_for(up, 600, "the three workers")  # three TF processes connecting over gRPC on 2 busy cores
        pids = [int((ready / ("worker-%d" % i)).read_text().split()[0]) for i in range(3)]
        deadline = time.monotonic() + 300
        while True:  # ranks 0 and 1 reach the step's wait some time after their "step" file
            r = tfnative(slurm, ["stack", "--slurm-job", job])
            assert r.returncode == 0, r.stderr
            step = [ln for ln in r.stdout.splitlines() if "TFE_Execute in" in ln]
            # and their verdicts see all of it (a pool thread of theirs may still be busy a moment longer)
            if step and "[rank:0-1]" in step[0] and r.stderr.count("is not in it") >= 2:
                break
            assert time.monotonic() < deadline, "ranks 0 and 1 never waited in the step: " + r.stdout
            time.sleep(1)
        yield {"job": job, "pids": pids, "tree": r.stdout, "stderr": r.stderr, "tmp": tmp}
    finally:
        slurm.end_job(job)


def check_tree(text, job):
    """The merged view: three ranks, rank 2 singled out at its line and named by Slurm."""
    lines = text.splitlines()
    assert lines[0] == "3 processes, 3 threads: rank:0-2", text
    flagged = [ln for ln in lines if "<== OUTLIER" in ln]
    assert len(flagged) == 1, text
    assert "[py] main at %s:%d" % (WORKER, line_of(WORKER, "stall()  # the stalled worker is late")) in flagged[0]
    assert flagged[0].endswith("[rank:2] (1 thread)   <== OUTLIER: rank 2 on node %s (slurm job %s, step 0), pid %s"
                               % (HOST, job, flagged[0].rsplit(" ", 1)[-1])), flagged[0]
    below = lines[lines.index(flagged[0]) + 1]
    assert "[py] stall at %s:%d" % (WORKER, line_of(WORKER, "the stalled worker waits here")) in below
    step = [ln for ln in lines if "[py] main at %s:%d" % (WORKER, line_of(WORKER, "the others wait in the step"))
            in ln]
    assert len(step) == 1 and "[rank:0-1] (2 threads)" in step[0], text


def test_whole_job_in_one_command(slurm, mwms):
    check_tree(mwms["tree"], mwms["job"])
    flagged = next(ln for ln in mwms["tree"].splitlines() if "<== OUTLIER" in ln)
    assert flagged.endswith("pid %d" % mwms["pids"][2])
    err = mwms["stderr"]
    assert "tfnative: job %s: 3 processes on 1 node" % mwms["job"] in err
    assert "Traceback" not in err
    # ranks 0 and 1 wait in the collective for rank 2, which their verdicts name with its line: the step's size
    # and ranks come from Slurm (there is no TF_CONFIG to read), the stalled rank from the node's snapshots
    stalled = ("for rank 2 of its cluster, in a collective: rank 2 (pid %d) is not in it: its main thread is at "
               "%s:%d" % (mwms["pids"][2], os.path.basename(WORKER), line_of(WORKER, "the stalled worker waits here")))
    assert err.count(stalled) == 2, err
    for pid in mwms["pids"]:  # every rank named by Slurm in the node's lines, and left running untraced
        assert "%s: tfnative: process %d rank:" % (HOST, pid) in err
        with open("/proc/%d/status" % pid) as f:
            assert "TracerPid:\t0\n" in f.read()


def test_same_as_stack_then_merge(slurm, mwms, tmp_path):
    """``--documents`` keeps what the nodes sent: each with its Slurm rank; ``merge`` of them, and of
    ``stack --env SLURM_JOB_ID=J`` run on the node by hand, prints the same tree; ``--json -`` is merge's."""
    job = mwms["job"]
    docs_path = tmp_path / "docs.jsonl"
    r = tfnative(slurm, ["stack", "--slurm-job", job, "--json", "-", "--documents", str(docs_path)])
    assert r.returncode == 0, r.stderr
    tree = json.loads(r.stdout)
    assert tree["tfnative_merge"] == 1
    procs = sorted(tree["processes"], key=lambda p: p["label"])
    assert [p["label"] for p in procs] == ["rank:0", "rank:1", "rank:2"]
    for i, p in enumerate(procs):
        assert p["pid"] == mwms["pids"][i]
        assert p["scheduler"] == {"kind": "slurm", "rank": i, "job": job, "step": "0", "node": HOST, "local_rank": i}
    docs = [json.loads(line) for line in docs_path.read_text().splitlines()]
    assert sorted(d["scheduler"]["rank"] for d in docs) == [0, 1, 2]
    assert all("task" not in d for d in docs)  # TF_CONFIG was set inside the process, not by the launcher
    merged = subprocess.run(TFNATIVE + ["merge", str(docs_path)], capture_output=True, text=True, timeout=120,
                            cwd=ROOT)
    assert merged.returncode == 0, merged.stderr
    check_tree(merged.stdout, job)
    local = tfnative(slurm, ["stack", "--env", "SLURM_JOB_ID=%s" % job, "--json", "-"])
    assert local.returncode == 0, local.stderr
    merged = subprocess.run(TFNATIVE + ["merge", "-"], input=local.stdout, capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    check_tree(merged.stdout, job)
    # the README's srun line by hand, on this one node
    fan = subprocess.run(["srun", "--jobid=%s" % job, "--overlap", "-N", "1", "--ntasks-per-node=1", *TFNATIVE,
                          "stack", "--env", "SLURM_JOB_ID=%s" % job, "--json", "-"], capture_output=True, text=True,
                         timeout=300, cwd=ROOT, env=slurm.env(), stdin=subprocess.DEVNULL)
    assert fan.returncode == 0, fan.stderr
    assert max(len(line) for line in fan.stdout.splitlines()) > 1024  # srun passes long lines whole, unlabelled
    merged = subprocess.run(TFNATIVE + ["merge", "-"], input=fan.stdout, capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert merged.returncode == 0, merged.stderr
    check_tree(merged.stdout, job)
    r = tfnative(slurm, ["stack", "--slurm-job", job, "--folded"])
    assert r.returncode == 0, r.stderr
    stalled = [ln for ln in r.stdout.splitlines() if ";[py] stall at " in ln]
    assert len(stalled) == 1 and stalled[0].endswith(" 1"), r.stdout


def one_line_error(r, expected):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == ""
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("tfnative: error: ") and expected in last, r.stderr
    return last


def test_unknown_job(slurm):
    r = tfnative(slurm, ["stack", "--slurm-job", "987654"], timeout=120)
    one_line_error(r, "Slurm job 987654 is unknown")
    r = tfnative(slurm, ["attach", "--slurm-job", "987654"], timeout=120)
    one_line_error(r, "Slurm job 987654 is unknown")


def test_finished_job(slurm, tmp_path):
    os.chmod(str(tmp_path), 0o755)
    job = sbatch(slurm, tmp_path, "true", ntasks=1)
    wait_for(lambda: job_state(slurm, job) in ("COMPLETED", "FAILED", ""), 120, "job %s to end" % job)
    r = tfnative(slurm, ["stack", "--slurm-job", job], timeout=120)
    one_line_error(r, "Slurm job %s is not running (its state is COMPLETED)" % job)


@pytest.fixture(scope="module")
def sleepers(slurm, tmp_path_factory):
    """A 2-task job of plain Python processes (no TensorFlow): for the refusals that need a running job."""
    tmp = tmp_path_factory.mktemp("slurm-sleep")
    os.chmod(str(tmp), 0o755)
    job = sbatch(slurm, tmp, "srun %s -c 'import time; time.sleep(3600)'" % sys.executable, ntasks=2)
    try:
        wait_for(lambda: len(slurm.step_pids(job)) >= 2, 120, "job %s's tasks" % job)
        yield job
    finally:
        slurm.end_job(job)


def test_tfnative_missing_on_the_node(slurm, sleepers):
    r = tfnative(slurm, ["stack", "--slurm-job", sleepers, "--remote-tfnative", "/nonexistent/bin/tfnative"])
    last = one_line_error(r, "tfnative is missing on node %s (/nonexistent/bin/tfnative: " % HOST)
    assert "No such file or directory" in last and "--remote-tfnative" in last
    r = tfnative(slurm, ["attach", "--slurm-job", sleepers, "--remote-tfnative", "/nonexistent/bin/tfnative"])
    one_line_error(r, "tfnative is missing on node %s" % HOST)


def test_overlap_refused_by_the_site(slurm, sleepers, tmp_path):
    """A site's cli_filter that rejects --overlap (it runs in the client: its own slurm.conf suffices)."""
    os.chmod(str(tmp_path), 0o755)
    with open(slurm.conf) as f:
        conf = f.read()
    (tmp_path / "slurm.conf").write_text(conf.replace("ClusterName=tfnative\n",
                                                      "ClusterName=tfnative\nCliFilterPlugins=cli_filter/lua\n"))
    (tmp_path / "cli_filter.lua").write_text("""
function slurm_cli_setup_defaults(options, early_pass) return slurm.SUCCESS end
function slurm_cli_pre_submit(options, pack_offset)
  if options["overlap"] == "set" then
    slurm.log_error("--overlap is not allowed on this cluster")
    return slurm.ERROR
  end
  return slurm.SUCCESS
end
function slurm_cli_post_submit(offset, job_id, step_id) return slurm.SUCCESS end
""")
    env = dict(slurm.env(), SLURM_CONF=str(tmp_path / "slurm.conf"))
    r = tfnative(slurm, ["stack", "--slurm-job", sleepers], env=env, timeout=120)
    last = one_line_error(r, "this Slurm refuses 'srun --overlap' in job %s" % sleepers)
    assert "cli_filter" in last
    r = tfnative(slurm, ["attach", "--slurm-job", sleepers], env=env, timeout=120)
    one_line_error(r, "this Slurm refuses 'srun --overlap'")


def test_srun_missing(slurm, sleepers, tmp_path):
    env = dict(slurm.env(), PATH=str(tmp_path))  # no Slurm client there
    r = tfnative(slurm, ["stack", "--slurm-job", sleepers], env=env, timeout=120)
    one_line_error(r, "--slurm-job: srun is not on PATH")


def _nobody_python():
    """(interpreter, PYTHONPATH) with which user nobody can import the tfnative under test, or None."""
    if shutil.which("runuser") is None or os.geteuid() != 0:
        return None
    import site

    version = "python%d.%d" % sys.version_info[:2]
    paths = import_paths() + site.getsitepackages()
    path = ":".join(paths)
    for python in [os.path.realpath(sys.executable), "/usr/bin/" + version, "/usr/local/bin/" + version]:
        if not os.path.exists(python):
            continue
        probe = subprocess.run(["runuser", "-u", "nobody", "--", "env", "PYTHONPATH=" + path, python, "-c",
                                "import sys, click, psutil, tfnative.snapshot.slurm; print(sys.version_info[:2])"],
                               capture_output=True, text=True, timeout=60, cwd="/")
        if probe.returncode == 0 and probe.stdout.strip() == str(tuple(sys.version_info[:2])):
            return python, path
    return None


def test_not_yours(slurm, sleepers):
    found = _nobody_python()
    if found is None:
        pytest.skip("no interpreter that user nobody can run with this checkout's tfnative importable")
    python, path = found
    r = subprocess.run(["runuser", "-u", "nobody", "--", "env", "SLURM_CONF=" + slurm.conf, "PYTHONPATH=" + path,
                        python, "-m", "tfnative", "stack", "--slurm-job", sleepers],
                       capture_output=True, text=True, timeout=120, cwd="/", stdin=subprocess.DEVNULL)
    one_line_error(r, "Slurm job %s is root's, not yours (nobody)" % sleepers)
    # srun's own refusal, as Slurm says it (tfnative's check aside): a step in another user's job
    r = subprocess.run(["runuser", "-u", "nobody", "--", "env", "SLURM_CONF=" + slurm.conf, "srun",
                        "--jobid=%s" % sleepers, "--overlap", "-N", "1", "true"],
                       capture_output=True, text=True, timeout=120, cwd="/", stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "Access/permission denied" in r.stderr, r.stderr
    from tfnative.snapshot import slurm as slurm_mod

    job = slurm_mod.Job(id=sleepers, numeric=sleepers, state="RUNNING", user="root", nodes=[HOST])
    assert "is not yours" in slurm_mod.step_refused(job, r.stderr.strip().splitlines())


def test_crash_watch_names_the_rank_that_dies(slurm, tmp_path):
    os.chmod(str(tmp_path), 0o755)
    ready = tmp_path / "ready"
    ready.mkdir()
    go = tmp_path / "go"
    job = sbatch(slurm, tmp_path, "srun --kill-on-bad-exit=0 %s %s %s %s 1" % (sys.executable, SEGV, ready, go))
    watch = None
    try:
        wait_for(lambda: len(glob.glob(str(ready / "rank-?"))) == 3, 120, "the three ranks")
        pids = [int((ready / ("rank-%d" % i)).read_text()) for i in range(3)]
        watch = subprocess.Popen(TFNATIVE + ["attach", "--slurm-job", job], cwd=ROOT, env=slurm.env(),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        for line in watch.stderr:
            seen.append(line)
            if sum("watching for a fatal signal" in ln for ln in seen) == 3:
                break
        assert sum("watching for a fatal signal" in ln for ln in seen) == 3, "".join(seen)
        # meanwhile a snapshot of the job: its three ranks (answered by their watches), not the watches' gdbs
        snap = tfnative(slurm, ["stack", "--slurm-job", job, "--json", "-"])
        assert snap.returncode == 0, snap.stderr
        assert sorted(p["pid"] for p in json.loads(snap.stdout)["processes"]) == sorted(pids), snap.stderr
        go.write_text("go")
        out, rest = watch.communicate(timeout=300)
        err = "".join(seen) + rest
        assert watch.returncode == 128 + signal.SIGSEGV, err
        assert "Traceback" not in err
        words = "rank 1 on node %s (slurm job %s, step 0), pid %d" % (HOST, job, pids[1])
        assert "%s: tfnative: the first to die: %s: SIGSEGV" % (HOST, words) in err, err
        rank1 = [ln[len("%s: rank 1: " % HOST):] for ln in err.splitlines() if ln.startswith("%s: rank 1: " % HOST)]
        assert "=== tfnative: fatal signal SIGSEGV, Python %d.%d ===" % sys.version_info[:2] in rank1, err
        assert any("[py] crash at %s:%d" % (SEGV, line_of(SEGV, "the crashing rank dies here")) in ln for ln in rank1)
        for i in (0, 2):  # the others were let go, and run on untraced
            assert "%s: rank %d: tfnative: interrupted by SIGTERM: detaching" % (HOST, i) in err, err
            proc = psutil.Process(pids[i])
            assert proc.status() in (psutil.STATUS_SLEEPING, psutil.STATUS_RUNNING)
            with open("/proc/%d/status" % pids[i]) as f:
                assert "TracerPid:\t0\n" in f.read()
        assert not psutil.pid_exists(pids[1]) or psutil.Process(pids[1]).status() == psutil.STATUS_ZOMBIE
    finally:
        if watch is not None and watch.poll() is None:
            watch.kill()
            watch.wait()
        slurm.end_job(job)


def test_option_refusals_need_no_slurm():
    """Options that do not go together are refused before anything runs (no Slurm needed)."""
    cases = [
        (["stack", "--slurm-job", "5", "--pid", "1"], "--slurm-job finds the job's processes itself"),
        (["stack", "--folded", "--pid", "1"], "--remote-tfnative, --folded and --documents go with --slurm-job"),
        (["attach", "--slurm-job", "5", "--break", "TF_NewSession"], "--break: with --env or --slurm-job attach "
                                                                     "only watches for a fatal signal"),
        (["attach", "--env", "A=1", "--slurm-job", "5"], "--env and --slurm-job: give one"),
        (["stack", "--env", "TFNATIVE_NO_SUCH_VARIABLE=1"], "--env TFNATIVE_NO_SUCH_VARIABLE=1: no process"),
    ]
    for args, expected in cases:
        r = subprocess.run(TFNATIVE + args, capture_output=True, text=True, timeout=120, cwd=ROOT,
                           stdin=subprocess.DEVNULL)
        assert r.returncode != 0 and "Traceback" not in r.stderr, (args, r.stderr)
        assert r.stderr.strip().splitlines()[-1].startswith("tfnative: error: " + expected), (args, r.stderr)


def test_ctrl_c_of_the_crash_watch_lets_every_rank_go(slurm, sleepers):
    """Ctrl-C of ``attach --slurm-job``: srun's standard input closed, the node's watch reads its end and
    its ``attach --pid`` children detach; every rank runs on, untraced; exit 130."""
    watch = subprocess.Popen(TFNATIVE + ["attach", "--slurm-job", sleepers], cwd=ROOT, env=slurm.env(),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        for line in watch.stderr:
            seen.append(line)
            if sum("watching for a fatal signal" in ln for ln in seen) == 2:
                break
        assert sum("watching for a fatal signal" in ln for ln in seen) == 2, "".join(seen)
        watch.send_signal(signal.SIGINT)
        out, rest = watch.communicate(timeout=120)
        err = "".join(seen) + rest
        assert watch.returncode == 130, err
        assert "Traceback" not in err and err.count("interrupted by SIGTERM: detaching") == 2, err
        for pid in slurm.step_pids(sleepers):
            assert psutil.Process(pid).status() in (psutil.STATUS_SLEEPING, psutil.STATUS_RUNNING)
            with open("/proc/%d/status" % pid) as f:
                assert "TracerPid:\t0\n" in f.read()
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()


def _fake_ranks(tmp_path, job, crash):
    """Two slurm_rank_segv.py processes with Slurm's variables set by hand (no Slurm): ranks 0 and 1."""
    ready = tmp_path / "ready"
    ready.mkdir()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, SLURM_JOB_ID=job, SLURM_PROCID=str(rank), SLURM_STEP_ID="0", SLURMD_NODENAME=HOST)
        procs.append(subprocess.Popen([sys.executable, SEGV, str(ready), str(tmp_path / "go"), str(crash)], env=env,
                                      cwd=str(tmp_path), stdin=subprocess.DEVNULL))
    wait_for(lambda: len(glob.glob(str(ready / "rank-?"))) == 2, 60, "the two ranks")
    return procs


def _watching(watch, count):
    seen = []
    for line in watch.stderr:
        seen.append(line)
        if sum("watching for a fatal signal" in ln for ln in seen) == count:
            break
    assert sum("watching for a fatal signal" in ln for ln in seen) == count, "".join(seen)
    return seen


def test_watch_env_on_one_machine(tmp_path):
    """``attach --env`` without Slurm: rank 1 dies, named by its environment; the node form
    (``--until-eof``) lets every process go at its input's end, and exits cleanly (no abort at exit)."""
    job = "local%d" % os.getpid()
    procs = _fake_ranks(tmp_path, job, crash=1)
    try:
        # as on a node: --until-eof, its input left open (a reader of it must not hold up the exit)
        watch = subprocess.Popen(TFNATIVE + ["attach", "--env", "SLURM_JOB_ID=" + job, "--until-eof"], cwd=ROOT,
                                 text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen = _watching(watch, 2)
        (tmp_path / "go").write_text("go")
        rest = watch.stderr.read()
        err = "".join(seen) + rest
        assert watch.wait(timeout=120) == 128 + signal.SIGSEGV, err
        watch.stdin.close()
        assert ("tfnative: the first to die: rank 1 on node %s (slurm job %s, step 0), pid %d: SIGSEGV"
                % (HOST, job, procs[1].pid)) in err, err
        assert "rank 0: tfnative: interrupted by SIGTERM: detaching" in err and "Fatal Python error" not in err
        assert procs[1].wait(timeout=30) == -signal.SIGSEGV and procs[0].poll() is None
        # its standard input's end is the word to let go
        watch = subprocess.Popen(TFNATIVE + ["attach", "--env", "SLURM_JOB_ID=" + job, "--until-eof"], cwd=ROOT,
                                 text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen = _watching(watch, 1)
        watch.stdin.close()
        rest = watch.stderr.read()
        err = "".join(seen) + rest
        assert watch.wait(timeout=120) == 143, err
        assert "rank 0: tfnative: interrupted by SIGTERM: detaching" in err and "Fatal Python error" not in err, err
        with open("/proc/%d/status" % procs[0].pid) as f:
            assert "TracerPid:\t0\n" in f.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
