"""LRNGrad inside a custom Keras layer's call, its inputs computed there: SIGABRT, eager.

Source: tensorflow/tensorflow issue #66761 ("Aborted (core dumped) with tf.raw_ops.LRNGrad"), the op buried in
user code: the layer computes an output_image of lower rank than its inputs from the batch it is called on.
The layer is called on an eager tensor, so Keras runs its call eagerly (one eager op, not a tf.function).
TF 2.21: F tensor_shape.cc:362] Check failed: d < dims() (1 vs. 1), in LRNGradOp::Compute on the main thread.
"""
import tensorflow as tf


class LRNGradLayer(tf.keras.layers.Layer):
    def call(self, batch):
        grads = tf.reshape(batch, [0, 0, 0, 0])
        image = tf.zeros_like(grads)
        output = tf.reshape(batch, [-1])  # rank 1: the kernel reads its dimension 1
        lrn = dict(depth_radius=1, bias=1.59018219, alpha=0.117728651, beta=0.404427052)
        return tf.raw_ops.LRNGrad(input_grads=grads, input_image=image, output_image=output, **lrn)  # crash line


layer = LRNGradLayer()
print("calling", flush=True)
print(layer(tf.zeros([0], tf.float32)))
