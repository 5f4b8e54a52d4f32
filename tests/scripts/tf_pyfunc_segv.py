"""A segfault inside a tf.py_function callback, called from the user's loop."""
import ctypes
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


def bad_callback(x):
    ctypes.string_at(0)  # SIGSEGV here
    return x


@tf.function
def step(x):
    return tf.py_function(bad_callback, [x], tf.float32)


def train():
    return step(tf.constant(1.0))  # the user's call


train()
