"""A real TF 2.21 CHECK failure (TF issue 67527): FusedPadConv2D with a scalar input aborts in its kernel."""
import tensorflow as tf


@tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
def bad_pad_conv(x):
    return tf.raw_ops.FusedPadConv2D(input=x, paddings=[[0, 0], [1, 1], [1, 1], [0, 0]],
                                     filter=tf.ones([3, 3, 1, 1]), mode="REFLECT", strides=[1, 1, 1, 1],
                                     padding="VALID")

print("calling", flush=True)
print(bad_pad_conv(tf.constant(1.0)))  # a scalar input: Check failed: d < dims() (1 vs. 0)
