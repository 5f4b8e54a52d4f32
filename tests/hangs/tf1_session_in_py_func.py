"""``Session.run`` inside ``tf.compat.v1.py_func``s exhausting the inter-op pool (graph mode, 2 inter-op threads).

Reproduces tensorflow/tensorflow#4917 ("QueueRunner deadlock when using all CPUs": ``py_func`` callbacks that
call ``sess.run`` occupy every inter-op thread, and the inner runs they wait for never get one).  Three
``py_func`` nodes run in one ``sess.run``; two take both pool threads and each calls ``sess.run(inner)``, which
needs a pool thread.  The main thread waits in ``Session.run``.

argv: READY (written just before the blocking ``sess.run``).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
READY = sys.argv[1]

a = tf1.placeholder(tf.float32, [])
inner = a * 2.0
sess = tf1.Session(config=tf1.ConfigProto(inter_op_parallelism_threads=2, intra_op_parallelism_threads=1))


def transform(x):
    return np.float32(sess.run(inner, {a: x}))  # hangs here: callback


outs = [tf1.py_func(transform, [tf.constant(float(i))], tf.float32) for i in range(3)]
with open(READY, "w") as f:
    f.write(str(os.getpid()))
print(sess.run(tf.add_n(outs)))  # hangs here: main
