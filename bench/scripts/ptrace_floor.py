"""The floor of a ptrace hold: stop every thread of PID and let it go, reading nothing.

    python ptrace_floor.py PID

What any ptrace-based snapshot pays at least, done the cheapest way known here (the way
``tfnative/sources/ptrace.py`` does it): a thread of its own seizes every thread beforehand
(``PTRACE_SEIZE`` stops nothing), then ``PTRACE_INTERRUPT`` of all, then one ``PTRACE_GETREGS`` of each
(which succeeds once the thread is in its stop; a thread not there yet is waited for), then that thread
ends and the kernel detaches all of them in one pass.  Run as a tool by ``bench_pause.py`` so that its
pause is measured as the others' are: by the target's heartbeats.  No memory read: the gap between this
row and ``tfnative stack --pid`` is what tfnative's copy costs the target.
"""

import ctypes
import os
import sys
import threading

PTRACE_GETREGS, PTRACE_SEIZE, PTRACE_INTERRUPT, WALL = 12, 0x4206, 0x4207, 0x40000000


def hold(pid: int, done: list) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_size_t, ctypes.c_size_t)
    libc.ptrace.restype = ctypes.c_long
    tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    seized = [t for t in reversed(tids) if libc.ptrace(PTRACE_SEIZE, t, 0, 0) == 0]
    seized.reverse()
    regs = ctypes.create_string_buffer(27 * 8)
    for t in seized:
        libc.ptrace(PTRACE_INTERRUPT, t, 0, 0)
    for t in seized:
        if libc.ptrace(PTRACE_GETREGS, t, 0, ctypes.addressof(regs)) == -1:
            try:
                os.waitpid(t, WALL)  # not stopped yet (or gone)
            except ChildProcessError:
                continue
            libc.ptrace(PTRACE_GETREGS, t, 0, ctypes.addressof(regs))
    done.append((len(seized), threading.get_native_id()))
    # returning ends this thread, the tracer: the kernel detaches every thread it held


def main() -> None:
    done: list = []
    tracer = threading.Thread(target=hold, args=(int(sys.argv[1]), done))
    tracer.start()
    tracer.join()
    count, tid = done[0]
    while os.path.exists("/proc/self/task/%d" % tid):
        pass
    print("held and let go %d threads" % count)


main()
