"""Issue #37: every hang program of ``tests/hangs`` under ``tfnative watch``.

Each program of ``test_hangs.PROGRAMS`` is launched under ``watch --hang-after H --interval 1 --on-hang kill
--json FILE PROGRAM READY`` (a forking program too: the watch is on the launched process and its
descendants).  A hang must be reported within H + 2 intervals (+ ``SNAPSHOT_SLACK``) of the program's ready
file, with, in the JSON Lines documents (event kind "hang", one per process), the verdict ``test_hangs``
expects of ``stack`` (``test_hangs.EXPECTED``: the same pattern, blocking thread, user line, resource); then
the job is ended, the watch exits 124 and nothing of the job is left.  The controls (a busy loop, busy
matmuls) are never reported over several times their ``--hang-after``; SIGTERM to the watcher then ends
them, and the watch, with 143.  The programs without TensorFlow are also watched with ``--no-crash-watch``
(the snapshot by ``stack``'s own hold rather than the crash catcher's).  A multi-process job with a missing
peer (``tests/scripts/mwms_missing_rank.py``: workers 0 and 1 of a 3-worker cluster, worker 2 never started)
is reported with worker 2 named on each worker.

CI time: the programs run under their watches ``PARALLEL`` at a time (a module fixture starts every selected
one at the first test's request), each with a ``--hang-after`` only as long as its own timed wake-ups need.
"""

import os
import re
import shutil
import signal
import subprocess
import threading
import time

import psutil
import pytest

from tfnative.core.docschema import check_document

from ..utils import ROOT, assert_gone, has_tensorflow, line_of, wait_for_file
from .test_hangs import EXPECTED, PROGRAMS, TF, chain, marker, path_of
from .test_watch import SNAPSHOT_SLACK, Watcher, documents

INTERVAL = 1.0
# name -> --hang-after: 2 s without TensorFlow; TensorFlow's programs 3 s (their pools' and tf.data's threads
# wake now and then only to wait again); gRPC's pollers and timers wake every 5 s: above that, so that each
# wake-up judged progress would hide the hang.  In the order they are started (the longest first).
HANG_AFTER = {
    "mwms_missing_peer": 7.0,
    "mwms_missing_rank": 7.0,
    "pool_map_fork": 3.0,
    "process_after_predict": 3.0,
    "rlock_order": 2.0,
    "fork_matmul": 3.0,
    "data_map_event": 3.0,
    "data_generator_queue": 3.0,
    "gil_mutex": 2.0,
    "tf1_session_in_py_func": 3.0,
    "function_pyfunc_pool": 3.0,
    "fifo_eager": 3.0,
    "fifo_function": 3.0,
    "tf1_queue_runner": 3.0,
    "busy_control": 2.0,
    "busy_matmul_control": 2.0,
}
# a job of several processes beyond PROGRAMS -> its launcher (argv: READY_DIR; it writes READY_DIR/ready)
JOBS = {"mwms_missing_rank": os.path.join(ROOT, "tests", "scripts", "mwms_missing_rank.py")}
assert set(HANG_AFTER) == set(PROGRAMS) | set(JOBS)
# also watched with --no-crash-watch (the hang's snapshot by stack's own hold, not the crash catcher's): cheap
NO_CRASH_WATCH = "+no-crash-watch"
UNCAUGHT = ["rlock_order" + NO_CRASH_WATCH, "gil_mutex" + NO_CRASH_WATCH]
# The runs in phases, each started once the one before has ended, in order within a phase: the --no-crash-watch
# ones (gdb reads gil_mutex's library: slow beside TensorFlow's imports), then the controls (busy: they load
# every core) each run beside nothing timed.
PHASES = [[key for key in HANG_AFTER if key not in ("busy_control", "busy_matmul_control")], UNCAUGHT,
          ["busy_control", "busy_matmul_control"]]
KILL_GRACE = 10.0  # watch's: --on-hang kill sends SIGKILL this long after SIGTERM
CONTROLS = ("busy_control", "busy_matmul_control")
CONTROL_WATCH = 4  # a control is watched for this many times its --hang-after
PARALLEL = 3  # watches at a time (2 cores: at most two of them import TensorFlow at once in practice)
# the verdict line the text report prints (the main thread's marked line follows it)
VERDICT_TEXT = {
    "data_map_event": "verdict: the main thread waits for the next element of a tf.data iterator at ",
    "mwms_missing_peer": "verdict: the main thread waits at ",
}


def usable(key):
    """Whether this machine can run ``key`` (TensorFlow; g++, and gdb for stack's own path, for gil_mutex)."""
    name = key.split("+")[0]
    tf = name in JOBS or PROGRAMS[name][0]
    if name == "gil_mutex" and (shutil.which("g++") is None or key.endswith(NO_CRASH_WATCH) and not shutil.which(
            "gdb")):
        return False
    return has_tensorflow() or not tf


class Run:
    """One program under one watch: what the test checks."""

    def __init__(self, key):
        self.key, self.name = key, key.split("+")[0]
        self.hang_after = HANG_AFTER[self.name]
        self.error = None  # the exception the run raised (re-raised by the test)
        self.pid = None  # the launched program's
        self.report_s = None  # seconds from the ready file to the hang report on stdout
        self.end_s = None  # seconds from the report to the watch's end
        self.status = None
        self.out = self.err = ""
        self.docs = []
        self.done = threading.Event()


def cmdline(p):
    try:
        return p.cmdline()
    except psutil.Error:  # (gone meanwhile)
        return []


def run_one(run, tmp):
    name, hang_after = run.name, run.hang_after
    ready, json_path = os.path.join(tmp, "ready"), os.path.join(tmp, "hang.jsonl")
    script = JOBS.get(name) or path_of(name)
    argv = [script, tmp if name in JOBS else ready]
    if name == "gil_mutex":  # the C library, built here
        argv.append(os.path.join(tmp, "gil_mutex.so"))
        subprocess.run(["g++", "-shared", "-fPIC", "-O0", "-g", "-o", argv[-1],
                        os.path.join(os.path.dirname(path_of(name)), "gil_mutex.cpp"), "-lpthread"], check=True)
    w = Watcher(tmp, ["watch", *(["--no-crash-watch"] if run.key.endswith(NO_CRASH_WATCH) else []),
                      "--hang-after", str(hang_after), "--interval", str(INTERVAL), "--on-hang", "kill",
                      "--json", json_path, *argv], name=name)
    try:
        wait_for_file(ready, 240, w.proc)
        t_ready = time.monotonic()
        procs = w.tree()[1:]  # the job's processes (a forking program's children are there by its ready file)
        (job,) = [p for p in psutil.Process(w.proc.pid).children() if script in cmdline(p)]
        run.pid = job.pid
        if name in CONTROLS:
            deadline = t_ready + CONTROL_WATCH * hang_after
            while time.monotonic() < deadline:
                assert w.proc.poll() is None, "the watcher exited with %s:\n%s" % (w.proc.returncode, w.err())
                time.sleep(0.2)
            os.kill(w.proc.pid, signal.SIGTERM)
        else:
            w.wait_for("hang: no process of the job", hang_after + 2 * INTERVAL + SNAPSHOT_SLACK + 60)
            run.report_s = time.monotonic() - t_ready
        run.status = w.finish(60)
        if run.report_s is not None:
            run.end_s = time.monotonic() - t_ready - run.report_s
        run.out, run.err = w.out(), w.err()
        if os.path.exists(json_path):
            run.docs = documents(json_path)
        assert_gone(procs)  # --on-hang kill (a control: SIGTERM passed on) ended every process of the job
    finally:
        w.kill_all()


@pytest.fixture(scope="module")
def watched(request, tmp_path_factory):
    """name -> Run, once done: at the first request, every program this session selected from this module is
    started, ``PARALLEL`` at a time, the longest first, phase by phase (``PHASES``)."""
    runs = {}
    threads = []
    stopping = threading.Event()  # at teardown: no new run starts (those under way end by themselves)

    def start():
        wanted = {item.callspec.params["name"] for item in request.session.items
                  if item.module is request.module and hasattr(item, "callspec") and "name" in item.callspec.params}
        phases = [[key for key in phase if key in wanted and usable(key)] for phase in PHASES]
        tmp = {}
        for key in sum(phases, []):
            runs[key] = Run(key)
            tmp[key] = str(tmp_path_factory.mktemp(runs[key].name))  # (here: mktemp is no thread's to call)
        lock = threading.Lock()

        def worker():
            for i, todo in enumerate(phases):
                for key in sum(phases[:i], []):  # the phases before: ended (each run is bounded)
                    runs[key].done.wait(900)
                while True:
                    with lock:
                        if stopping.is_set():
                            return
                        if not todo:
                            break
                        run = runs[todo.pop(0)]
                    try:
                        run_one(run, tmp[run.key])
                    except BaseException as exc:  # re-raised by the program's test
                        run.error = exc
                    finally:
                        run.done.set()

        for _ in range(PARALLEL):
            threads.append(threading.Thread(target=worker, daemon=True))
            threads[-1].start()

    def get(name):
        if not threads:
            start()
        run = runs[name]
        assert run.done.wait(600), "%s: its watch never ended" % name
        if run.error is not None:
            raise run.error
        stalled = re.search(r"has progressed for ([0-9.]+ s)", run.out)
        print("%s: --hang-after %g, reported %s after its ready file%s" % (
            name, run.hang_after, "%.1f s" % run.report_s if run.report_s is not None else "never",
            " (stalled for %s)" % stalled.group(1) if stalled else ""))
        return run

    try:
        yield get
    finally:
        stopping.set()
        for t in threads:
            t.join(600)
        assert not any(t.is_alive() for t in threads)


HANGS = [name for name in HANG_AFTER if name not in CONTROLS and name not in JOBS]


def assert_reported(run):
    """Reported in time, ``--on-hang kill`` ended the job; the documents' schema, kind and printed verdicts."""
    limit = run.hang_after + 2 * INTERVAL + SNAPSHOT_SLACK
    assert run.report_s <= limit, "reported %.1f s after the ready file (at most %.1f s)" % (run.report_s, limit)
    assert run.status == 124, run.err
    assert "ending the job (--on-hang kill)" in run.err
    assert run.end_s <= KILL_GRACE + 5, "the watch ended %.1f s after its report" % run.end_s
    assert "=== tfnative: hang: pid %d made no progress" % run.pid in run.out, run.out
    assert run.docs, "no document in --json:\n%s" % run.err
    for doc in run.docs:
        check_document(doc)
        assert doc["events"][0]["kind"] == "hang", doc["events"][0]
        assert "verdict: " + doc["triage"]["verdict"] in run.out, (doc["triage"]["verdict"], run.out)
    assert run.docs[0]["pid"] == run.pid


@pytest.mark.parametrize("name", [pytest.param(n, marks=TF if PROGRAMS[n.split("+")[0]][0] else [])
                                  for n in HANGS + UNCAUGHT])
def test_a_hang_program_is_reported_in_time_with_stacks_verdict_then_killed(watched, name):
    if not usable(name):
        pytest.skip("needs g++ (and gdb for --no-crash-watch)")
    run = watched(name)
    assert_reported(run)
    EXPECTED[run.name](run.docs, run.pid)
    if run.name in VERDICT_TEXT:
        assert VERDICT_TEXT[run.name] + marker(run.name, "main") in run.out, run.out


@pytest.mark.parametrize("name", [pytest.param(n, marks=TF) for n in JOBS])
def test_a_job_with_a_missing_peer_names_it(watched, name):
    """Workers 0 and 1 of a 3-worker cluster (the launcher's children) both wait at start-up for worker 2,
    which never started: each one's verdict names worker 2 (the one no process of the job is) and the other
    worker waiting too; the launcher waits for them."""
    run = watched(name)
    assert_reported(run)
    workers = {d["events"][0]["cluster"]["task"]: d for d in run.docs if d["pid"] != run.pid}
    assert sorted(workers) == ["worker:0", "worker:1"], [d["pid"] for d in run.docs]
    at = "mwms_missing_rank.py:%d" % line_of(JOBS[name], "# hangs here: worker")
    for task, other in (("worker:0", "worker:1"), ("worker:1", "worker:0")):
        doc = workers[task]
        t = doc["triage"]
        assert t["pattern"] == "waiting_on_peer", t["verdict"]
        assert t["verdict"].startswith("the main thread waits at %s for worker 2 of its cluster: no process read "
                                       "is worker 2" % at), t["verdict"]
        assert "%s (pid %d) waits too, at %s" % (other.replace(":", " "), workers[other]["pid"], at) in t["verdict"]
        assert chain(doc, doc["pid"])[-1]["resource"] == "worker 2 of its cluster, which no process read is"
    (launcher,) = [d for d in run.docs if d["pid"] == run.pid]
    assert launcher["triage"]["pattern"] != "deadlock", launcher["triage"]["verdict"]
    assert "mwms_missing_rank.py:%d" % line_of(JOBS[name], "# hangs here: launcher") in launcher["triage"]["verdict"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=TF if PROGRAMS[n][0] else []) for n in CONTROLS])
def test_a_control_is_never_reported(watched, name):
    """A busy process progresses: no report over CONTROL_WATCH times --hang-after; SIGTERM to the watcher
    reaches it and ends the watch with 143."""
    run = watched(name)
    assert "hang" not in run.out and "hang" not in run.err, (run.out, run.err)
    assert not run.docs
    assert run.status == 128 + signal.SIGTERM, run.err
    assert "the job was killed by SIGTERM" in run.err

