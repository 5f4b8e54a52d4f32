"""``tfnative attach --pid`` and ``--timeout`` on real TensorFlow processes, with real signals.

One TensorFlow job (``tf_live_job.py``) serves most checks in turn: it waits for a file before
each of its steps, so each check attaches, lets one step run, and leaves the job running,
untraced, for the next one.
"""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ..utils import (
    ROOT,
    TFNATIVE,
    assert_gone,
    assert_running_untraced,
    descendants,
    line_of,
    load_json,
    python_frames,
    requires_gdb,
    requires_tf,
    run_tfnative,
    script,
    state_of,
    tracer_of,
    wait_for_file,
)

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]
JOB = script("tf_live_job.py")


class Job:
    """A running tf_live_job.py: ``go()`` lets its next step run."""

    def __init__(self, tmp, modes: str) -> None:
        self.ready = str(tmp / "ready")
        self.go_file = str(tmp / "go")
        self.proc = subprocess.Popen([sys.executable, JOB, self.ready, self.go_file, modes],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.pid = int(wait_for_file(self.ready, 300, self.proc))

    def go(self) -> None:
        with open(self.go_file, "w"):
            pass

    def step_taken(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while os.path.exists(self.go_file):
            assert time.monotonic() < deadline, "the job did not take its step"
            assert self.proc.poll() is None, "the job exited with %s" % self.proc.returncode
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def assert_no_trap_left(job: Job) -> None:
    """The job runs untraced, then through TF_NewSession: with a breakpoint trap left in it, it would die of
    SIGTRAP there."""
    assert_running_untraced(job.pid)
    job.go()
    job.step_taken()
    time.sleep(1)
    assert job.proc.poll() is None
    assert_running_untraced(job.pid)


def assert_stopped_untraced(pid: int) -> None:
    """``pid`` is in a job-control stop (``T``), and nobody traces it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (tracer_of(pid) != 0 or state_of(pid) != "T"):
        time.sleep(0.05)
    assert state_of(pid) == "T" and tracer_of(pid) == 0


def start_attach(tmp, *args: str) -> tuple:
    """``tfnative attach ARGS`` in the background; returns (Popen, stderr path) once it says "attached"."""
    err = tmp / ("attach-%d.err" % time.monotonic_ns())
    proc = subprocess.Popen(TFNATIVE + ["attach", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(err, "w"), cwd=ROOT)
    deadline = time.monotonic() + 120
    while "tfnative: attached to" not in err.read_text():
        assert proc.poll() is None, err.read_text()
        assert time.monotonic() < deadline, "tfnative did not attach: " + err.read_text()
        time.sleep(0.05)
    return proc, err


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """One TensorFlow job for the checks below, in this order of steps."""
    j = Job(tmp_path_factory.mktemp("job"), "session,session,session,session,exit")
    yield j
    j.stop()


def test_break_in_running_job_then_it_runs_on(job, tmp_path):
    out = tmp_path / "hit.json"
    proc, err = start_attach(tmp_path, "--pid", str(job.pid), "--break", "TF_NewSession", "--json", str(out))
    first = err.read_text().splitlines()[0]
    assert first == "tfnative: attached to %d (python3.11, TF 2.21): armed TF_NewSession" % job.pid, first
    job.go()
    assert proc.wait(300) == 0, err.read_text()
    doc = load_json(out)
    assert doc["pid"] == job.pid and doc["exit"] is None
    ev = doc["events"][0]
    assert ev["kind"] == "breakpoint" and ev["location"] == "TF_NewSession" and ev["thread"] == job.pid
    frames = ev["threads"][0]["frames"]
    assert frames[0]["function"] == "TF_NewSession" and frames[0]["library"] == "libtensorflow_cc.so.2"
    assert python_frames(frames)[-4:] == [
        ("open_session", "tf_live_job.py", line_of(JOB, "return tf.compat.v1.Session(graph=graph)")),
        ("step", "tf_live_job.py", line_of(JOB, "open_session().close()")),
        ("main", "tf_live_job.py", line_of(JOB, "        step(mode)")),
        ("<module>", "tf_live_job.py", len(open(JOB).read().splitlines())),  # its last line: main()
    ]
    assert "detaching, process %d runs on" % job.pid in err.read_text()
    job.step_taken()
    assert_running_untraced(job.pid)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_to_tfnative_detaches(job, tmp_path, sig, code):
    proc, err = start_attach(tmp_path, "--pid", str(job.pid))
    assert tracer_of(job.pid) != 0
    proc.send_signal(sig)
    assert proc.wait(120) == code, err.read_text()
    assert "interrupted by %s: detaching" % signal.Signals(sig).name in err.read_text()
    assert_running_untraced(job.pid)
    assert_gone(descendants(proc.pid))


def test_kill_9_of_tfnative_leaves_no_trap(job, tmp_path):
    """gdb outlives a SIGKILLed tfnative just long enough to detach: the trap goes with it."""
    proc, err = start_attach(tmp_path, "--pid", str(job.pid), "--break", "TF_NewSession")
    gdb = [p for p in descendants(proc.pid) if p.name() == "gdb"]
    assert gdb and tracer_of(job.pid) == gdb[0].pid
    proc.kill()
    proc.wait()
    assert_gone(gdb, timeout=60)
    assert_no_trap_left(job)


def test_timeout_on_pid_detaches_and_leaves_it_running(job, tmp_path):
    out = tmp_path / "t.json"
    r = run_tfnative(["attach", "--pid", str(job.pid), "--timeout", "2", "--json", str(out)], timeout=300)
    assert r.returncode == 124, r.stderr
    ev = load_json(out)["events"][0]
    assert ev["kind"] == "timeout" and ev["timeout"] == 2
    main = next(t for t in ev["threads"] if t["tid"] == job.pid)
    assert ("wait_for_go", "tf_live_job.py", line_of(JOB, "time.sleep(0.02)")) in python_frames(main["frames"])
    assert "timeout: pid %d still runs after 2 s" % job.pid in r.stderr
    assert_running_untraced(job.pid)


def test_ctrl_backslash_snapshot_of_pid(job, tmp_path):
    """SIGQUIT to tfnative (Ctrl-\\): a snapshot of every thread, and the job runs on under it."""
    out = tmp_path / "q.json"
    proc, err = start_attach(tmp_path, "--pid", str(job.pid), "--json", str(out))
    try:
        proc.send_signal(signal.SIGQUIT)
        deadline = time.monotonic() + 120
        while "tfnative: verdict:" not in err.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.1)
        # the report is printed as the target is let go: it runs on, still watched, moments later
        deadline = time.monotonic() + 10
        while state_of(job.pid) not in ("S", "R") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tracer_of(job.pid) != 0 and state_of(job.pid) in ("S", "R")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 143, err.read_text()
    finally:
        if proc.poll() is None:  # a failed check must not leave the job traced for the next tests
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
    ev = load_json(out)["events"][0]
    assert ev["kind"] == "snapshot"
    main = next(t for t in ev["threads"] if t["tid"] == job.pid)
    assert ("wait_for_go", "tf_live_job.py", line_of(JOB, "time.sleep(0.02)")) in python_frames(main["frames"])
    assert_running_untraced(job.pid)


def test_kill_9_of_gdb_traps_put_back(job, tmp_path):
    """gdb killed while its trap is in TF_NewSession: tfnative puts the instruction back, the job lives on."""
    proc, err = start_attach(tmp_path, "--pid", str(job.pid), "--break", "TF_NewSession")
    gdb = [p for p in descendants(proc.pid) if p.name() == "gdb"]
    assert gdb and tracer_of(job.pid) == gdb[0].pid
    gdb[0].kill()
    assert proc.wait(120) == 3, err.read_text()
    put_back = re.search(r"gdb died: (\d+) breakpoint trap\(s\) it left in process %d put back" % job.pid,
                         err.read_text())
    assert put_back and int(put_back.group(1)) >= 1, err.read_text()
    assert_no_trap_left(job)


def test_watched_job_exit_code_is_tfnative_s(job, tmp_path):
    """The last test on the job: it runs one more session, then exits 7 while watched."""
    job.go()
    job.step_taken()
    proc, err = start_attach(tmp_path, "--pid", str(job.pid), "--json", str(tmp_path / "e.json"))
    job.go()
    assert proc.wait(300) == 7, err.read_text()
    assert "tfnative: process %d exited with status 7" % job.pid in err.read_text()
    assert load_json(tmp_path / "e.json")["exit"] == {"code": 7}
    assert job.proc.wait(60) == 7


def test_segfault_in_watched_job(tmp_path):
    """Caught with --pid: the event, the job dies of SIGSEGV as it would have, its core kept and read back."""
    job = Job(tmp_path, "segv")
    try:
        out = tmp_path / "s.json"
        core = tmp_path / "job.core"
        proc, err = start_attach(tmp_path, "--pid", str(job.pid), "--json", str(out), "--core", str(core))
        job.go()
        assert proc.wait(300) == 128 + signal.SIGSEGV, err.read_text()
        assert job.proc.wait(60) == -signal.SIGSEGV  # it died of the signal, as without tfnative
        assert "tfnative: process %d was killed by SIGSEGV" % job.pid in err.read_text()
        doc = load_json(out)
        assert doc["exit"] == {"signal": "SIGSEGV"}
        ev = doc["events"][0]
        assert ev["kind"] == "signal" and ev["signal"] == "SIGSEGV" and ev["fatal"] is True
        assert ("bad_callback", "tf_live_job.py", line_of(JOB, "ctypes.string_at(0)")) in \
            python_frames(ev["threads"][0]["frames"])
        assert doc["core"] == str(core)
        again = tmp_path / "again.json"
        r = run_tfnative(["core", str(core), "--json", str(again)], timeout=300)
        assert r.returncode == 0, r.stderr
        back = load_json(again)["events"][0]
        assert back["kind"] == "core" and back["signal"] == "SIGSEGV" and back["thread"] == ev["thread"]
        assert python_frames(back["threads"][0]["frames"]) == python_frames(ev["threads"][0]["frames"])
    finally:
        job.stop()


def test_core_of_launched_script_named_by_report(tmp_path):
    """The core of a launched script, through 'tfnative report --save-core': the Markdown names the core."""
    core, md = tmp_path / "segv.core", tmp_path / "r.md"
    r = run_tfnative(["report", "--save-core", str(core), "-o", str(md), script("segv.py")], timeout=300)
    assert r.returncode == 128 + signal.SIGSEGV, r.stderr
    assert "## Core file" in md.read_text() and "tfnative core %s" % core in md.read_text()
    again = run_tfnative(["core", str(core)], timeout=300)
    assert again.returncode == 0, again.stderr
    assert "poke at %s:%d" % (script("segv.py"), line_of(script("segv.py"), "ctypes.string_at(0)")) in again.stdout


def test_timeout_on_launched_hang(tmp_path, autograph_files):
    """A tf.function stuck in its py_function callback: a snapshot of every thread, the script ended, 124."""
    out = tmp_path / "t.json"
    stuck = script("tf_stuck.py")
    proc = subprocess.Popen(TFNATIVE + ["attach", "--timeout", "40", "--json", str(out), stuck, "executor"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        _, stderr = proc.communicate(timeout=600)
    finally:
        kids = descendants(proc.pid)
        proc.kill()
    assert proc.returncode == 124, stderr
    assert_gone(kids)
    doc = load_json(out)
    assert doc["exit"] == {"signal": "SIGTERM"}
    ev = doc["events"][0]
    assert ev["kind"] == "timeout"
    frames = {t["tid"]: python_frames(t["frames"]) for t in ev["threads"]}
    assert ("main", "tf_stuck.py", line_of(stuck, "step(x)  # executor: waits here")) in frames[doc["pid"]]
    callback = [f for fs in frames.values() for f in fs if f[0] == "wait_for_event"]
    assert callback == [("wait_for_event", "tf_stuck.py", line_of(stuck, "EVENT.wait()"))]
    assert "ending the script: SIGTERM" in stderr


def test_ctrl_backslash_on_the_terminal_snapshots_a_launched_hang(tmp_path):
    """Ctrl-\\ on the terminal (SIGQUIT to the whole process group): a snapshot, and the script is not killed."""
    out, ready, release = tmp_path / "q.json", tmp_path / "ready", tmp_path / "release"
    hang = script("tf_hang.py")
    proc = subprocess.Popen(TFNATIVE + ["attach", "--json", str(out), hang, str(ready), str(release)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, start_new_session=True)
    try:
        wait_for_file(str(ready), 300, proc)  # the py_function callback runs, and waits for RELEASE
        os.killpg(proc.pid, signal.SIGQUIT)
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("tfnative: verdict:"):
                break
        release.write_text("")
        stdout, _ = proc.communicate(timeout=120)
    finally:
        kids = descendants(proc.pid)
        proc.kill()
        proc.wait()
    assert_gone(kids)
    assert proc.returncode == 0 and stdout == "result 3.0\n"  # the script lived on, and finished
    doc = load_json(out)
    assert doc["exit"] == {"code": 0}
    ev = doc["events"][0]
    assert ev["kind"] == "snapshot"
    frames = [f for t in ev["threads"] for f in python_frames(t["frames"])]
    # the callback's wait loop: asleep (line 17), or, rarely, between two sleeps (line 16)
    loop = {line_of(hang, "while RELEASE"), line_of(hang, "time.sleep(0.05)")}
    assert any(f[:2] == ("slow_callback", "tf_hang.py") and f[2] in loop for f in frames), frames
    assert ("main", "tf_hang.py", line_of(hang, 'print("result"')) in frames


def _one_line_error(r, *needles: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("tfnative: error: "), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_refusals(tmp_path):
    _one_line_error(run_tfnative(["attach", "--pid", "999999999"]), "no process with pid 999999999")
    zombie = subprocess.Popen(["true"])
    while state_of(zombie.pid) != "Z":
        time.sleep(0.02)
    try:
        _one_line_error(run_tfnative(["attach", "--pid", str(zombie.pid)]), "is a zombie")
    finally:
        zombie.wait()
    ready = tmp_path / "pid"
    target = subprocess.Popen([sys.executable, script("sleeper.py"), str(ready)])
    tracer = None
    try:
        wait_for_file(str(ready), 60, target)
        tracer = subprocess.Popen([sys.executable, "-c", SEIZE, str(target.pid)], stdout=subprocess.PIPE, text=True)
        assert tracer.stdout.readline().strip() == "seized"
        _one_line_error(run_tfnative(["attach", "--pid", str(target.pid)]),
                        "already traced by pid %d (python" % tracer.pid)
        tracer.kill()
        tracer.wait()
        if os.geteuid() == 0 and os.path.exists("/usr/bin/setpriv"):
            r = subprocess.run(["/usr/bin/setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace"]
                               + TFNATIVE + ["attach", "--pid", str(target.pid)], capture_output=True, text=True,
                               timeout=120, stdin=subprocess.DEVNULL, cwd=ROOT)
            _one_line_error(r, "the kernel refused ptrace on %d" % target.pid, "CAP_SYS_PTRACE")
        _one_line_error(run_tfnative(["attach", "--pid", str(target.pid), script("exit_code.py")]), "no SCRIPT")
        _one_line_error(run_tfnative(["attach", "--pid", str(target.pid), "--check-numerics"]),
                        "--check-numerics")
        assert_running_untraced(target.pid)
    finally:
        if tracer is not None and tracer.poll() is None:
            tracer.kill()
        target.kill()
        target.wait()


SEIZE = """
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
assert libc.ptrace(0x4206, int(sys.argv[1]), 0, 0) == 0, ctypes.get_errno()  # PTRACE_SEIZE: it runs on
print("seized", flush=True)
time.sleep(600)
"""


def test_process_without_python(tmp_path):
    """A native process: allowed, native stacks only, said once."""
    target = subprocess.Popen(["sleep", "600"])
    try:
        out = tmp_path / "n.json"
        r = run_tfnative(["attach", "--pid", str(target.pid), "--timeout", "1", "--json", str(out)], timeout=300)
        assert r.returncode == 124, r.stderr
        assert r.stderr.startswith("tfnative: attached to %d (no Python): watching" % target.pid), r.stderr
        assert "native stacks only" in r.stderr
        frames = load_json(out)["events"][0]["threads"][0]["frames"]
        assert [f["kind"] for f in frames] == ["native"] * len(frames)
        assert any("nanosleep" in (f["function"] or "") for f in frames)
        assert_running_untraced(target.pid)
    finally:
        target.kill()
        target.wait()


def test_stopped_process_stays_stopped(tmp_path):
    """A process stopped (T) before tfnative came is stopped again when tfnative lets go, by --timeout or SIGTERM."""
    ready = tmp_path / "pid"
    target = subprocess.Popen([sys.executable, script("sleeper.py"), str(ready)])
    try:
        wait_for_file(str(ready), 60, target)
        os.kill(target.pid, signal.SIGSTOP)
        while state_of(target.pid) != "T":
            time.sleep(0.02)
        r = run_tfnative(["attach", "--pid", str(target.pid), "--timeout", "1"], timeout=300)
        assert r.returncode == 124, r.stderr
        assert_stopped_untraced(target.pid)
        proc, err = start_attach(tmp_path, "--pid", str(target.pid))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 143, err.read_text()
        assert_stopped_untraced(target.pid)
        os.kill(target.pid, signal.SIGCONT)
        assert_running_untraced(target.pid)
    finally:
        target.kill()
        target.wait()
