"""Lock-order deadlock between two Python threads: two ``threading.RLock``s taken in opposite order.

Plain Python, no TensorFlow: the lock-order (ABBA) deadlock that python-hyper/hyper#280 ("try to avoid
deadlock", for hyper#275) guards against by making the HTTP/2 connection's three ``threading.RLock``s
(``_lock``, ``_write_lock``, ``_read_lock``) always be taken in one order.  Thread "loader" holds ``lock_a``
and waits for ``lock_b``; thread "saver" holds ``lock_b`` and waits for ``lock_a``; the main thread waits in
``join`` for them.

argv: READY (written once both threads hold their first lock, just before they take the second).
"""
import os
import sys
import threading

READY = sys.argv[1]
lock_a = threading.RLock()
lock_b = threading.RLock()
both_hold = threading.Barrier(3)


def load():
    with lock_a:
        both_hold.wait()
        both_hold.wait()
        with lock_b:  # hangs here: loader
            pass


def save():
    with lock_b:
        both_hold.wait()
        both_hold.wait()
        with lock_a:  # hangs here: saver
            pass


def main():
    threads = [threading.Thread(target=load, name="loader"), threading.Thread(target=save, name="saver")]
    for t in threads:
        t.start()
    both_hold.wait()
    with open(READY, "w") as f:
        f.write(str(os.getpid()))
    both_hold.wait()
    for t in threads:
        t.join()  # hangs here: main


main()
