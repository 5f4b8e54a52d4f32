"""A small training loop for bench_attach_pid.py: says "ready", waits for a line on stdin, runs STEPS
steps of a tf.function (matmul, loss, gradient, update) and prints "took SECONDS" for the steps alone."""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
w = tf.Variable(tf.random.normal([256, 256]))
x = tf.random.normal([64, 256])


@tf.function
def train_step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
    w.assign_sub(1e-4 * tape.gradient(loss, w))
    return loss


train_step()  # traced before the clock starts
print("ready", flush=True)
sys.stdin.readline()
t0 = time.perf_counter()
for _ in range(STEPS):
    train_step()
print("took %.6f" % (time.perf_counter() - t0), flush=True)
