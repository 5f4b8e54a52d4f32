"""A ``tf.function`` whose ``tf.py_function`` callback runs another ``tf.function``, with one inter-op thread:
the inner function needs a pool thread that the callback itself occupies.

The pattern of tensorflow/tensorflow#32454 ("Calling tf.function from tf.py_function in dataset.map hangs") and
tensorflow/tensorflow#48418 ("Deadlock when setting interop thread thread to 1 with a tf Dataset and tf
function"), whose reproducers as posted no longer hang on TensorFlow 2.21; with one inter-op thread and a
callback called from a ``tf.function``, it still does. The main thread waits for ``outer``; the only inter-op
thread runs ``callback``, which waits for ``inner``.

argv: READY (written just before the blocking call).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

tf.config.threading.set_inter_op_parallelism_threads(1)
READY = sys.argv[1]


@tf.function
def inner(x):
    return tf.random.uniform(()) + x * 2.0


def callback(x):
    return inner(x)  # hangs here: callback


@tf.function
def outer(x):
    return tf.py_function(callback, [x], tf.float32) + tf.py_function(callback, [x + 1.0], tf.float32)


with open(READY, "w") as f:
    f.write(str(os.getpid()))
print(outer(tf.constant(1.0)))  # hangs here: main
