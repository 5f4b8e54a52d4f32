"""jit_compile=True and a NaN: the plain run prints loss nan (XLA has no check ops)."""
import tensorflow as tf


@tf.function(jit_compile=True)
def train_step(x):
    return tf.reduce_mean(tf.math.log(x))

print("loss", float(train_step(tf.constant([-1.0, 2.0]))))
