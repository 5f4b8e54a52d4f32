"""A hung TensorFlow process with many threads: N Python threads each waiting on its own threading.Event (at
the same user line) and the main thread in a tf.function blocked in a tf.py_function that sleeps.  Prints
"ready" once the callback runs; runs for an hour unless killed.

    python tf_hang_threads.py [N]
"""

import os
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
events = [threading.Event() for _ in range(N)]
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
