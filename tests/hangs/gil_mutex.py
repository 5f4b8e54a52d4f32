"""A C extension thread holds a pthread mutex and waits for the GIL, while the GIL holder waits for that mutex.

The deadlock of RaspberryPiFoundation/python-build-hat#13 ("fix deadlock with GIL": a finalizer holding the
GIL waits for a callback thread that waits for the GIL) and Auterion/libmav-python#11 ("release GIL in
operations on the connection that can hold a mutex ... the receive thread tries to acquire the GIL to run the
python callback").  Thread "ext-worker" calls ``update_table`` (ctypes.CDLL, GIL released), which locks
``table_mutex`` and calls back into Python: it waits for the GIL.  The main thread calls ``lock_table`` through
``ctypes.PyDLL`` (the GIL stays held) and waits for ``table_mutex``.

argv: READY [SO]: SO is ``gil_mutex.cpp`` built with ``g++ -shared -fPIC`` (built next to READY when absent).
"""
import ctypes
import os
import subprocess
import sys
import threading
import time

READY = sys.argv[1]
SO = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(READY)), "gil_mutex.so")
if not os.path.exists(SO):
    subprocess.run(["g++", "-shared", "-fPIC", "-O0", "-g", "-o", SO,
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "gil_mutex.cpp"), "-lpthread"], check=True)

CALLBACK = ctypes.CFUNCTYPE(None)


@CALLBACK
def on_update():
    pass


def main():
    released = ctypes.CDLL(SO)  # calls release the GIL
    holding = ctypes.PyDLL(SO)  # calls keep the GIL
    worker = threading.Thread(target=released.update_table, args=(on_update,), name="ext-worker")
    worker.start()
    held = ctypes.c_int.in_dll(released, "mutex_held")
    while not held.value:
        time.sleep(0.01)
    with open(READY, "w") as f:
        f.write(str(os.getpid()))
    holding.lock_table()  # hangs here: main
    worker.join()


main()
