"""A healthy TensorFlow step loop that a stack-only watchdog would call hung (``tfnative watch``, issue #37).

Each step waits for the next element of a slow tf.data pipeline (its map callback, a ``tf.py_function``, sleeps:
the same wait element after element, the main thread at the same line each time), runs a small ``tf.function``,
prints ``step N`` and sleeps at the same line.  It never ends by itself.

usage: tf_watch_steps.py READY_FILE (written, with the pid, after the first step)
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


def slow_element(x):
    time.sleep(0.4)  # the pipeline's wait, the same for every element
    return x


@tf.function
def step(x):
    return tf.reduce_sum(tf.square(tf.cast(x, tf.float32) + tf.ones([64])))


it = iter(tf.data.Dataset.range(1 << 40).map(lambda x: tf.py_function(slow_element, [x], tf.int64)))
step(next(it))
with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
n = 0
while True:
    n += 1
    step(next(it))  # the step: waits for the pipeline, then computes
    print("step %d" % n, flush=True)
    time.sleep(0.5)  # the loop sleeps at this line every step
