"""A parent with idle children, for bench/bench_follow.py.

argv: IDLE (fork children that sleep), STEPS (the parent's timed loop), FOLLOWED (1: wait until each idle child
is traced by a debugger of its own before the loop).  Prints one JSON line: the seconds from Process.start() to a
spawn child's first line and to a fork child being traced, and the parent's loop time.
"""
import json
import multiprocessing as mp
import os
import sys
import time


def tracer(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return next(int(line.split()[1]) for line in f if line.startswith("TracerPid:"))
    except OSError:
        return 0


def first_line(t0, q):
    q.put(time.time() - t0)


def until_traced(t0, q):
    while not tracer(os.getpid()) or tracer(os.getpid()) == tracer(os.getppid()):
        time.sleep(0.001)
    q.put(time.time() - t0)


def idle():
    time.sleep(3600)


def timed(method, target):
    q = mp.get_context(method).SimpleQueue()
    p = mp.get_context(method).Process(target=target, args=(time.time(), q))
    p.start()
    took = q.get()
    p.join()
    return took


if __name__ == "__main__":
    n_idle, steps, followed = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
    out = {"spawn_first_line_s": timed("spawn", first_line)}
    if followed:
        out["fork_traced_s"] = timed("fork", until_traced)
    kids = [mp.get_context("fork").Process(target=idle, daemon=True) for _ in range(n_idle)]
    for k in kids:
        k.start()
    deadline = time.monotonic() + 120
    while followed and time.monotonic() < deadline and not all(tracer(k.pid) for k in kids):
        time.sleep(0.01)
    time.sleep(3)  # steady state: the sessions' start (symbols, arming) is over, in every way alike
    t = time.perf_counter()
    acc = 0
    for i in range(steps):
        acc += i * i % 7
        if i % 1000 == 0:
            os.getppid()
    out["loop_s"] = time.perf_counter() - t
    print(json.dumps(out), flush=True)
    for k in kids:
        k.kill()
