"""Control: a TensorFlow process that is merely slow: eager matmuls, one after the other, forever.

Its main thread is often caught in the same frames as ``fork_matmul.py``'s child (an Eigen contraction waiting
on a ``condition_variable`` for the intra-op pool), but here the pool threads exist and work: neither a
deadlock nor a fork without pools.

argv: READY (written just before the loop).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
x = tf.random.normal((1024, 1024))
with open(READY, "w") as f:
    f.write(str(os.getpid()))
while True:
    x = tf.linalg.normalize(tf.matmul(x, x))[0]  # busy here
