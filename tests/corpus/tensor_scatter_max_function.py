"""TensorScatterMax with malformed (rank-3) indices inside a tf.function: SIGABRT on an executor thread.

Source: tensorflow/tensorflow issue #94133 ("Fatal crash in tf.raw_ops.TensorScatterMax with malformed
indices"); see also #65668 ("Check failed in tf.raw_ops.TensorScatterMax ... when the rank of indices > 2").
Unknown-rank input_signature: graph-time shape inference cannot reject the indices.
TF 2.21: F tensor_shape.cc:362] Check failed: d < dims() (1 vs. 1), in the TensorScatterMax kernel.
"""
import tensorflow as tf


@tf.function(input_signature=[tf.TensorSpec(None, tf.float64), tf.TensorSpec(None, tf.int64),
                              tf.TensorSpec(None, tf.float64)])
def scatter_max(tensor, indices, updates):
    return tf.raw_ops.TensorScatterMax(tensor=tensor, indices=indices, updates=updates)


tensor = tf.zeros([1, 10, 4], tf.float64)
indices = tf.constant([[[0]]], dtype=tf.int64)  # shape (1, 1, 1) instead of (1, 3)
updates = tf.constant([0.0], dtype=tf.float64)
print("calling", flush=True)
print(scatter_max(tensor, indices, updates))  # crash line
