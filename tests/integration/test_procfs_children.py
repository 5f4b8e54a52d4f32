"""The /proc readers on a child process in known states (stopped, gone, traced): a process of its own, so an
integration test (the readers on this test's own process are in ``tests/unit/test_procfs.py``); no gdb."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tfnative.core import procfs


def test_a_stopped_then_gone_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "é b"])
    try:
        # Popen returns once the child exists, maybe before its exec: until then /proc shows no argv of its own
        deadline = time.monotonic() + 10
        while procfs.cmdline(child.pid)[-1:] != ["é b"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.cmdline(child.pid) == [sys.executable, "-c", "import time; time.sleep(60)", "é b"]
        assert procfs.cmdline(child.pid, child.pid) == procfs.cmdline(child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while procfs.state(child.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.state(child.pid) == "T"
    finally:
        child.kill()
        child.wait()
    assert procfs.state(child.pid) is None
    assert procfs.comm(child.pid) == ""
    assert procfs.cmdline(child.pid) == []
    with pytest.raises(ProcessLookupError):
        procfs.tids(child.pid)
    assert procfs.num_threads(child.pid) is None


def test_the_tracer_is_the_tracing_threads_process():
    """TracerPid names the thread that traces; ``tracer`` gives its process (``stack``'s hold traces from a
    thread of its own)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_size_t, ctypes.c_size_t)
    seen = {}
    done = threading.Event()

    def trace() -> None:
        seen["seize"] = libc.ptrace(0x4206, child.pid, 0, 0)  # PTRACE_SEIZE: stops nothing
        seen["tid"] = threading.get_native_id()
        seen["tracer"] = procfs.tracer(child.pid)
        done.wait(10)  # its end detaches the child

    try:
        t = threading.Thread(target=trace)
        t.start()
        while "tracer" not in seen and t.is_alive():
            time.sleep(0.01)
        assert seen["seize"] == 0, os.strerror(ctypes.get_errno())
        assert seen["tid"] != os.getpid()
        assert int(procfs.status(child.pid)["TracerPid"]) == seen["tid"]
        assert seen["tracer"] == procfs.tracer(child.pid) == os.getpid()
        done.set()
        t.join()
        deadline = time.monotonic() + 10
        while procfs.tracer(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.tracer(child.pid) == 0 and procfs.state(child.pid) in ("S", "R")
    finally:
        done.set()
        child.kill()
        child.wait()


def test_the_tracer_of_one_thread_is_not_the_process_s():
    """``TracerPid`` is each thread's own: a thread of a process traced alone (``attach`` seizes each thread)
    has a tracer that ``tracer(pid, tid)`` gives, the process's first thread none; its thread count is the
    one ``/proc`` says (``num_threads``)."""
    child = subprocess.Popen([sys.executable, "-c", (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_size_t, ctypes.c_size_t)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        assert procfs.num_threads(child.pid) == 2 == int(procfs.status(child.pid)["Threads"])
        (other,) = [tid for tid in procfs.tids(child.pid) if tid != child.pid]
        seen = {}
        done = threading.Event()

        def trace() -> None:
            seen["seize"] = libc.ptrace(0x4206, other, 0, 0)  # PTRACE_SEIZE of that thread alone
            seen["errno"] = ctypes.get_errno()
            seen["thread"] = procfs.tracer(child.pid, other)
            seen["process"] = procfs.tracer(child.pid)
            done.wait(10)  # its end detaches the thread

        t = threading.Thread(target=trace)
        t.start()
        try:
            while "process" not in seen and t.is_alive():
                time.sleep(0.01)
            assert seen["seize"] == 0, os.strerror(seen["errno"])
            assert seen["thread"] == procfs.tracer(child.pid, other) == os.getpid()
            assert seen["process"] == procfs.tracer(child.pid) == procfs.tracer(child.pid, child.pid) == 0
        finally:
            done.set()
            t.join()
        deadline = time.monotonic() + 10
        while procfs.tracer(child.pid, other) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.tracer(child.pid, other) == 0
    finally:
        child.kill()
        child.wait()
    with pytest.raises(OSError):
        procfs.tracer(child.pid)  # gone: the caller decides what that means


def test_exited_and_kernel_threads():
    """``exited``: a running process has not, a zombie (all its threads zombies) and a gone pid have; a zombie
    leader whose threads live (pthread_exit) has not.  ``kernel_thread``: kthreadd (pid 2), not a process."""
    assert not procfs.exited(os.getpid()) and not procfs.exiting(os.getpid())
    assert not procfs.kernel_thread(os.getpid()) and not procfs.kernel_thread(1)
    if procfs.comm(2) == "kthreadd":
        assert procfs.kernel_thread(2)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while procfs.state(child.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.exited(child.pid) and procfs.exiting(child.pid)
    finally:
        child.wait()
    assert procfs.exited(child.pid)  # reaped: gone
    leaderless = subprocess.Popen([sys.executable, "-c", (
        "import ctypes, threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "print('ready', flush=True)\n"
        "ctypes.CDLL(None).pthread_exit(None)\n")], stdout=subprocess.PIPE)
    try:
        assert leaderless.stdout is not None and leaderless.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 30
        while procfs.state(leaderless.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.state(leaderless.pid) == "Z" and procfs.exiting(leaderless.pid)
        assert not procfs.exited(leaderless.pid)
    finally:
        leaderless.kill()
        leaderless.wait()
