"""``tfnative watch`` (issue #37): a hang reported in time with the right verdict, healthy jobs never reported,
``--on-hang kill``, ``--json``/``--out``, ``--on-hang core``, a straggler and the outlier rank, the job's exit
status, kill -9 of the watcher.

Real programs only: ``rlock_order`` of ``tests/hangs`` (every hang program there under ``watch``:
``test_watch_hangs.py``) and ``tests/scripts/watch_job.py`` (healthy jobs, ranks).  Each watcher runs in a
session of its own (its launched job in it), with a small ``--hang-after`` and ``--interval``; its standard
output goes to a file the test reads as it grows.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tfnative.core.docschema import check_document

from ..kernels import build_op
from ..utils import (
    ROOT,
    TFNATIVE,
    assert_gone,
    assert_running_untraced,
    has_tensorflow,
    line_of,
    run_tfnative,
    script,
    state_of,
    tracer_of,
    wait_for_file,
)

HANGS = os.path.join(ROOT, "tests", "hangs")
JOB = script("watch_job.py")
SNAPSHOT_SLACK = 5.0  # seconds a report may take beyond hang-after + 2 intervals on 2 loaded cores


class Watcher:
    """``tfnative watch ARGS`` in a session of its own; its outputs in files under ``tmp``."""

    def __init__(self, tmp, args, name="w", env=None):
        self.out_path, self.err_path = os.path.join(str(tmp), name + ".out"), os.path.join(str(tmp), name + ".err")
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(TFNATIVE + args, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         cwd=ROOT, start_new_session=True, env=env)
        self.started = time.monotonic()

    def out(self):
        with open(self.out_path) as f:
            return f.read()

    def err(self):
        with open(self.err_path) as f:
            return f.read()

    def wait_for(self, text, timeout, where="out"):
        """Seconds until ``text`` shows in the output (stdout, or stderr with ``where="err"``)."""
        t0 = time.monotonic()
        while text not in (self.out() if where == "out" else self.err()):
            assert time.monotonic() - t0 < timeout, "no %r within %.0f s:\n%s\n%s" % (text, timeout, self.out(),
                                                                                    self.err())
            assert self.proc.poll() is None, "the watcher exited with %s:\n%s\n%s" % (self.proc.returncode,
                                                                                     self.out(), self.err())
            time.sleep(0.1)
        return time.monotonic() - t0

    def finish(self, timeout=60):
        """The watcher's exit status, once it has ended by itself."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("the watcher did not end:\n%s\n%s" % (self.out(), self.err())) from None

    def tree(self):
        try:
            return [psutil.Process(self.proc.pid)] + psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def kill_all(self):
        procs = self.tree()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for p in procs:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        self.proc.wait()
        assert_gone(procs)


def documents(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_a_deadlock_is_reported_in_time_then_watched_on_and_kill_9_leaves_the_job(tmp_path):
    """rlock_order launched: the hang report within --hang-after + 2 intervals of the hang, on stdout, in --json
    (JSON Lines, schema v1, kind "hang", the triage ``stack`` gives) and --out; the watch goes on without a
    second report while the stacks stay; kill -9 of the watcher leaves the job running, untraced."""
    ready = str(tmp_path / "ready")
    hang_after, interval = 3.0, 1.0
    out_dir, json_path = tmp_path / "reports", tmp_path / "hang.jsonl"
    w = Watcher(tmp_path, ["watch", "--hang-after", str(hang_after), "--interval", str(interval), "--json",
                           str(json_path), "--out", str(out_dir), os.path.join(HANGS, "rlock_order.py"), ready])
    try:
        job = int(wait_for_file(ready, 60, w.proc))
        t_ready = time.monotonic()
        w.wait_for("hang: no process of the job has progressed", hang_after + 2 * interval + SNAPSHOT_SLACK + 5)
        took = time.monotonic() - t_ready
        assert took <= hang_after + 2 * interval + SNAPSHOT_SLACK, took
        text = w.out()
        assert "=== tfnative: hang: pid %d made no progress" % job in text
        assert "verdict: deadlock" in text
        (doc,) = documents(json_path)
        check_document(doc)
        assert doc["pid"] == job and doc["events"][0]["kind"] == "hang"
        assert doc["triage"]["pattern"] == "deadlock"
        # while watched, the job is traced by the crash watch: another debugger is told who holds it
        r = run_tfnative(["stack", "--pid", str(job), "--json", "-"], timeout=120)
        assert r.returncode == 2 and "is already being traced by PID %d (tfnative)" % w.proc.pid in r.stderr, r.stderr
        assert sorted(os.listdir(out_dir)) == ["hang-1.html", "hang-1.jsonl", "hang-1.txt"]
        assert documents(out_dir / "hang-1.jsonl")[0]["triage"] == doc["triage"]
        assert "<html" in (out_dir / "hang-1.html").read_text().lower()
        # --on-hang report: the watch goes on, and the same stacks are not reported again
        time.sleep(hang_after + 2 * interval)
        assert w.proc.poll() is None
        assert w.out().count("hang: no process of the job") == 1
        os.kill(w.proc.pid, signal.SIGKILL)
        w.proc.wait()
        assert_running_untraced(job)
        # the triage is the one stack gives
        r = run_tfnative(["stack", "--pid", str(job), "--json", "-"], timeout=120)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["triage"]["verdict"] == doc["triage"]["verdict"]
    finally:
        w.kill_all()


def test_report_again_only_after_progress_and_other_stacks(tmp_path):
    """A job stuck 8 s in one wait, then for good in another: two reports, each at its own line; between them
    and after the second, nothing more.  (The first wait outlasts --hang-after by 6 s, so that the first report
    is whole before the job moves on even on a loaded machine.)"""
    w = Watcher(tmp_path, ["watch", "--hang-after", "2", "--interval", "0.5", JOB, "two_hangs",
                           str(tmp_path / "ready"), "8", "--json", str(tmp_path / "hang.jsonl")])
    # (--json after the script's arguments is the script's: its file stays absent)
    try:
        wait_for_file(str(tmp_path / "ready"), 60, w.proc)
        w.wait_for("watch_job.py:%d" % line_of(JOB, "# hangs here: first"), 20)
        w.wait_for("watch_job.py:%d" % line_of(JOB, "# hangs here: second"), 20)
        time.sleep(3)
        text = w.out()
        assert text.count("hang: no process of the job") == 2, text
        first, second = text.split("hang: no process of the job")[1:]
        assert "# hangs here" not in first  # (the source lines are not printed; the lines' numbers are)
        assert "watch_job.py:%d" % line_of(JOB, "# hangs here: second") not in first
        assert "watch_job.py:%d" % line_of(JOB, "# hangs here: first") not in second
        assert not os.path.exists(tmp_path / "hang.jsonl")
    finally:
        w.kill_all()


HEALTHY = ["sleep_loop", "long_op", "busy_child", "queue_pipeline"]


def test_healthy_jobs_are_never_reported(tmp_path):
    """A step loop sleeping at one line, one long op, a parent waiting for a busy child, a slow queue pipeline:
    watched side by side for 4 times --hang-after, none reported; SIGTERM to the watcher reaches the job,
    and the watcher ends with the job's status (killed by SIGTERM: 143)."""
    hang_after = 2.0
    watchers = {}
    try:
        for mode in HEALTHY:
            watchers[mode] = Watcher(tmp_path, ["watch", "--hang-after", str(hang_after), "--interval", "0.5",
                                                JOB, mode, str(tmp_path / ("ready-" + mode))], name=mode)
        for mode, w in watchers.items():
            wait_for_file(str(tmp_path / ("ready-" + mode)), 60, w.proc)
        time.sleep(4 * hang_after)
        for mode, w in watchers.items():
            assert w.proc.poll() is None, (mode, w.err())
            assert "hang" not in w.out() and "hang" not in w.err(), (mode, w.out(), w.err())
            os.kill(w.proc.pid, signal.SIGTERM)
        for mode, w in watchers.items():
            assert w.finish(30) == 128 + signal.SIGTERM, (mode, w.err())
            assert "the job was killed by SIGTERM" in w.err(), (mode, w.err())
    finally:
        for w in watchers.values():
            w.kill_all()


def test_a_straggler_is_named_then_the_outlier_rank(tmp_path):
    """Three ranks (--pid each); rank 2 deadlocks at once, ranks 0 and 1 step for 6 s then wait for it: rank 2
    is named a straggler with its stack before the job stalls, then the hang report names it the outlier."""
    ranks = []
    w = None
    try:
        for i in range(3):
            env = dict(os.environ, RANK=str(i), WORLD_SIZE="3")
            ranks.append(subprocess.Popen([sys.executable, JOB, "rank", str(tmp_path / ("rank-%d" % i)), str(i)],
                                          env=env, stdin=subprocess.DEVNULL))
        for i, p in enumerate(ranks):
            wait_for_file(str(tmp_path / ("rank-%d" % i)), 60, p)
        pids = [a for p in ranks for a in ("--pid", str(p.pid))]
        w = Watcher(tmp_path, ["watch", *pids, "--hang-after", "3", "--interval", "0.5", "--straggler-after", "2",
                               "--on-hang", "kill", "--json", str(tmp_path / "hang.jsonl")])
        assert w.finish(60) == 124, w.err()
        text = w.out()
        straggler = "straggler: process %d has not progressed" % ranks[2].pid
        assert straggler in text, text
        assert text.index(straggler) < text.index("hang: no process of the job")
        assert text.count("straggler:") == 1
        before = text.split("hang: no process")[0]
        assert "watch_job.py:%d" % line_of(JOB, "# hangs here: straggler") in before
        assert "verdict: " in before  # the straggler's own verdict
        assert "the outlier: rank:2 (rank 2 on host" in text and "pid %d" % ranks[2].pid in text
        assert "), at rank at watch_job.py:%d\n" % line_of(JOB, "stuck(lock)") in text
        docs = documents(tmp_path / "hang.jsonl")
        assert sorted(d["pid"] for d in docs) == sorted(p.pid for p in ranks)
        assert all(d["events"][0]["kind"] == "hang" for d in docs)
        for p in ranks:  # --on-hang kill ended every rank
            assert p.wait(10) is not None
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.wait()
        if w is not None:
            w.kill_all()


@pytest.mark.parametrize("mode,arg,status,said", [("exit", 3, 3, "exited with status 3"),
                                                   ("signal", int(signal.SIGABRT), 128 + int(signal.SIGABRT),
                                                    "was killed by SIGABRT")])
def test_the_watch_ends_with_the_job_and_its_status(tmp_path, mode, arg, status, said):
    w = Watcher(tmp_path, ["watch", "--hang-after", "2", "--interval", "0.5", JOB, mode,
                           str(tmp_path / "ready"), str(arg)])
    try:
        assert w.finish(60) == status, w.err()
        assert "tfnative: watch: the job %s" % said in w.err()
        assert "hang" not in w.out()
    finally:
        w.kill_all()


def test_on_hang_core_writes_a_core_of_every_process_and_watches_on(tmp_path):
    """--pid of a hung process, --on-hang core --out DIR: the report and a core; the process runs on, untraced;
    the watch goes on until the process is gone, then ends with 0."""
    ready = str(tmp_path / "ready")
    job = subprocess.Popen([sys.executable, os.path.join(HANGS, "rlock_order.py"), ready], stdin=subprocess.DEVNULL)
    w = None
    try:
        wait_for_file(ready, 60, job)
        out_dir = tmp_path / "out"
        w = Watcher(tmp_path, ["watch", "--pid", str(job.pid), "--hang-after", "2", "--interval", "0.5",
                               "--on-hang", "core", "--out", str(out_dir)])
        w.wait_for("core file(s)", 120, where="err")
        core = out_dir / ("core-1.%d" % job.pid)
        with open(core, "rb") as f:
            head = f.read(18)
        assert head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 4  # ET_CORE
        # running on, traced again by the crash watch (the watcher's tracer thread), no longer by gdb
        watcher = [t.id for t in psutil.Process(w.proc.pid).threads()]
        deadline = time.monotonic() + 10
        while tracer_of(job.pid) not in watcher and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tracer_of(job.pid) in watcher and state_of(job.pid) in ("S", "R")
        assert w.proc.poll() is None
        job.kill()
        job.wait()
        assert w.finish(30) == 0
        assert "every watched process has exited" in w.err()
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        if w is not None:
            w.kill_all()


@pytest.mark.parametrize("args,said", [
    ([], "missing SCRIPT"),
    (["--pid", "999999999"], "no process"),
    (["no/such/script.py"], "no/such/script.py: no such file"),
    (["--pid", "1", "x.py"], "not both"),
    (["--children", "-5"], "no process with pid -5"),
    (["--hang-after", "2", "--interval", "3", "--pid", "1"], "--interval 3 is longer than --hang-after 2"),
    (["--slurm-job", "12", "--pid", "1"], "--slurm-job finds the job's processes itself"),
    (["--slurm-job", "12", "x.py"], "--slurm-job finds the job's processes itself"),
    (["--remote-tfnative", "tfnative", "--pid", "1"], "--remote-tfnative goes with --slurm-job"),
    (["--slurm-job", "12", "--remote-tfnative", "'"], "--remote-tfnative \"'\": No closing quotation"),
    (["--slurm-job", "not-a-job"], "a Slurm job id is a number"),
    (["--slurm-job", "12", "--hang-after", "2", "--interval", "3"], "--interval 3 is longer than --hang-after 2"),
])
def test_bad_input_is_one_line(args, said):
    r = run_tfnative(["watch", *args], timeout=60)
    assert r.returncode not in (0, 70), r.stderr
    assert said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_signals_reach_the_job_as_without_tfnative_and_ctrl_c_ends_the_watch(tmp_path):
    """SIGUSR1 sent to the watcher reaches the job; the terminal's Ctrl-C goes to the whole foreground group:
    the job gets its KeyboardInterrupt and dies of SIGINT, the watch ends with that status."""
    w = Watcher(tmp_path, ["watch", "--hang-after", "2", "--interval", "0.5", JOB, "sleep_loop",
                           str(tmp_path / "ready")])
    try:
        wait_for_file(str(tmp_path / "ready"), 60, w.proc)
        os.kill(w.proc.pid, signal.SIGUSR1)  # a signal sent to the watcher is passed on to the job
        deadline = time.monotonic() + 10
        while not os.path.exists(str(tmp_path / "ready.usr1")):
            assert time.monotonic() < deadline, "the job never got the SIGUSR1:\n%s" % w.err()
            time.sleep(0.05)
        assert w.proc.poll() is None
        os.killpg(w.proc.pid, signal.SIGINT)
        assert w.finish(30) == 128 + signal.SIGINT, w.err()
        assert "the job was killed by SIGINT" in w.err()
    finally:
        w.kill_all()


def test_the_loop_runs_the_callers_hook_and_take(tmp_path):
    """The Python API a crash catcher plugs into: ``watch(job, opts, out, err, Plugins(take=, hook=))`` calls
    the hook each interval with the job's processes (a status it returns ends the watch) and takes the hang
    report's snapshots through ``take``."""
    import io

    from tfnative.cli.stack import stack_document
    from tfnative.snapshot.options import StackOptions
    from tfnative.watch.job import Job
    from tfnative.watch.loop import Plugins, watch
    from tfnative.watch.options import WatchOptions

    ready = str(tmp_path / "ready")
    job = subprocess.Popen([sys.executable, os.path.join(HANGS, "rlock_order.py"), ready], stdin=subprocess.DEVNULL)
    try:
        wait_for_file(ready, 60, job)
        seen, taken = [], []

        def hook(pids):
            seen.append(list(pids))
            return 7 if taken else None

        def take(pid):
            taken.append(pid)
            return stack_document(pid, StackOptions(), io.StringIO())

        out, err = io.StringIO(), io.StringIO()
        assert watch(Job([job.pid]), WatchOptions(hang_after=1.0, interval=0.3), out, err,
                     Plugins(take=take, hook=hook)) == 7
        assert taken == [job.pid] and seen[0] == [job.pid]
        assert "=== tfnative: hang: pid %d made no progress" % job.pid in out.getvalue()
        assert_running_untraced(job.pid)
    finally:
        job.kill()
        job.wait()


def test_a_process_that_exits_at_the_report_is_named_and_the_watch_goes_on(tmp_path):
    """Two hung processes; one exits as its snapshot is taken: the other is reported, the gone one named in a
    line, and the watch goes on (until the hook ends it)."""
    import io

    from tfnative.cli.stack import stack_document
    from tfnative.snapshot.options import StackOptions
    from tfnative.watch.job import Job
    from tfnative.watch.loop import Plugins, Watch
    from tfnative.watch.options import WatchOptions

    jobs = []
    try:
        for i in range(2):
            ready = str(tmp_path / ("ready-%d" % i))
            jobs.append(subprocess.Popen([sys.executable, os.path.join(HANGS, "rlock_order.py"), ready],
                                         stdin=subprocess.DEVNULL))
            wait_for_file(ready, 60, jobs[-1])
        doomed, kept = jobs
        ticks = []

        def take(pid):
            if pid == doomed.pid:
                doomed.kill()
                doomed.wait()
            return stack_document(pid, StackOptions(), io.StringIO())

        def hook(pids):
            ticks.append(list(pids))
            return 0 if len(ticks) > 2 and doomed.pid not in pids else None

        out, err = io.StringIO(), io.StringIO()
        w = Watch(Job([doomed.pid, kept.pid]), WatchOptions(hang_after=1.0, interval=0.3), out, err,
                  Plugins(take=take, hook=hook))
        assert w.run() == 0
        assert "tfnative: pid %d not reported: " % doomed.pid in err.getvalue()
        assert "=== tfnative: hang: pid %d made no progress" % kept.pid in out.getvalue()
        assert ticks[-1] == [kept.pid]
        assert_running_untraced(kept.pid)
    finally:
        for p in jobs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_crash_gives_attachs_report_then_the_jobs_own_status(tmp_path):
    """A launched job that dies of SIGSEGV: the crash report (the signal, the faulting Python lines innermost
    first, the triage) on stdout and in --json and --out, then the job's own status (139), the job's own
    output unchanged; with --no-crash-watch the same status and no report."""
    segv = script("segv.py")
    out_dir, json_path = tmp_path / "out", tmp_path / "crash.jsonl"
    w = Watcher(tmp_path, ["watch", "--hang-after", "30", "--json", str(json_path), "--out", str(out_dir), segv])
    try:
        assert w.finish(60) == 128 + signal.SIGSEGV, w.err()
        text = w.out()
        assert text.count("tfnative: watch: crash: process ") == 1, text
        assert "SIGSEGV" in text and "the job was killed by SIGSEGV" in w.err()
        (doc,) = documents(json_path)
        check_document(doc)
        (event,) = doc["events"]
        assert (event["kind"], event["signal"]) == ("signal", "SIGSEGV")
        py = [(f["function"], f["line"]) for t in event["threads"] for f in t["frames"]
              if f["kind"] == "python" and f["file"] == segv]
        assert py[:3] == [("poke", line_of(segv, "ctypes.string_at(0)")), ("main", line_of(segv, "    poke()")),
                          ("<module>", line_of(segv, "main()\n"))], py
        assert "poke at %s:%d" % (segv, line_of(segv, "ctypes.string_at(0)")) in text
        assert sorted(os.listdir(out_dir)) == ["crash-1.jsonl", "crash-1.txt"]
    finally:
        w.kill_all()
    plain = Watcher(tmp_path, ["watch", "--no-crash-watch", "--hang-after", "30", segv], name="plain")
    try:
        assert plain.finish(60) == 128 + signal.SIGSEGV, plain.err()
        assert "crash:" not in plain.out() and "the job was killed by SIGSEGV" in plain.err()
    finally:
        plain.kill_all()


@pytest.mark.skipif(not has_tensorflow(), reason="tensorflow is not installed in this Python")
def test_a_tf_check_failure_under_watch_names_the_op_and_tfs_log_line(tmp_path):
    """A real TensorFlow CHECK abort (TF issue 67527) in a running process watched with --pid: the report names
    the op and TensorFlow's fatal log line, read from memory; the watch ends with the crash's status.  With --out,
    the crash's reproducer (issue #45): crash-N.repro.py beside the report, checked after it in a fresh process
    (it dies the same way), in crash-N.jsonl's triage."""
    prog = script("tf_check_failed.py")
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2); exec(open(%r).read())" % prog],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    json_path = tmp_path / "crash.jsonl"
    out_dir = tmp_path / "out"
    w = Watcher(tmp_path, ["watch", "--pid", str(job.pid), "--hang-after", "60", "--json", str(json_path),
                           "--out", str(out_dir)])
    try:
        assert w.finish(180) == 128 + signal.SIGABRT, w.err()
        assert job.wait(30) == -signal.SIGABRT
        (doc,) = documents(json_path)
        (event,) = doc["events"]
        assert event["signal"] == "SIGABRT" and "Check failed: d < dims() (1 vs. 0)" in (event["log"] or "")
        kernel = next(f for f in event["threads"][0]["frames"] if f.get("op"))
        assert kernel["op"]["type"] == "FusedPadConv2D" and doc["triage"]["op"]["type"] == "FusedPadConv2D"
        assert "FusedPadConv2D" in w.out() and "Check failed: d < dims() (1 vs. 0)" in w.out()
        assert sorted(os.listdir(out_dir)) == ["crash-1.jsonl", "crash-1.repro.py", "crash-1.txt"]
        assert re.search(r"^tfnative: repro: crash-1\.repro\.py \(\d+ lines\) dies of SIGABRT in op FusedPadConv2D, "
                         r"as the original did: .*Check failed: d < dims\(\) \(1 vs\. 0\)$", w.err(), re.M), w.err()
        (again,) = documents(out_dir / "crash-1.jsonl")
        assert again["triage"]["reproducer"]["check"]["outcome"] == "same", again["triage"]["reproducer"]
        assert "tf.raw_ops.FusedPadConv2D(" in (out_dir / "crash-1.repro.py").read_text()
    finally:
        w.kill_all()
        if job.poll() is None:
            job.kill()
            job.wait()


@pytest.mark.skipif(not has_tensorflow() or shutil.which("g++") is None, reason="needs tensorflow and g++")
def test_a_crash_in_the_users_own_g_kernel_under_watch(tmp_path):
    """A ``-g`` custom op that reads out of bounds: no gdb can take over from the crash watch's tracer, so the
    kernel frame is named from the library's symbol table (a warning says the source lines need gdb), marked as
    the user's kernel with its op, the eager call's line below it."""
    so = build_op("zero_out_oob", "g")
    case = script("kernel_case.py")
    json_path = tmp_path / "crash.jsonl"
    w = Watcher(tmp_path, ["watch", "--hang-after", "60", "--json", str(json_path), case, so, "oob", "eager"])
    try:
        assert w.finish(180) == 128 + signal.SIGSEGV, w.err()
        (doc,) = documents(json_path)
        (event,) = doc["events"]
        frames = event["threads"][0]["frames"]
        assert frames[0]["function"].startswith("ZeroOutOobOp::Compute") and frames[0]["class"] == "user"
        assert frames[0]["op"]["type"] == "ZeroOutOob" and doc["triage"]["op"]["type"] == "ZeroOutOob"
        assert any("zero_out_oob.so has debug info only gdb reads" in w_ for w_ in event["warnings"])
        assert doc["triage"]["nearest_user_frame"]["line"] == line_of(case, "# tfn: oob")
        assert "<-- your kernel, op ZeroOutOob" in w.out()
    finally:
        w.kill_all()
