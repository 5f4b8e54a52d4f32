"""Odd targets for ``tfnative stack --pid`` (issue #34): processes that exit, stop or are traced while tfnative
reads them, and processes that are odd to begin with.

Each run must end within its bound with exit 0 and a snapshot of the process, or one line that says why
(``harness.run_bounded``), and leave the target neither traced nor stopped by us (``assert_released``), reapable
by its parent (the test) once it has exited, and no gdb behind.  The targets are made here: small Python
programs and two C helpers (``onsignal``: a signal the moment the target is first in a ptrace stop;
``vforker``: a process whose only thread waits in the kernel, where no ptrace stop reaches it).

What other tests check already is not repeated: a job-control stop kept by the plain snapshot
(``integration/test_hold_signals.py``), a process that exits before tfnative starts
(``integration/test_odd_states.py``), the namespaces' answers (``integration/test_namespaces.py``), 5,000-frame
stacks (``integration/test_deep_stacks.py``), tfnative killed while it holds (``integration/test_snapshot.py``).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from typing import Callable, Iterator, List, Optional, Tuple

import psutil
import pytest

from .harness import (
    TFNATIVE,
    Budget,
    FuzzFailure,
    Outcome,
    assert_released,
    check_contract,
    run_bounded,
    tracer_and_state,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or platform.machine() != "x86_64",
                                reason="ptrace targets: x86-64 Linux")

# A process that exits (os._exit) the moment it sees itself traced, from a thread of its own that reads its
# TracerPid in a loop: tfnative's seize is seen before the threads are stopped, and the exit races the hold.
# The watching thread is started last (argv[2] idle threads before it) and reads its own status and the main
# thread's: tfnative's hold seizes it first and stops it last, gdb attaches the main thread first, so that the
# seizes and stops of the others are its window.  The moment of the exit
# (CLOCK_MONOTONIC, shared by every process) goes to argv[1] first.
EXITER = r"""
import os, sys, threading, time
out = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
def watch():
    while True:
        for path in ("/proc/thread-self/status", "/proc/self/status"):
            with open(path) as f:
                for line in f:
                    if line.startswith("TracerPid:") and line.split()[1] != "0":
                        os.write(out, b"%.6f" % time.monotonic())
                        os._exit(0)
for _ in range(int(sys.argv[2])):
    threading.Thread(target=threading.Event().wait, daemon=True).start()
threading.Thread(target=watch, daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(1)
"""

# Idle threads (argv[1] of them beside the main one).
SLEEPER = r"""
import sys, threading, time
threading.stack_size(256 << 10)
for _ in range(int(sys.argv[1])):
    threading.Thread(target=threading.Event().wait, daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(1)
"""

# argv[1] nested Python calls, then a wait at the bottom.
DEEP = r"""
import sys, time
sys.setrecursionlimit(int(sys.argv[1]) + 1000)
def recurse(n):
    if n == 0:
        print("ready", flush=True)
        while True:
            time.sleep(1)  # the bottom
    return recurse(n - 1)
recurse(int(sys.argv[1]))
"""

ONSIGNAL_C = r"""
/* onsignal PID SIGNUM: send SIGNUM to PID the moment its main thread is in a ptrace stop ('t' in its stat);
   exit 0 then, 1 after 60 s. */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int pid = atoi(argv[1]), sig = atoi(argv[2]);
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 2;
    time_t start = time(NULL);
    printf("ready\n");
    fflush(stdout);
    while (time(NULL) - start < 60) {
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (n <= 0) return 3;
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && p[2] == 't') {
            kill(pid, sig);
            return 0;
        }
        sched_yield();
    }
    return 1;
}
"""

VFORKER_C = r"""
/* A process whose one thread waits in vfork() (state D) for a child that sleeps 60 s: no ptrace stop
   reaches it until the child ends. */
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    pid_t child = vfork();
    if (child == 0) {
        write(1, "ready\n", 6);
        sleep(60);
        _exit(0);
    }
    waitpid(child, 0, 0);
    return 0;
}
"""

GONE = ("tfnative: error: process %d exited while it was being read", "tfnative: error: process %d exited")


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The C helpers, built once, and the Python targets as files."""
    d = tmp_path_factory.mktemp("targets")
    out = {}
    cc = shutil.which("gcc") or shutil.which("cc")
    for name, source in (("onsignal", ONSIGNAL_C), ("vforker", VFORKER_C)):
        if cc is None:
            out[name] = None
            continue
        (d / (name + ".c")).write_text(source)
        subprocess.run([cc, "-O1", "-o", str(d / name), str(d / (name + ".c"))], check=True)
        out[name] = str(d / name)
    for name, source in (("exiter", EXITER), ("sleeper", SLEEPER), ("deep", DEEP)):
        (d / (name + ".py")).write_text(source)
        out[name] = str(d / (name + ".py"))
    out["dir"] = str(d)
    return out


def _start(argv: List[str], stderr: Optional[int] = None) -> subprocess.Popen:
    """A target that prints "ready" once it is (or dies: an empty line); its stdout read up to there."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, stderr=stderr)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != b"ready":
        proc.kill()
        proc.wait()
        raise AssertionError("target %r did not start: %r" % (argv, line))
    return proc


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _marked() -> Tuple[dict, str]:
    """An environment whose mark every process tfnative starts inherits (gdb runs in a session of its own,
    which ``run_bounded``'s session check does not see)."""
    mark = "targets-%d-%d" % (os.getpid(), time.monotonic_ns())
    return dict(os.environ, TFNATIVE_FUZZ_MARK=mark), mark


def _assert_none_marked(mark: str, timeout: float = 5.0) -> None:
    """No process left with ``mark`` in its environment (an orphaned gdb)."""
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for p in psutil.process_iter(["pid", "name"]):
            try:
                if p.pid != os.getpid() and p.environ().get("TFNATIVE_FUZZ_MARK") == mark \
                        and p.status() != psutil.STATUS_ZOMBIE:
                    left.append("%d %s" % (p.pid, p.info["name"]))
            except (psutil.Error, OSError):
                pass
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if left:
        raise FuzzFailure("left behind: %s" % ", ".join(left))


def _stack(pid: int, tmp: str, *options: str, timeout: float = 60.0, env: Optional[dict] = None,
           expect_ok: Optional[bool] = None) -> Tuple[Outcome, Optional[dict]]:
    """``stack --pid PID OPTIONS --json FILE`` under the harness's bounds: the outcome and, on exit 0, the
    snapshot event (checked to be ``pid``'s, with threads)."""
    path = os.path.join(tmp, "s.json")
    if os.path.exists(path):
        os.unlink(path)
    out = run_bounded(["stack", "--pid", str(pid), *options, "--json", path], timeout=timeout, env=env,
                      expect_ok=expect_ok)
    if out.returncode != 0:
        return out, None
    with open(path) as f:
        event = json.load(f)["events"][0]
    if event["pid"] != pid or not event["threads"]:
        raise FuzzFailure("a snapshot without the process's threads\n" + out.describe())
    return out, event


def _error_line(out: Outcome) -> str:
    return [ln for ln in out.stderr.splitlines() if ln.strip()][-1]


def _reaped(proc: subprocess.Popen, out: Outcome, timeout: float = 3.0) -> None:
    """The target exited: its parent (this test) can reap it, i.e. nothing traces it any more."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        tracer, state = tracer_and_state(proc.pid)
        raise FuzzFailure("target %d exited but cannot be reaped after %.0f s (state %s, TracerPid %d)\n%s"
                          % (proc.pid, timeout, state, tracer, out.describe()))


def _runs(seconds: float, least: int) -> Iterator[int]:
    """Run numbers until ``seconds`` have passed, and at least ``least`` runs."""
    start, i = time.monotonic(), 0
    while i < least or time.monotonic() - start < seconds:
        yield i
        i += 1


def _exits_when_traced(tools: dict, tmp_path, budget: Budget, ci_seconds: float, least: int,
                       *options: str) -> None:
    rng = budget.rng("exiter" + "".join(options))
    env, mark = _marked()
    outcomes = {"answer": 0, "gone": 0}
    lags: List[float] = []
    for _ in _runs(budget.seconds(ci_seconds), least):
        stamp = tmp_path / "exited"
        if stamp.exists():
            stamp.unlink()
        threads = rng.choice([rng.randrange(0, 8), rng.randrange(50, 300)])
        target = _start([sys.executable, tools["exiter"], str(stamp), str(threads)])
        try:
            out, _event = _stack(target.pid, str(tmp_path), *options, env=env)
            ended = time.monotonic()
            if out.returncode == 0:
                outcomes["answer"] += 1
                if target.poll() is None:
                    assert_released(target.pid)
            else:
                outcomes["gone"] += 1
                if _error_line(out) not in [g % target.pid for g in GONE]:
                    raise FuzzFailure("not the line that says the process exited\n" + out.describe())
                _reaped(target, out)
            if stamp.exists() and stamp.read_text():
                lag = ended - float(stamp.read_text())
                lags.append(lag)
                # tfnative's own end after the exit: its wait ends at once (the bound is for a loaded CI box)
                if out.returncode != 0 and lag > 3.0:
                    raise FuzzFailure("ended %.1f s after the process exited\n%s" % (lag, out.describe()))
        finally:
            _end(target)
    _assert_none_marked(mark)
    print("exits when traced %s: %s; tfnative ended %s s after the exit" % (
        " ".join(options) or "(no gdb)", outcomes, ", ".join("%.2f" % x for x in sorted(lags))))


def test_exits_when_traced(tools, tmp_path, budget):
    """The issue's target: it exits as the hold begins.  Each run ends at once with a snapshot or the one line,
    and the process is reaped by its parent (the hold waited for ever on its leader, and the parent with it)."""
    _exits_when_traced(tools, tmp_path, budget, 6.0, 4)


def test_exits_when_traced_with_gdb(tools, tmp_path, budget):
    """The same through gdb: its attach raced the exit and was waited on without a bound; no gdb left."""
    _exits_when_traced(tools, tmp_path, budget, 4.0, 3, "--with-gdb")


def _onsignal(tools: dict, pid: int, sig: int) -> subprocess.Popen:
    if tools["onsignal"] is None:
        pytest.skip("no C compiler")
    return _start([tools["onsignal"], str(pid), str(int(sig))])


def _sent(sender: subprocess.Popen) -> bool:
    """Whether ``onsignal`` sent its signal (it exits 0 then); one that never saw the ptrace stop (tfnative was
    faster than its look) polls on for 60 s: that is "not sent", not a time-out of the test."""
    try:
        return sender.wait(5) == 0
    except subprocess.TimeoutExpired:
        return False


def _killed_while_held(tools: dict, tmp_path, seconds: float, least: int, start: Callable[[int], subprocess.Popen],
                       inner: Callable[[subprocess.Popen], int]) -> None:
    """``start(threads)`` a target (``inner(proc)``: the pid to read), SIGKILL it at its first ptrace stop, read
    it: a snapshot or the one line, and its parent (``proc``) reaps it."""
    counts = {"killed, answer": 0, "killed, gone": 0, "not killed": 0}
    for i in _runs(seconds, least):
        proc = start(1 + i % 7)
        try:
            pid = inner(proc)
            killer = _onsignal(tools, pid, signal.SIGKILL)
            try:
                out, _event = _stack(pid, str(tmp_path))
                if out.returncode != 0 and _error_line(out) not in [g % pid for g in GONE]:
                    raise FuzzFailure("not the line that says the process exited\n" + out.describe())
                if _sent(killer):  # it did kill the target (else tfnative was faster than its look)
                    counts["killed, answer" if out.returncode == 0 else "killed, gone"] += 1
                    _reaped(proc, out)
                else:
                    counts["not killed"] += 1
                    assert_released(pid)
            finally:
                _end(killer)
        finally:
            _end(proc)
    print("killed while held: %s" % counts)


def test_killed_at_its_first_ptrace_stop(tools, tmp_path, budget):
    """SIGKILL the moment the first thread is held (from outside: a held thread cannot act): the process dies
    while held; one line, and its parent reaps it."""
    _killed_while_held(tools, tmp_path, budget.seconds(3.0), 3,
                       lambda n: _start([sys.executable, tools["sleeper"], str(n)]), lambda proc: proc.pid)


def test_stopped_at_its_first_ptrace_stop(tools, tmp_path, budget):
    """SIGSTOP while held: the snapshot is taken, the stop reaches the process after the release and stays (not
    lost, not undone by tfnative, no ptrace stop left), and SIGCONT lets it run."""
    for _ in _runs(budget.seconds(2.0), 1):
        target = _start([sys.executable, tools["sleeper"], "3"])
        stopper = _onsignal(tools, target.pid, signal.SIGSTOP)
        try:
            out, _event = _stack(target.pid, str(tmp_path), expect_ok=True)
            if _sent(stopper):  # sent while held: the process is stopped now, as the sender meant
                assert_released(target.pid, was_stopped=True)
                state = tracer_and_state(target.pid)[1]
                if state != "T":
                    raise FuzzFailure("a SIGSTOP sent while held was lost (state %s)\n%s" % (state, out.describe()))
            os.kill(target.pid, signal.SIGCONT)
            assert_released(target.pid)
        finally:
            _end(stopper)
            _end(target)


def test_killed_while_held_in_a_pid_namespace(tools, tmp_path, budget):
    """The same kill where the target is the init of a PID namespace of its own (``unshare --pid --fork
    --mount-proc``): its end ends the namespace, and ``unshare`` (its parent) reaps it."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    # unshare's stderr: it cannot pass a SIGKILL on to itself, and says so
    _killed_while_held(tools, tmp_path, budget.seconds(3.0), 2,
                       lambda n: _start(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable,
                                         tools["sleeper"], str(n)], stderr=subprocess.DEVNULL),
                       lambda proc: psutil.Process(proc.pid).children()[0].pid)


def _vforker(tools: dict) -> Tuple[subprocess.Popen, int]:
    """The vfork target once its thread waits in the kernel (state D), and its child's pid."""
    if tools["vforker"] is None:
        pytest.skip("no C compiler")
    parent = _start([tools["vforker"]])
    deadline = time.monotonic() + 10
    while tracer_and_state(parent.pid)[1] != "D" and time.monotonic() < deadline:
        time.sleep(0.01)
    if tracer_and_state(parent.pid)[1] != "D":
        _end(parent)
        pytest.skip("a vfork parent is not in state D on this kernel")
    (child,) = psutil.Process(parent.pid).children()
    return parent, child.pid


def _end_vforker(parent: subprocess.Popen, child: int) -> None:
    try:
        os.kill(child, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _end(parent)


def test_thread_that_never_stops(tools, tmp_path):
    """A thread no ptrace stop reaches (it waits in the kernel): the hold ends at its bound with one line that
    says which thread and why, and lets the process go."""
    parent, child = _vforker(tools)
    try:
        out, _event = _stack(parent.pid, str(tmp_path), timeout=30, expect_ok=False)
        line = _error_line(out)
        if "did not stop within" not in line or "state D" not in line:
            raise FuzzFailure("not the line that says the thread did not stop\n" + out.describe())
        assert_released(parent.pid)
        assert tracer_and_state(parent.pid)[1] == "D"  # still waiting for its child, as before
    finally:
        _end_vforker(parent, child)


def test_ctrl_c_while_a_thread_does_not_stop(tools, tmp_path):
    """Ctrl-C while the hold waits for that thread: tfnative lets go at once, says so, exits 130."""
    parent, child = _vforker(tools)
    try:
        start = time.monotonic()
        proc = subprocess.Popen(TFNATIVE + ["stack", "--pid", str(parent.pid)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while tracer_and_state(parent.pid)[0] == 0 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            assert tracer_and_state(parent.pid)[0] != 0, "tfnative never held the process"
            time.sleep(0.3)  # in the wait
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=10)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out = Outcome(args=["stack", "--pid", str(parent.pid)], returncode=proc.returncode, stdout=stdout,
                      stderr=stderr, peak_rss_mb=0.0, seconds=time.monotonic() - start)
        check_contract(out)
        if proc.returncode != 130 or "tfnative: interrupted" not in stderr:
            raise FuzzFailure("expected exit 130 and 'tfnative: interrupted'\n" + out.describe())
        if took > 2.0:
            raise FuzzFailure("interrupted, but ended only after %.1f s\n%s" % (took, out.describe()))
        assert_released(parent.pid)
    finally:
        _end_vforker(parent, child)


@pytest.mark.parametrize("gdb", [False, True], ids=["no-gdb", "with-gdb"])
def test_zombie_and_kernel_threads(tmp_path, gdb):
    """Nothing to read: a zombie (exited, not reaped by its parent), kernel threads (pid 2 and another).  One
    line each that says so (a kernel thread was told to get CAP_SYS_RESOURCE), no gdb started or left."""
    options = ["--with-gdb"] if gdb else []
    env, mark = _marked()
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while tracer_and_state(zombie.pid)[1] != "Z":
            time.sleep(0.01)
        out, _ = _stack(zombie.pid, str(tmp_path), *options, env=env, expect_ok=False)
        assert _error_line(out) == "tfnative: error: process %d is a zombie: it has exited" % zombie.pid, out.stderr
        assert tracer_and_state(zombie.pid) == (0, "Z")
    finally:
        zombie.wait()
    kthreads = [2] + [p.pid for p in psutil.process_iter() if p.pid > 2 and _kthread(p.pid)][:1]
    for pid in kthreads:
        for extra in ([], ["--no-pause"]) if not gdb else ([],):
            out, _ = _stack(pid, str(tmp_path), *options, *extra, env=env, expect_ok=False)
            line = _error_line(out)
            assert line.startswith("tfnative: error: process %d (" % pid) and line.endswith(
                "is a kernel thread: it has no user memory, no stack to read"), out.stderr
            assert "CAP_" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    _assert_none_marked(mark)


def _kthread(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return bool(int(f.read().rsplit(b")", 1)[1].split()[6]) & 0x00200000)
    except (OSError, IndexError, ValueError):
        return False


@pytest.mark.parametrize("debugger", ["strace", "gdb"])
def test_already_traced_by_another_debugger(tools, tmp_path, debugger):
    """Traced by strace, or held by a gdb of the user's: one line that names the tracer, with and without
    --with-gdb; the other debugger keeps its hold (tfnative takes nothing from it)."""
    if shutil.which(debugger) is None:
        pytest.skip("no %s" % debugger)
    target = _start([sys.executable, tools["sleeper"], "2"])
    if debugger == "strace":
        argv = ["strace", "-f", "-o", os.devnull, "-p", str(target.pid)]
    else:
        argv = ["gdb", "-q", "-nx", "-batch", "-p", str(target.pid), "-ex", "shell sleep 60"]
    other = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while tracer_and_state(target.pid)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        tracer = tracer_and_state(target.pid)[0]
        assert tracer != 0, "%s did not attach" % debugger
        env, mark = _marked()
        for options in ([], ["--with-gdb"]):
            out, _ = _stack(target.pid, str(tmp_path), *options, env=env, expect_ok=False)
            line = _error_line(out)
            # The tracer named, by pid and name (the debugger's, not a security module's refusal)
            assert line.startswith("tfnative: error: process %d is already being traced by PID %d (%s)" % (
                target.pid, tracer, "strace" if debugger == "strace" else "gdb")), out.stderr
            assert tracer_and_state(target.pid)[0] == tracer
        _assert_none_marked(mark)
    finally:
        _end(other)
        _end(target)


def test_stopped_process_through_gdb(tools, tmp_path):
    """A process stopped by SIGSTOP, its stacks taken through gdb: answered, and it stays stopped, untraced
    (gdb's own SIGSTOP and SIGCONT must not undo the user's stop); SIGCONT lets it run.  (The plain snapshot of a
    stopped process is ``integration/test_hold_signals.py``'s.)"""
    target = _start([sys.executable, tools["sleeper"], "2"])
    try:
        os.kill(target.pid, signal.SIGSTOP)
        while tracer_and_state(target.pid)[1] != "T":
            time.sleep(0.01)
        env, mark = _marked()
        out, event = _stack(target.pid, str(tmp_path), "--with-gdb", env=env, expect_ok=True)
        assert event is not None and event["via"] == "gdb"
        time.sleep(0.3)
        assert tracer_and_state(target.pid) == (0, "T")
        _assert_none_marked(mark)
        os.kill(target.pid, signal.SIGCONT)
        assert_released(target.pid)
    finally:
        _end(target)


def test_two_thousand_threads(tools, tmp_path):
    """2,000 threads: every one in the answer, within the bounds, and all let go."""
    target = _start([sys.executable, tools["sleeper"], "2000"])
    try:
        out, event = _stack(target.pid, str(tmp_path), "--all-threads", timeout=60, expect_ok=True)
        assert event is not None and len(event["threads"]) == 2001, len(event["threads"])
        assert_released(target.pid)
    finally:
        _end(target)


def test_ten_thousand_python_frames(tools, tmp_path):
    """A 10,000-deep Python recursion: a bounded answer (time, memory) with both ends of the stack."""
    target = _start([sys.executable, tools["deep"], "10000"])
    try:
        out, event = _stack(target.pid, str(tmp_path), timeout=60, expect_ok=True)
        assert event is not None
        (thread,) = event["threads"]
        python = [f["function"] for f in thread["frames"] if f["kind"] == "python"]
        assert python[0] == "recurse" and python[-1] == "<module>", python[:3] + python[-3:]
        assert len(thread["frames"]) < 10000 or any(f["kind"] == "elided" for f in thread["frames"])
        assert_released(target.pid)
    finally:
        _end(target)
