"""Reshape to a shape whose known dimensions multiply to zero, with a -1 to infer: SIGFPE, eager.

Source: tensorflow/tensorflow issue #80529 ("Floating point exception (core dumped) in tf.raw_ops.Reshape").
TF 2.21: integer division by zero in the Reshape kernel's shape code (SIGFPE), on the main thread.
"""
import tensorflow as tf

tensor = tf.constant(-3.5e+35, shape=[5], dtype=tf.float32)
shape = tf.constant([0, 1879048192, 100000000, 1610612736, -1], dtype=tf.int32)
print("calling", flush=True)
tf.raw_ops.Reshape(tensor=tensor, shape=shape)  # crash line
