"""tfnative stack --pid on a process in its own mount (and PID) namespace: its files are read through
/proc/PID/root, its pid and thread ids are given as the host and the namespace see them."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys

import psutil
import pytest

from ..utils import ROOT, TFNATIVE, assert_running_untraced, load_json, run_tfnative, script, wait_for_file

PYENV = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.11.*")))

# bash -c SETUP setup PYTHON_PREFIX SCRIPT READY: the interpreter bind-mounted at /mnt/tfnx/py and the
# script copied to /mnt/tfnx/app (paths that exist only in the new mount namespace), then run
SETUP = """set -e
mount -t tmpfs none /mnt
mkdir -p /mnt/tfnx/py /mnt/tfnx/app
mount --bind "$1" /mnt/tfnx/py
cp "$2" /mnt/tfnx/app/
exec /mnt/tfnx/py/bin/python3.11 "/mnt/tfnx/app/$(basename "$2")" "$3"
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not PYENV,
                    reason="needs root, unshare and a pyenv CPython 3.11")
def test_stack_of_a_process_in_another_mount_namespace(tmp_path):
    ready = tmp_path / "ready"
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "bash", "-c", SETUP, "setup",
                             PYENV[-1], script("sleeper.py"), str(ready)])
    try:
        wait_for_file(str(ready), 60, proc)
        pid = int(ready.read_text())
        assert not os.path.exists("/mnt/tfnx/py/bin/python3.11")  # the target's paths do not exist here
        out = tmp_path / "s.json"
        res = run_tfnative(["stack", "--pid", str(pid), "--json", str(out)], timeout=120)
        assert res.returncode == 0, res.stderr
        frames = load_json(out)["events"][0]["threads"][0]["frames"]
        py = [(f["function"], f["file"], f["line"]) for f in frames if f["kind"] == "python"]
        assert py == [("wait_here", "/mnt/tfnx/app/sleeper.py", 10), ("main", "/mnt/tfnx/app/sleeper.py", 14),
                      ("<module>", "/mnt/tfnx/app/sleeper.py", 17)]
        native = [f["function"] for f in frames if f["kind"] == "native"]
        assert native[:2] == ["clock_nanosleep", "time_sleep"] and "??" not in native
        assert "through gdb" not in res.stderr and "warning" not in res.stderr  # no fallback, no complaint
    finally:
        proc.kill()
        proc.wait(timeout=30)



def _inner_ids(pid: int) -> dict:
    """{host tid: tid inside} from NSpid of each task."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            ids = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
        out[int(ids[0])] = int(ids[-1])
    return out


@pytest.fixture(scope="module")
def pid_ns_target(tmp_path_factory):
    """(host pid, pid inside) of ns_threads.py in its own PID and mount namespaces (unshare --pid --fork
    --mount-proc --mount), its interpreter and script bind-mounted at paths that do not exist here."""
    tmp = tmp_path_factory.mktemp("pidns")
    ready = tmp / "ready"
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--mount", "--propagation",
                             "private", "bash", "-c", SETUP, "setup", PYENV[-1], script("ns_threads.py"),
                             str(ready)])
    host = None
    try:
        wait_for_file(str(ready), 60, proc)
        inside = int(ready.read_text())
        host = next(p.pid for p in psutil.Process(proc.pid).children(recursive=True)
                    if "ns_threads.py" in " ".join(p.cmdline()))
        assert host != inside and not os.path.exists("/mnt/tfnx/app/ns_threads.py")
        yield host, inside
    finally:
        if host is not None:
            os.kill(host, signal.SIGKILL)  # pid 1 of its namespace: the kernel ends the rest with it
        proc.terminate()  # --kill-child: unshare's child gets SIGKILL too
        proc.wait(timeout=30)


needs_pid_ns = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not PYENV,
                                  reason="needs root, unshare and a pyenv CPython 3.11")


@needs_pid_ns
@pytest.mark.parametrize("via", ["cfi", "gdb"])
def test_stack_of_a_process_in_another_pid_namespace(tmp_path, pid_ns_target, via):
    """Both pids, every thread with both ids and its Python frames: tfnative's own unwinder, and gdb
    (which reads the target's files as "target:" paths through its mount namespace)."""
    host, inside = pid_ns_target
    out = tmp_path / "s.json"
    res = run_tfnative(["stack", "--pid", str(host), "--json", str(out)] + (["--with-gdb"] if via == "gdb" else []),
                       timeout=300)
    assert res.returncode == 0, res.stderr
    ev = load_json(out)["events"][0]
    assert (ev["pid"], ev["ns_pid"], ev["via"]) == (host, inside, via)
    assert "=== tfnative: snapshot of pid %d (pid %d in its PID namespace), Python 3.11 ===" % (host, inside) \
        in res.stdout
    inner = _inner_ids(host)
    assert {t["tid"]: t["ns_tid"] for t in ev["threads"]} == inner  # every thread, each with both ids
    for t in ev["threads"]:
        py = [(f["function"], f["file"]) for f in t["frames"] if f["kind"] == "python"]
        want = "main" if t["tid"] == host else "worker_wait"
        assert (want, "/mnt/tfnx/app/ns_threads.py") in py, (t["tid"], py)
        assert 'Thread %d (%d inside) "' % (t["tid"], t["ns_tid"]) in res.stdout
    assert_running_untraced(host)


@needs_pid_ns
@pytest.mark.skipif(not os.path.exists("/usr/bin/setpriv"), reason="setpriv (util-linux) is not installed")
def test_pid_namespace_refusals_name_the_fix(pid_ns_target):
    """A tfnative without CAP_SYS_PTRACE (a container without --cap-add SYS_PTRACE), and one under a
    seccomp filter that denies ptrace (Docker's default profile): one line each, naming the fix."""
    host, _inside = pid_ns_target
    no_cap = subprocess.run(["/usr/bin/setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace"]
                            + TFNATIVE + ["stack", "--pid", str(host)], capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL)
    seccomp = subprocess.run([sys.executable, script("seccomp_deny.py"), "ptrace", *TFNATIVE,
                              "stack", "--pid", str(host)], capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL, cwd=ROOT)
    for res, words in ((no_cap, "CAP_SYS_PTRACE"), (seccomp, "--security-opt seccomp=unconfined")):
        lines = res.stderr.strip().splitlines()
        assert res.returncode != 0 and len(lines) == 1, res.stderr
        assert lines[0].startswith("tfnative: error: ") and str(host) in lines[0] and words in lines[0], lines
    assert "seccomp filter" in seccomp.stderr and "--cap-add SYS_PTRACE" in seccomp.stderr
    assert_running_untraced(host)


@needs_pid_ns
def test_attach_pid_in_another_pid_namespace(tmp_path, pid_ns_target):
    """attach --pid on a process in its own PID and mount namespaces: armed from the files it sees through
    /proc/PID/root, the hit shows its Python frames at its own paths, and it runs on untraced."""
    host, inside = pid_ns_target
    out = tmp_path / "a.json"
    res = run_tfnative(["attach", "--pid", str(host), "--break", "time_sleep", "--max-hits", "1", "--json", str(out)],
                       timeout=300)
    assert res.returncode == 0, res.stderr
    assert "tfnative: attached to %d (python3.11): armed time_sleep" % host in res.stderr
    ev = load_json(out)["events"][0]
    assert (ev["kind"], ev["pid"], ev["ns_pid"]) == ("breakpoint", host, inside)
    (thread,) = [t for t in ev["threads"] if t["tid"] == ev["thread"]]
    assert thread["frames"][0]["function"] == "time_sleep"
    assert [(f["function"], f["file"]) for f in thread["frames"] if f["kind"] == "python"] == [
        ("main", "/mnt/tfnx/app/ns_threads.py"), ("<module>", "/mnt/tfnx/app/ns_threads.py")]
    assert_running_untraced(host)
