"""N idle Python threads (no TensorFlow) and a heartbeat that logs how long the process was held.

    python many_threads_idle.py READY_FILE GAPS_FILE [N]

The heartbeat thread sleeps 1 ms in a loop; every gap over 5 ms is appended to
GAPS_FILE as "END_MONOTONIC GAP_SECONDS": a debugger that stops the process
shows up as one gap as long as it held it.
"""

import sys
import threading
import time


def idle(event: threading.Event) -> None:
    event.wait()


def heartbeat(path: str) -> None:
    with open(path, "a", buffering=1) as out:
        last = time.monotonic()
        while True:
            time.sleep(0.001)
            now = time.monotonic()
            if now - last > 0.005:
                out.write("%.6f %.6f\n" % (now, now - last))
            last = now


def main() -> None:
    ready, gaps = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 220
    stop = threading.Event()
    for i in range(n):
        threading.Thread(target=idle, args=(stop,), name="idle-%d" % i, daemon=True).start()
    threading.Thread(target=heartbeat, args=(gaps,), name="heartbeat", daemon=True).start()
    with open(ready, "w") as f:
        f.write("ready")
    stop.wait()


main()
