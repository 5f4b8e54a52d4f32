"""The signal that stopped a process nobody traces (``/proc`` shows state ``T``, not which signal): a seize of its
main thread reports its group stop with the signal (``sources/ptrace.group_stop_signal``, read by ``watch
--no-crash-watch`` for a stopped rank); the process stays stopped, every thread, and untraced.  A running
process gives None and runs on."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tfnative.core import procfs
from tfnative.snapshot.progress import stopped_by

THREADS = "import threading, time; [threading.Thread(target=time.sleep, args=(60,)).start() for _ in range(3)]; " \
          "print('ready', flush=True); time.sleep(60)"


def states(pid):
    return sorted(procfs.state(pid, int(t)) for t in os.listdir("/proc/%d/task" % pid))


def tracer(pid):
    return procfs.status(pid).get("TracerPid")


@pytest.mark.parametrize("sig", [signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, None])
def test_the_stopping_signal_is_read_and_the_process_stays_as_it_was(sig):
    # a process group of its own, whose parent (this test) is in another group of the same session: not
    # orphaned, so the kernel does not discard SIGTSTP and SIGTTIN (it does for an orphaned group)
    p = subprocess.Popen([sys.executable, "-c", THREADS], stdout=subprocess.PIPE, text=True,
                         preexec_fn=lambda: os.setpgid(0, 0))
    try:
        assert p.stdout.readline().strip() == "ready"
        if sig is not None:
            os.kill(p.pid, sig)
            deadline = time.monotonic() + 10
            while states(p.pid) != ["T"] * 4:
                assert time.monotonic() < deadline, states(p.pid)
                time.sleep(0.01)
        assert stopped_by(p.pid) == (sig.name if sig is not None else None)
        time.sleep(0.2)
        assert states(p.pid) == (["T"] * 4 if sig is not None else ["S"] * 4)  # as it was: stopped, or running
        assert tracer(p.pid) == "0"
        if sig is not None:
            os.kill(p.pid, signal.SIGCONT)
            deadline = time.monotonic() + 10
            while "T" in states(p.pid):
                assert time.monotonic() < deadline, states(p.pid)
                time.sleep(0.01)
    finally:
        p.kill()
        p.wait()
