"""Targets for the crash catcher's tests (``tests/integration/test_watch_crash.py``): ``watch_target.py MODE [PATH]``.

Prints ``ready`` and waits for a line on stdin (the test seizes it meanwhile), then by MODE:
``segv`` (SIGSEGV in ``poke``), ``segv-thread`` (the same in a thread started after the seize), ``handled``
(SIGUSR1 and a SIGSEGV sent to itself, both caught by its handlers: it carries on, exits 0), ``exit`` (exit
status 3), ``ticker PATH`` (a thread and the main thread counting into PATH every 20 ms until a second line).
"""
import ctypes
import os
import signal
import sys
import threading
import time


def poke():
    ctypes.string_at(0)  # SIGSEGV in strlen


def tick(path, stop):
    n = 0
    while not stop.is_set():
        n += 1
        with open(path + ".tmp", "w") as f:
            f.write(str(n))
        os.replace(path + ".tmp", path)
        time.sleep(0.02)


def main():
    mode = sys.argv[1]
    print("ready", flush=True)
    sys.stdin.readline()
    if mode == "segv":
        poke()
    elif mode == "segv-thread":
        t = threading.Thread(target=poke, name="poker")
        t.start()
        t.join()
    elif mode == "handled":
        got = []
        signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
        signal.signal(signal.SIGSEGV, lambda s, f: got.append(s))
        print("armed", flush=True)
        sys.stdin.readline()  # the test has sent SIGUSR1 meanwhile
        os.kill(os.getpid(), signal.SIGSEGV)  # a crash signal the program handles: it carries on
        print("got", sorted(got), flush=True)
        sys.exit(0)
    elif mode == "exit":
        print("bye", flush=True)
        sys.exit(3)
    elif mode == "ticker":
        stop = threading.Event()
        worker = threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), name="reader")
        worker.start()
        tick(sys.argv[2], stop)
        worker.join()
        print("ticked", flush=True)


main()
