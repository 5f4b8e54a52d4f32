"""N idle Python threads (no TensorFlow) and a heartbeat that logs how long the process was held.

    python many_threads_idle.py READY_FILE GAPS_FILE [N] [tf]

With "tf": TensorFlow is imported and one tf.function run first (its pools start), and N
counts the process's threads in all: idle Python threads are added up to N.

Two heartbeat threads, one started before the idle threads and one after, sleep
1 ms in a loop; every gap over 5 ms is appended to GAPS_FILE as "END_MONOTONIC
GAP_SECONDS first|last": a debugger that stops the process shows up as a gap as long as it
held that thread.  A tool stops and lets go of threads one after another, in
the order it lists them (the order they were started, for every tool measured):
the first thread may wait longest (stopped first, while the others are being
stopped) or the last one (let go last), so both ends are watched.
"""

import os
import sys
import threading
import time


def idle(event: threading.Event) -> None:
    event.wait()


def heartbeat(path: str, name: str) -> None:
    with open(path, "a", buffering=1) as out:
        last = time.monotonic()
        while True:
            time.sleep(0.001)
            now = time.monotonic()
            if now - last > 0.005:
                out.write("%.6f %.6f %s\n" % (now, now - last, name))
            last = now


def main() -> None:
    ready, gaps = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 220
    stop = threading.Event()
    if sys.argv[4:] == ["tf"]:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        tf.function(lambda x: tf.matmul(x, x))(tf.ones((64, 64))).numpy()
        n -= len(os.listdir("/proc/self/task")) + 1  # the heartbeats are one more
    threading.Thread(target=heartbeat, args=(gaps, "first"), name="heartbeat-first", daemon=True).start()
    for i in range(n - 1):
        threading.Thread(target=idle, args=(stop,), name="idle-%d" % i, daemon=True).start()
    threading.Thread(target=heartbeat, args=(gaps, "last"), name="heartbeat", daemon=True).start()
    with open(ready, "w") as f:
        f.write("ready")
    stop.wait()


main()
