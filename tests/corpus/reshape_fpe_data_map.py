"""Reshape in a tf.data map function, the shape from the data: SIGFPE on a tf.data thread.

Source: tensorflow/tensorflow issue #80529 (SIGFPE in tf.raw_ops.Reshape when the known dimensions
multiply to zero and one is -1). The shape is a dataset element, so graph-time shape inference cannot
compute it; the kernel runs on a tf.data worker thread while the main thread waits at the for loop.
"""
import tensorflow as tf


def reshape(shape):
    return tf.raw_ops.Reshape(tensor=tf.fill([5], -3.5e+35), shape=shape)


shapes = tf.data.Dataset.from_tensors(tf.constant([0, 1879048192, 100000000, 1610612736, -1], tf.int32))
ds = shapes.map(reshape)
print("calling", flush=True)
for x in ds:  # crash line
    print(x)
