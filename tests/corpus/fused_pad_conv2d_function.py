"""FusedPadConv2D on a rank-2 input computed inside a tf.function: SIGABRT on an executor thread.

Source: tensorflow/tensorflow issue #125505 ("tf.raw_ops.FusedPadConv2D aborts process on rank mismatch
instead of raising an exception", TF 2.21); see also #67527 and #63376. Here the op is buried in a tf.function
that computes its input, paddings and filter from its argument; the unknown-rank input_signature keeps
graph-time shape inference from catching the rank.
TF 2.21: F tensor_shape.cc:362] Check failed: d < dims() (2 vs. 2), in the FusedPadConv2D kernel.
"""
import tensorflow as tf


@tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
def padded_conv(x):
    image = tf.abs(x) + 1.0
    paddings = tf.constant([[0, 0], [1, 1], [1, 1], [0, 0]])
    kernel = tf.fill(tf.stack([3, 3, 1, 1]), 0.5)
    return tf.raw_ops.FusedPadConv2D(input=image, paddings=paddings, filter=kernel, mode="REFLECT",
                                     strides=[1, 1, 1, 1], padding="VALID")


print("calling", flush=True)
print(padded_conv(tf.zeros([3, 2])))  # crash line
