"""The floor of a ptrace hold: stop every thread of PID and let it go, reading nothing.

    python ptrace_floor.py PID

What any ptrace-based snapshot pays at least (``PTRACE_SEIZE`` of every thread beforehand, then
``PTRACE_INTERRUPT`` of all, a ``waitpid`` for each stop, ``PTRACE_DETACH`` of all), run as a tool by
``bench_pause.py`` so that its pause is measured as the others' are: by the target's heartbeat.
No registers, no memory: the gap between this row and ``tfnative stack --pid`` is what tfnative's copy
costs the target.  A signal that stops a thread meanwhile is handed back at the detach.
"""

import ctypes
import os
import sys

PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT, WALL = 17, 0x4206, 0x4207, 0x40000000


def main() -> None:
    pid = int(sys.argv[1])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_size_t, ctypes.c_size_t)
    libc.ptrace.restype = ctypes.c_long
    tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    seized = [t for t in tids if libc.ptrace(PTRACE_SEIZE, t, 0, 0) == 0]
    for t in seized:
        libc.ptrace(PTRACE_INTERRUPT, t, 0, 0)
    signals = {}
    for t in seized:
        try:
            status = os.waitpid(t, WALL)[1]
        except ChildProcessError:
            continue
        if os.WIFSTOPPED(status) and status >> 16 == 0 and os.WSTOPSIG(status) != 5:
            signals[t] = os.WSTOPSIG(status)  # a signal on its way: handed back
    for t in seized:
        libc.ptrace(PTRACE_DETACH, t, 0, signals.get(t, 0))
    print("held and let go %d threads" % len(seized))


main()
