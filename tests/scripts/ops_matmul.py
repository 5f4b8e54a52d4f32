"""Eager Log and MatMul, then a tf.function with Relu and MatMul (for --break-op and op context)."""
import tensorflow as tf

a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
b = tf.math.log(a)  # LOG LINE
c = tf.matmul(a, b)  # EAGER MATMUL LINE


@tf.function
def layer(x):
    y = tf.nn.relu(x)
    return tf.matmul(y, x)  # FUNCTION MATMUL LINE


print("result", float(tf.reduce_sum(layer(a))), float(tf.reduce_sum(c)))
