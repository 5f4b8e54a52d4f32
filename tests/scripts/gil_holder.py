"""One thread holds the GIL inside a C call (PyDLL keeps it); two Python threads wait for it."""
import ctypes
import sys
import threading
import time


def spin():
    while True:
        sum(range(1000))


def hold_gil():
    ctypes.PyDLL(None).sleep(120)


for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(0.3)
print("ready", flush=True)
sys.stdout.close()
hold_gil()
