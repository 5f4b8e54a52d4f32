"""A tf.function with a tf.range loop: tracing builds the loop body's ops under AutoGraph."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


@tf.function
def accumulate(n):
    total = tf.constant(0)
    for i in tf.range(n):
        total += tf.math.square(i)  # the op the breakpoint catches while tracing
    return total


print("total", int(accumulate(tf.constant(4))))
