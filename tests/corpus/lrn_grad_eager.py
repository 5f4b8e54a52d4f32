"""LRNGrad with an output_image of lower rank than its inputs: SIGABRT, eager.

Source: tensorflow/tensorflow issue #66761 ("Aborted (core dumped) with tf.raw_ops.LRNGrad").
TF 2.21: F tensor_shape.cc:362] Check failed: d < dims() (1 vs. 1), in LRNGradOp::Compute on the main thread.
"""
import tensorflow as tf

grads = tf.constant([], shape=[0, 0, 0, 0], dtype=tf.float32)
image = tf.constant([], shape=[0, 0, 0, 0], dtype=tf.float32)
output = tf.constant([], shape=[0], dtype=tf.float32)
lrn = dict(depth_radius=1, bias=1.59018219, alpha=0.117728651, beta=0.404427052)
print("calling", flush=True)
tf.raw_ops.LRNGrad(input_grads=grads, input_image=image, output_image=output, **lrn)  # crash line
