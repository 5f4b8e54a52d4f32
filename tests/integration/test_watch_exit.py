"""Issue #44 under ``tfnative watch``: a job whose program has ended but that does not exit is a hang; a watch
that writes files outlives its terminal.

``tests/scripts/exit_hang.py`` launched under ``watch --hang-after 3 --interval 1 --on-hang kill``: its main
code returns while a non-daemon thread polls a flag with ``time.sleep`` for ever (``poller``: it wakes five
times a second, which the counters read as progress), or a ``__del__`` blocks while the interpreter is torn
down (``finalize``).  The report comes within --hang-after + 2 intervals of the program's end, names the
process, the thread the exit waits for and its line; the job is ended, the watch exits 124, nothing is left
running or traced.
"""

import os
import signal
import subprocess
import time

import psutil
import pytest

from tfnative.core.docschema import check_document

from ..utils import ROOT, TFNATIVE, assert_gone, assert_running_untraced, line_of, script, wait_for_file
from .test_watch import SNAPSHOT_SLACK, Watcher, documents

PROGRAM = script("exit_hang.py")
HANG_AFTER, INTERVAL = 3.0, 1.0


def _expected(mode, doc):
    if mode == "poller":
        poller = next(t for t in doc["events"][0]["threads"] if t.get("python_name") == "hook-poller")
        assert poller["daemon"] is False
        return ("exit_waits_for_threads",
                'the program has ended: the main thread waits in threading._shutdown for 1 non-daemon thread: '
                'thread %d "hook-poller" in poll at exit_hang.py:%d' % (poller["tid"], line_of(PROGRAM, "# POLL_LINE")),
                "the main thread waits in threading._shutdown")
    return ("interpreter_finalizing",
            "the interpreter is shutting down (Py_FinalizeEx has begun) and the main thread is in Blocks.__del__ at "
            "exit_hang.py:%d" % line_of(PROGRAM, "# DEL_LINE"),
            "the interpreter is shutting down")


@pytest.mark.parametrize("mode", ["poller", "finalize"])
def test_a_program_that_ended_but_does_not_exit_is_reported_and_killed(tmp_path, mode):
    ready, json_path = str(tmp_path / "ready"), str(tmp_path / "hang.jsonl")
    w = Watcher(tmp_path, ["watch", "--hang-after", str(HANG_AFTER), "--interval", str(INTERVAL), "--on-hang", "kill",
                           "--json", json_path, PROGRAM, mode, ready])
    try:
        job = int(wait_for_file(ready, 60, w.proc))
        t_ready = time.monotonic()
        procs = w.tree()[1:]
        w.wait_for("has ended its program but has not exited", HANG_AFTER + 2 * INTERVAL + SNAPSHOT_SLACK + 10)
        took = time.monotonic() - t_ready
        status = w.finish(60)
        out, err = w.out(), w.err()
        print("%s: reported %.1f s after the program's end\n%s\n%s" % (mode, took, out, err))
        assert took <= HANG_AFTER + 2 * INTERVAL + SNAPSHOT_SLACK, took
        assert status == 124, err
        (doc,) = documents(json_path)
        check_document(doc)
        pattern, verdict, why = _expected(mode, doc)
        headline = next(line for line in out.splitlines() if "has ended its program" in line)
        assert headline.startswith("tfnative: watch: hang: process %d has ended its program but has not exited for "
                                   % job), headline
        assert "(--hang-after 3): " + why in headline
        assert doc["pid"] == job and doc["events"][0]["kind"] == "hang"
        assert doc["triage"]["pattern"] == pattern, doc["triage"]
        assert doc["triage"]["verdict"].startswith(verdict), doc["triage"]["verdict"]
        assert "verdict: " + verdict in out
        assert "ending the job (--on-hang kill)" in err
        assert_gone(procs)
        assert not psutil.pid_exists(job) or psutil.Process(job).status() == psutil.STATUS_ZOMBIE
    finally:
        w.kill_all()


# A watch that writes files outlives its terminal (#44 item 4): a standard output whose reader has gone, a
# SIGHUP.  The job (tests/scripts/hup_hang.py) writes nothing on its standard streams, handles SIGHUP, then
# waits for ever: reported after --hang-after, ended by --on-hang kill.
HUP_JOB = script("hup_hang.py")


def _watch_outliving(tmp_path, stdout, extra=()):
    """The watcher on ``stdout`` (a file descriptor), with --out DIR; its stderr in a file."""
    err_path = str(tmp_path / "w.err")
    with open(err_path, "w") as err:
        proc = subprocess.Popen(TFNATIVE + ["watch", "--hang-after", str(HANG_AFTER), "--interval", str(INTERVAL),
                                            "--on-hang", "kill", "--out", str(tmp_path / "rep"), *extra, HUP_JOB,
                                            str(tmp_path / "ready"), str(tmp_path / "hup")],
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=err, cwd=ROOT, start_new_session=True)
    return proc, err_path


def _finish(proc, tmp_path, err_path, t_ready):
    """The report's file within --hang-after + 2 intervals, the watch's 124, nothing left; its stderr."""
    report = tmp_path / "rep" / "hang-1.txt"
    deadline = t_ready + HANG_AFTER + 2 * INTERVAL + SNAPSHOT_SLACK + 10
    while not report.exists():
        assert time.monotonic() < deadline, open(err_path).read()
        assert proc.poll() is None, "the watcher exited with %s:\n%s" % (proc.returncode, open(err_path).read())
        time.sleep(0.1)
    took = time.monotonic() - t_ready
    status = proc.wait(60)
    err = open(err_path).read()
    assert took <= HANG_AFTER + 2 * INTERVAL + SNAPSHOT_SLACK, took
    assert status == 124, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    text = report.read_text()
    assert "tfnative: watch: hang: no process of the job has progressed" in text
    assert "hup_hang.py:%d" % line_of(HUP_JOB, "# WAIT_LINE") in text
    return err, took


def _cleanup(proc, procs):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def test_a_watch_with_out_outlives_a_closed_standard_output(tmp_path):
    """``tfnative watch --out DIR job.py | true``: the reader has gone before the first report; the watch goes
    on, writes its report to DIR, says once on stderr that standard output is gone, ends the job (124)."""
    read, write = os.pipe()
    os.close(read)  # the reader has died: every write to the pipe fails (EPIPE)
    try:
        proc, err_path = _watch_outliving(tmp_path, write)
    finally:
        os.close(write)
    procs = []
    try:
        wait_for_file(str(tmp_path / "ready"), 60, proc)
        t_ready = time.monotonic()
        procs = psutil.Process(proc.pid).children(recursive=True)
        err, took = _finish(proc, tmp_path, err_path, t_ready)
        print("closed stdout: report after %.1f s\n%s" % (took, err))
        said = "tfnative: watch: standard output: Broken pipe: the watch goes on, its reports written to %s" % (
            tmp_path / "rep")
        assert err.count(said) == 1, err
        assert "ending the job (--on-hang kill)" in err
        assert_gone(procs)
    finally:
        _cleanup(proc, procs)


def test_a_watch_with_out_outlives_a_sighup_which_reaches_the_job(tmp_path):
    """SIGHUP to the watcher (its terminal hung up): passed on to the job as before, but the watch goes on, says
    so once, and reports the hang to DIR; the job's own handler saw the signal."""
    proc, err_path = _watch_outliving(tmp_path, subprocess.DEVNULL)
    procs = []
    try:
        job = int(wait_for_file(str(tmp_path / "ready"), 60, proc))
        t_ready = time.monotonic()
        procs = psutil.Process(proc.pid).children(recursive=True)
        os.kill(proc.pid, signal.SIGHUP)
        wait_for_file(str(tmp_path / "hup"), 10, proc)  # the job's handler got it
        err, took = _finish(proc, tmp_path, err_path, t_ready)
        print("SIGHUP: report after %.1f s\n%s" % (took, err))
        said = "tfnative: watch: SIGHUP: passed on to the job; the watch goes on, its reports written to %s" % (
            tmp_path / "rep")
        assert err.count(said) == 1, err
        assert open(tmp_path / "hup").read() == "SIGHUP\n"
        assert "pid %d" % job in (tmp_path / "rep" / "hang-1.txt").read_text()
        assert_gone(procs)
    finally:
        _cleanup(proc, procs)


def test_without_files_a_sighup_ends_the_watch_as_before(tmp_path):
    """No --out, no --json: SIGHUP is passed on to the job and ends the watch; the job, which handles it, runs on
    untraced (as before #44)."""
    w = Watcher(tmp_path, ["watch", "--hang-after", "60", HUP_JOB, str(tmp_path / "ready"), str(tmp_path / "hup")])
    try:
        job = int(wait_for_file(str(tmp_path / "ready"), 60, w.proc))
        os.kill(w.proc.pid, signal.SIGHUP)
        wait_for_file(str(tmp_path / "hup"), 10)
        assert w.finish(30) == 130, w.err()
        assert "interrupted: the job (pid %d) runs on, unwatched" % job in w.err()
        assert_running_untraced(job)
    finally:
        w.kill_all()
