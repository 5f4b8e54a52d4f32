"""Programs for ``tests/integration/test_watch.py``: healthy jobs a stack-only watchdog calls hung, ranks.

argv: MODE READY [ARG]; READY is written once the program is where the mode puts it.

- ``sleep_loop``: a step loop that sleeps at the same line every step (healthy); a SIGUSR1 writes READY.usr1;
- ``long_op``: each step is one long C call (``sum(range(...))``): the stack does not change, the CPU does;
- ``busy_child``: the parent waits in ``os.waitpid`` for a forked child that computes (healthy);
- ``queue_pipeline``: a producer thread makes an element every 0.3 s (slow I/O, a sleep) and puts it in a
  ``queue.Queue``; the consumer waits at the same ``get`` line for each (healthy);
- ``rank``: rank ARG of a 3-rank job: ranks step (sleep) for 6 s then wait for each other on an Event nobody
  sets; rank 2 deadlocks at once on a lock it already holds (the straggler, then the outlier);
- ``two_hangs``: blocked ARG seconds in one wait (a lock acquired with a time-out, no wake-up meanwhile), then
  blocked for good in another (an Event nobody sets);
- ``exit``: exit with status ARG; ``signal``: die of signal ARG.
"""
import os
import queue
import signal
import sys
import threading
import time

MODE, READY = sys.argv[1], sys.argv[2]
ARG = sys.argv[3] if len(sys.argv) > 3 else None


def ready():
    with open(READY, "w") as f:
        f.write(str(os.getpid()))


def sleep_loop():
    signal.signal(signal.SIGUSR1, lambda *_: open(READY + ".usr1", "w").close())
    ready()
    step = 0
    while True:
        step += 1
        time.sleep(0.3)  # healthy: sleeps here every step


def long_op():
    ready()
    while True:
        total = sum(range(10 ** 10))  # healthy: one long op
        print(total)


def busy_child():
    pid = os.fork()
    if pid == 0:
        while True:
            sum(range(10 ** 10))  # healthy: the child computes
    ready()
    os.waitpid(pid, 0)  # healthy: the parent waits for its child


def queue_pipeline():
    q = queue.Queue(maxsize=2)

    def produce():
        i = 0
        while True:
            time.sleep(0.3)  # slow input
            q.put(i)
            i += 1

    threading.Thread(target=produce, name="producer", daemon=True).start()
    ready()
    while True:
        q.get()  # healthy: the consumer waits here for each element


def rank():
    me = int(ARG)
    lock = threading.Lock()
    ready()
    if me == 2:
        lock.acquire()
        stuck(lock)
    start = time.monotonic()
    while time.monotonic() - start < 6:
        time.sleep(0.2)  # a step
    peer_wait()


def stuck(lock):
    lock.acquire()  # hangs here: straggler


def peer_wait():
    threading.Event().wait()  # hangs here: peer


def two_hangs():
    lock = threading.Lock()
    lock.acquire()
    ready()
    lock.acquire(timeout=float(ARG))  # hangs here: first
    threading.Event().wait()  # hangs here: second


def die():
    ready()
    if MODE == "signal":
        os.kill(os.getpid(), int(ARG))
    sys.exit(int(ARG))


{"sleep_loop": sleep_loop, "long_op": long_op, "busy_child": busy_child, "queue_pipeline": queue_pipeline,
 "rank": rank, "two_hangs": two_hangs, "exit": die, "signal": die}[MODE]()
