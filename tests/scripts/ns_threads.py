"""Two threads wait on an event while the main thread sleeps; the ready file gets the pid this process sees."""
import os
import sys
import threading
import time

done = threading.Event()


def worker_wait():
    done.wait()


def main(path):
    threads = [threading.Thread(target=worker_wait, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(0.05)


main(sys.argv[1])
