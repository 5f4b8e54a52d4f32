"""A training step that goes NaN: the loss takes the log of a value that can be negative.

    tfnative attach --check-numerics examples/nan_triage.py   # which op, created where
    tfnative attach --break-op Log examples/nan_triage.py     # stop in that op's CPU kernel
"""
import tensorflow as tf

w = tf.Variable([[0.5, -1.5], [2.0, 0.25]])


def score(x):
    return tf.matmul(x, w) - 1.0


@tf.function
def train_step(x):
    s = score(x)
    loss = tf.reduce_mean(tf.math.log(s))  # log of a negative score: NaN
    return loss


x = tf.constant([[1.0, 2.0], [0.5, 0.5]])
print("loss", float(train_step(x)))
