"""The main thread waits for an event nobody sets (stuck); a worker keeps changing its stack (moving).

The worker recurses to a depth that follows the clock (one more level every 0.1 s, modulo 50), sleeping at
the bottom: two samples 0.5 s apart always find it at other depths.
"""
import sys
import threading
import time


def descend(depth):
    if depth:
        return descend(depth - 1)
    time.sleep(0.01)


def work():
    while True:
        descend(int(time.monotonic() * 10) % 50)


threading.Thread(target=work, daemon=True).start()
print("ready", flush=True)
sys.stdout.close()
threading.Event().wait()
