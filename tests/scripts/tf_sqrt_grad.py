"""A gradient op in a tf.function: SqrtGrad is made by tape.gradient, its forward op Sqrt by tf.sqrt."""
import tensorflow as tf


@tf.function
def step(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.sqrt(x)  # FORWARD
    return tape.gradient(y, x)  # GRADIENT

print(step(tf.constant([4.0, 9.0])).numpy())
