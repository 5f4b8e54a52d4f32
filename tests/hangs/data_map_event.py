"""tf.data ``map(tf.py_function)`` whose callback waits on a ``threading.Event`` that nobody sets.

The ``map(py_function)`` form of tensorflow/tensorflow#15755 ("Tensorflow Dataset.from_generator blocks input?":
the Python callback is opaque to tf.data and the iterator blocks until it returns) and of the frozen iteration
of tensorflow/tensorflow#43768. The main thread waits in ``IteratorGetNext``; a tf.data thread runs
``wait_for_event``, blocked at ``RELEASE.wait()``.

argv: READY (written just before the main thread's blocking ``next``).
"""
import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
RELEASE = threading.Event()


def wait_for_event(x):
    RELEASE.wait()  # hangs here: callback
    return x


def main():
    ds = tf.data.Dataset.range(4).map(lambda x: tf.py_function(wait_for_event, [x], tf.int64))
    it = iter(ds)
    with open(READY, "w") as f:
        f.write(str(os.getpid()))
    print(next(it))  # hangs here: main


main()
