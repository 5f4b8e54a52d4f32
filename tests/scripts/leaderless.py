"""The main thread calls pthread_exit while two worker threads run on: /proc/PID says ``State: Z``.

usage: leaderless.py READY_FILE
"""

import ctypes
import sys
import threading
import time


def worker(n):
    while True:
        time.sleep(0.05)  # a worker's loop


threads = [threading.Thread(target=worker, args=(i,), name="worker-%d" % i) for i in range(2)]
for t in threads:
    t.start()
with open(sys.argv[1], "w") as f:
    f.write("ready")
ctypes.CDLL(None).pthread_exit(None)
