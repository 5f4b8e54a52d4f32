"""``multiprocessing.Pool(...).map`` (fork start method) after a Keras call: each forked worker's op waits for
pool threads that do not exist in the child; the parent waits in ``Pool.map``.

Reproduces tensorflow/tensorflow#39431 ("TensorFlow Keras Model Hangs when .predict is Called Inside a
Thread": a ``predict`` in the parent, then ``multiprocessing`` children that call ``predict``),
tensorflow/tensorflow#8220 and tflearn/tflearn#1037 ("Calling model.predict() from multiple processes").

argv: READY (the parent writes it just before its blocking ``Pool.map``).
"""
import multiprocessing
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
# Large enough that the matmul is always split over TensorFlow's intra-op pool (a 256-wide one ran inline in the
# forked workers with Keras 3.15, and nothing hung).
MODEL = tf.keras.Sequential([tf.keras.Input((1024,)), tf.keras.layers.Dense(1024)])
DATA = np.ones((1024, 1024), np.float32)


def predict(i):
    return float(tf.reduce_sum(MODEL(DATA)))  # hangs here: worker


def main():
    print(MODEL.predict(DATA, verbose=0).shape)  # starts TensorFlow's pools in the parent
    pool = multiprocessing.get_context("fork").Pool(2)
    with open(READY, "w") as f:
        f.write(" ".join(str(p.pid) for p in pool._pool))
    print(pool.map(predict, range(2)))  # hangs here: main


main()
