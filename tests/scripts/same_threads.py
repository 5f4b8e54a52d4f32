"""Six threads blocked at the same line, one elsewhere; the main thread joins them.  argv: READY_FILE."""
import os
import sys
import threading

gate = threading.Event()


def pool_worker():
    gate.wait()  # the six wait here


def loner():
    threading.Event().wait()  # the loner waits here


def main():
    threads = [threading.Thread(target=pool_worker, daemon=True) for _ in range(6)]
    threads.append(threading.Thread(target=loner, daemon=True))
    for t in threads:
        t.start()
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(" ".join(str(t.native_id) for t in threads[:6]))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    threads[-1].join()


main()
