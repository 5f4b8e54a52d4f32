"""``multiprocessing.Process`` (fork) after Keras ``predict`` calls in the parent: each child's ``predict`` waits
for TensorFlow pool threads that do not exist in the child; the parent waits in ``Process.join``.

The reproducer of tensorflow/tensorflow#39431 ("TensorFlow Keras Model Hangs when .predict is Called Inside a
Thread": "Works" for predictions in the parent, "Never finishes running" once processes are started), still
hanging on TensorFlow 2.21 with Keras 3.

argv: READY (the parent writes its children's pids just before its blocking ``join``).
"""
import multiprocessing
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]


def predict(data):
    model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(4)])
    return model.predict(data, verbose=0)  # hangs here: child


def main():
    data = np.zeros((100, 16))
    for _ in range(2):
        print(predict(data).shape)  # works in the parent, and starts TensorFlow's pools
    children = [multiprocessing.get_context("fork").Process(target=predict, args=(data,)) for _ in range(2)]
    for p in children:
        p.start()
    with open(READY, "w") as f:
        f.write(" ".join(str(p.pid) for p in children))
    for p in children:
        p.join()  # hangs here: main


main()
