"""``tf.data.Dataset.from_generator`` whose generator waits on a ``queue.Queue`` that no one fills.

Reproduces tensorflow/tensorflow#15755 ("Tensorflow Dataset.from_generator blocks input?"): the generator is
opaque Python to tf.data, and the iterator blocks until it yields (mrry: "the iterator will block until a value
is produced"), and tensorflow/tensorflow#43768 ("Dataset.from_generator() returns a Dataset which freezes
execution upon iteration"). The producer thread that should fill ``ITEMS`` is never started. The main thread
waits in ``IteratorGetNext``; the generator runs on a tf.data thread (inside ``EagerPyFunc``), blocked in
``ITEMS.get()``.

argv: READY (written just before the main thread's blocking ``next``).
"""
import os
import queue
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
ITEMS = queue.Queue()


def produce():  # meant to run on a thread that never got started
    for i in range(4):
        ITEMS.put(i)


def records():
    while True:
        yield ITEMS.get()  # hangs here: generator


def main():
    ds = tf.data.Dataset.from_generator(records, output_signature=tf.TensorSpec((), tf.int64))
    it = iter(ds)
    with open(READY, "w") as f:
        f.write(str(os.getpid()))
    print(next(it))  # hangs here: main


main()
