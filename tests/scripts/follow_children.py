"""Children of every kind for ``attach --follow-children``: each waits until a debugger of its own holds it.

argv: PIDFILE (the idle child's pid goes there; it outlives this script).  Prints each child's pid and exit
code; exits with status 3.
"""
import ctypes
import multiprocessing as mp
import os
import subprocess
import sys
import time


def tracer(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("TracerPid:"))


def wait_followed():
    """Until this process is traced by another debugger than its parent's (a fork child is briefly held by
    the parent's gdb, which lets go of it)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        mine = tracer(os.getpid())
        if mine and mine != tracer(os.getppid()):
            return
        time.sleep(0.01)


def uname_child():
    wait_followed()
    os.uname()


def crash_child():
    wait_followed()
    ctypes.string_at(0)


def idle_child(pidfile):
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # it outlives the script: the script's pipes (its output, the resource tracker's)
        os.dup2(null, fd)  # end with the script
    os.closerange(3, 4096)
    wait_followed()
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    time.sleep(600)


def run(method, target, *args):
    p = mp.get_context(method).Process(target=target, args=args)
    p.start()
    p.join()
    print("%s %s %d %s" % (method, target.__name__, p.pid, p.exitcode), flush=True)


if __name__ == "__main__":
    run("spawn", uname_child)
    run("fork", crash_child)
    run("spawn", crash_child)
    sub = subprocess.run([sys.executable, "-c", "import follow_children as f, os; f.wait_followed(); os.uname()"],
                         env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__))))
    print("subprocess", sub.returncode, flush=True)
    idle = mp.get_context("fork").Process(target=idle_child, args=(sys.argv[1],))
    idle.start()
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
    os._exit(3)  # the idle child runs on
