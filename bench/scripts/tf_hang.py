"""A tf.function blocked in a tf.py_function that sleeps: the main thread waits inside TFE_Execute.
Prints "ready" once the callback runs; runs for an hour unless killed."""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402


def slow(x):
    print("ready", flush=True)
    time.sleep(3600)
    return x


@tf.function(autograph=False)  # no AutoGraph temp file left behind when the process is killed
def f(x):
    return tf.py_function(slow, [x], tf.float32)


f(tf.constant(1.0))
sys.exit(0)
