"""A tf.function blocked in a tf.py_function that sleeps: the main thread waits inside TFE_Execute.
Prints "ready" once the callback runs; runs for an hour unless killed.

    python tf_hang.py [N]

N: as many more Python threads, each waiting on its own threading.Event (a hung process with many threads).
"""

import os
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

events = [threading.Event() for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 0)]
for i, ev in enumerate(events):
    threading.Thread(target=ev.wait, name="waiter-%d" % i, daemon=True).start()


def slow(x):
    print("ready", flush=True)
    time.sleep(3600)
    return x


@tf.function(autograph=False)  # no AutoGraph temp file left behind when the process is killed
def f(x):
    return tf.py_function(slow, [x], tf.float32)


f(tf.constant(1.0))
sys.exit(0)
