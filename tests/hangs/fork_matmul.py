"""``os.fork()`` after TensorFlow started its thread pools: the child's MatMul waits for pool threads that do not
exist in the child; the parent waits in ``os.waitpid``.

Reproduces tensorflow/tensorflow#51832 ("Forked tf script deadlocks unless disabling intra op parallelism")
and tensorflow/tensorflow#8220 ("Session hang issue with python multiprocessing": fork after TF ran; the child
"may only execute async-signal-safe operations").

argv: READY (the parent writes the child's pid just before its blocking ``waitpid``).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
x = tf.random.normal((512, 512))
print(float(tf.reduce_sum(tf.matmul(x, x))))  # starts TensorFlow's pools

child = os.fork()
if child == 0:
    y = tf.matmul(x, x)  # hangs here: child
    print(float(tf.reduce_sum(y)))
    os._exit(0)
with open(READY, "w") as f:
    f.write("%d" % child)
os.waitpid(child, 0)  # hangs here: main
