"""What tests share: paths, running tfnative, reading its documents, processes held and checked.

Imported by the tests themselves (``from ..utils import ...``); ``conftest.py`` holds pytest's fixtures only.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from typing import Iterator, List, Optional

import psutil
import pytest

from .installed import tfnative_command

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "tests", "scripts")
TFNATIVE = tfnative_command()  # the installed script (tests/installed.py)


def script(name: str) -> str:
    return os.path.join(SCRIPTS, name)


def run_tfnative(args: List[str], timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(TFNATIVE + args, capture_output=True, text=True, timeout=timeout, cwd=kw.pop("cwd", ROOT),
                          **kw)


def stack_event(tmp_path, pid: int, *options: str, name: str = "s") -> tuple:
    """``tfnative stack --pid PID OPTIONS --json FILE``: (the completed run, its snapshot event); exit 0 checked."""
    out = tmp_path / ("%s.json" % name)
    r = run_tfnative(["stack", "--pid", str(pid), *options, "--json", str(out)], timeout=300)
    assert r.returncode == 0, r.stderr
    return r, load_json(out)["events"][0]


def load_json(path) -> dict:
    with open(path) as f:
        return json.load(f)


def frames_of(doc: dict, event: int = 0, thread: int = 0) -> list:
    return doc["events"][event]["threads"][thread]["frames"]


def python_frames(frames: list) -> list:
    return [(f["function"], os.path.basename(f["file"] or ""), f["line"]) for f in frames if f["kind"] == "python"]


def line_of(path: str, text: str) -> int:
    """1-based line number of the first line of ``path`` containing ``text``."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if text in line:
                return i
    raise AssertionError("%r not in %s" % (text, path))


def pyenv_pythons() -> dict:
    out = {}
    for minor in (10, 11, 12, 13):
        found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.%d.*/bin/python3.%d" % (minor, minor))))
        if found:
            out["3.%d" % minor] = found[-1]
    return out


def raise_core_limit() -> None:
    """A ``preexec_fn``: the child may dump core (``core_pattern`` is ``core`` on these machines)."""
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def make_core(tmp: str, name: str, timeout: float = 600) -> str:
    """Run script ``name`` (``tests/scripts/``) in ``tmp`` until it dumps core; the core's path."""
    proc = subprocess.run([sys.executable, script(name)], cwd=tmp, preexec_fn=raise_core_limit,
                          capture_output=True, timeout=timeout)
    assert proc.returncode < 0, proc.stderr[-2000:]
    path = os.path.join(tmp, "core")
    assert os.path.exists(path), "no core in %s (core_pattern?)" % tmp
    return path


def has_tensorflow() -> bool:
    try:
        import importlib.util

        return importlib.util.find_spec("tensorflow") is not None
    except Exception:
        return False


requires_tf = pytest.mark.skipif(not has_tensorflow(), reason="tensorflow is not installed in this Python")
requires_gdb = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")


def descendants(pid: int) -> List[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def assert_gone(procs: List[psutil.Process], timeout: float = 10.0) -> None:
    """Every process is gone (or a zombie nobody waits for), none left stopped."""
    deadline = time.monotonic() + timeout
    alive: List[psutil.Process] = []
    while time.monotonic() < deadline:
        alive = []
        for p in procs:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        if not alive:
            return
        time.sleep(0.1)
    desc = []
    for p in alive:
        try:
            desc.append("%d %s %s" % (p.pid, p.name(), p.status()))
            p.kill()
        except psutil.NoSuchProcess:
            pass
    raise AssertionError("left behind: %s" % ", ".join(desc))


def wait_for_file(path: str, timeout: float = 120.0, proc: Optional[subprocess.Popen] = None) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path) as f:
                return f.read()
        if proc is not None and proc.poll() is not None:
            raise AssertionError("process exited early with %s" % proc.returncode)
        time.sleep(0.05)
    raise AssertionError("timed out waiting for %s" % path)


@contextlib.contextmanager
def started(argv: List[str], ready: str, cwd: Optional[str] = None, timeout: float = 60) -> Iterator[subprocess.Popen]:
    """Run ``argv`` (a program that writes the file ``ready`` once it is where it is meant to be) and give it from
    then on; killed and reaped on leaving, whatever happens."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        wait_for_file(ready, timeout, proc)
        yield proc
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def held(python: str, program: str, tmp_path, ready_timeout: float = 300) -> Iterator[subprocess.Popen]:
    """Run a test program that takes READY and RELEASE paths (``tf_hang.py``, ``tf_data_hang.py``...):
    give it once it has written READY (it is then blocked where it was meant to be); on leaving, release
    it and check it finishes cleanly; whatever happens, nothing is left running."""
    ready, release = os.path.join(str(tmp_path), "ready"), os.path.join(str(tmp_path), "release")
    proc = subprocess.Popen([python, program, ready, release], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        wait_for_file(ready, ready_timeout, proc)
        yield proc
        with open(release, "w") as f:
            f.write("go")
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def tracer_of(pid: int) -> int:
    """The process tracing ``pid`` (0: none), from /proc/PID/status: TracerPid names the tracing thread, and
    that thread's Tgid its process."""
    with open("/proc/%d/status" % pid) as f:
        tid = next(int(line.split()[1]) for line in f if line.startswith("TracerPid:"))
    if not tid:
        return 0
    try:
        with open("/proc/%d/status" % tid) as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Tgid:"))
    except OSError:  # gone meanwhile
        return tid


def assert_running_untraced(pid: int, within: float = 10.0) -> None:
    """``pid`` runs (not stopped) and nobody traces it: once its tracer has let go (``within`` seconds at
    most, gdb's detach), and still a moment later."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and (tracer_of(pid) != 0 or state_of(pid) in ("t", "T")):
        time.sleep(0.05)
    time.sleep(0.3)
    # running: on a CPU, asleep, or in an uninterruptible wait for I/O (a program that writes, on a busy disk);
    # never stopped ("t" traced, "T" job control)
    state = state_of(pid)
    assert state in ("S", "R", "D"), "process %d is in state %r" % (pid, state)
    assert tracer_of(pid) == 0


def state_of(pid: int) -> Optional[str]:
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def start_merge_workers(tmp_path, modes, tag: str = "w") -> List[subprocess.Popen]:
    """``tests/scripts/merge_worker.py`` processes, one per mode ("peer", "odd"), each with ``tag`` in its
    command line; every one ready (blocked where its mode puts it) on return."""
    procs: List[subprocess.Popen] = []
    for i, mode in enumerate(modes):
        ready = os.path.join(str(tmp_path), "%s-%d" % (tag, i))
        procs.append(subprocess.Popen([sys.executable, script("merge_worker.py"), mode, ready]))
        wait_for_file(ready, proc=procs[-1])
    return procs


def kill_all(procs: List[subprocess.Popen]) -> None:
    """Kill and reap every process of ``procs``."""
    for p in procs:
        p.kill()
        p.wait()


def free_ports(n: int) -> List[int]:
    """``n`` loopback ports free now, below the kernel's ephemeral range: ``tests/scripts/free_ports.py``, which
    test programs run alone import by its path (it says why a port from ``bind(0)`` is not enough)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tfnative_test_free_ports", script("free_ports.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.free_ports(n))
