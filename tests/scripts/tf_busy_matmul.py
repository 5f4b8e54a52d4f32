"""Keeps TensorFlow busy with big matmuls (oneDNN's JIT kernels on every intra-op thread).

usage: tf_busy_matmul.py READY_FILE
"""

import sys

import tensorflow as tf

a = tf.random.normal((768, 768))
b = tf.random.normal((768, 768))


@tf.function
def step(x, y):
    return tf.reduce_sum(tf.matmul(x, y))


step(a, b)
with open(sys.argv[1], "w") as f:
    f.write("ready")
while True:
    step(a, b)  # the busy loop
