"""A process another tracer holds is refused as that: "traced by PID N (name)", never as a security
module's refusal.  Real processes: a target of two threads, and a second process that seizes one of
its threads: not the first (the check before the hold reads the first thread's ``TracerPid`` only: as
when two tfnatives race to hold the same process and the other one got there first), and the first."""

import os
import subprocess
import sys
import time

import pytest

from ..utils import ROOT, TFNATIVE

TARGET = """
import sys, threading, time
threading.Thread(target=lambda: time.sleep(3600), daemon=True).start()
print("ready", flush=True)
time.sleep(3600)
"""

HOLDER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
if libc.ptrace(0x4206, int(sys.argv[1]), None, None) != 0:  # PTRACE_SEIZE: the thread runs on
    print("seize failed: %s" % os.strerror(ctypes.get_errno()), flush=True)
    sys.exit(1)
print("held", flush=True)
sys.stdin.read()  # until the test closes it; the kernel lets go of the thread at our exit
"""


@pytest.mark.parametrize("which", ["a thread", "the first thread"])
def test_a_thread_traced_by_another_process_is_named(which):
    target = subprocess.Popen([sys.executable, "-c", TARGET], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              text=True)
    holder = None
    try:
        target.stdout.readline()
        deadline = time.monotonic() + 30
        while True:
            tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % target.pid))
            if len(tids) >= 2:
                break
            assert time.monotonic() < deadline, "the target's second thread never started"
            time.sleep(0.05)
        thread = [t for t in tids if t != target.pid][0] if which == "a thread" else target.pid
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(thread)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        said = holder.stdout.readline().strip()
        if said != "held":
            pytest.skip("this machine does not let a process trace another: %s" % said)
        r = subprocess.run(TFNATIVE + ["stack", "--pid", str(target.pid)], capture_output=True, text=True,
                           timeout=120, cwd=ROOT, stdin=subprocess.DEVNULL)
        assert r.returncode != 0 and r.returncode != 70 and "Traceback" not in r.stderr, r.stderr
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("tfnative: error: "), r.stderr
        assert "security module" not in last, last
        if thread != target.pid:  # found by the refusal of the hold itself
            assert "its thread %d is traced by PID %d (python" % (thread, holder.pid) in last, last
        else:  # found before the hold
            assert "process %d is already being traced by PID %d (python" % (thread, holder.pid) in last, last
        for tid in os.listdir("/proc/%d/task" % target.pid):  # tfnative let go of what it held
            with open("/proc/%d/task/%s/status" % (target.pid, tid)) as f:
                held = "TracerPid:\t%d\n" % (holder.pid if int(tid) == thread else 0)
                assert held in f.read(), tid
    finally:
        if holder is not None:
            holder.stdin.close()
            holder.wait(timeout=30)
        target.kill()
        target.wait()
