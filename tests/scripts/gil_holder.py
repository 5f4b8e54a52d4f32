"""The main thread holds the GIL inside a C call made during a garbage collection; two threads wait for it.

``Holder.__del__`` runs in ``gc.collect()`` and calls libc's ``sleep`` through ``ctypes.PyDLL``, which keeps
the GIL during the call; the two ``spin`` threads wait for the GIL.
"""
import ctypes
import gc
import sys
import threading
import time


def spin():
    while True:
        sum(range(1000))


def hold_gil():
    ctypes.PyDLL(None).sleep(120)


class Holder:
    def __del__(self):
        hold_gil()


def make_garbage():
    h = Holder()
    h.cycle = h  # only the collector frees it


for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(0.3)
gc.disable()
make_garbage()
print("ready", flush=True)
sys.stdout.close()
gc.collect()
