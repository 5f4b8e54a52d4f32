"""Three ways a TensorFlow program gets stuck, one per MODE (argv[1]); each prints "ready" once in place.

gil:      a tf.py_function callback calls a blocking C function through ctypes.PyDLL, which keeps the GIL;
          two Python threads wait for the GIL; the main thread waits for the tf.function ``step``.
pool:     the inter-op pool has 2 threads; two Python threads each call ``wait_step``, whose callback waits for
          an event that only ``set_step``'s callback sets; the main thread calls ``set_step``, which never
          gets a pool thread.
executor: the main thread waits for ``step``, whose callback waits for an event nobody sets (the GIL free,
          the inter-op pool has a free thread).
"""
import ctypes
import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

MODE = sys.argv[1]
tf.config.threading.set_inter_op_parallelism_threads(2)
EVENT = threading.Event()
ENTERED = threading.Semaphore(0)
LIBC = ctypes.PyDLL(None)  # PyDLL: the GIL stays held during the call
SPINNING = []


def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def spin():
    while True:
        sum(range(1000))


def hold_gil(x):
    for _ in range(2):
        SPINNING.append(threading.Thread(target=spin, daemon=True))
        SPINNING[-1].start()
    say("ready")
    LIBC.sleep(3600)
    return x


def wait_for_event(x):
    ENTERED.release()
    EVENT.wait()
    return x


def set_event(x):
    EVENT.set()
    return x


CALLBACKS = {"gil": hold_gil, "pool": wait_for_event, "executor": wait_for_event}


@tf.function
def step(x):
    y = tf.py_function(CALLBACKS[MODE], [x], tf.float32)
    return y + 1


@tf.function
def set_step(x):
    return tf.py_function(set_event, [x], tf.float32)


def wait_step():
    step(tf.constant(1.0))


def main():
    x = tf.constant(1.0)
    if MODE == "pool":
        set_step.get_concrete_function(x)  # traced now: its call below goes straight to the executor
        step.get_concrete_function(x)
        callers = [threading.Thread(target=wait_step, daemon=True) for _ in range(2)]
        for t in callers:
            t.start()
        for _ in callers:
            ENTERED.acquire()  # both pool threads are in wait_for_event
        say("ready")
        set_step(x)
    elif MODE == "executor":
        say("ready")
        step(x)  # executor: waits here
    else:
        step(x)  # gil: waits here


main()
