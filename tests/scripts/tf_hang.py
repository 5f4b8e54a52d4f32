"""A tf.function blocked in a tf.py_function callback until a release file appears."""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
RELEASE = sys.argv[2] if len(sys.argv) > 2 else None


def slow_callback(x):
    with open(READY, "w") as f:
        f.write(str(os.getpid()))
    while RELEASE is None or not os.path.exists(RELEASE):
        time.sleep(0.05)
    return x * 2


@tf.function
def step(x):
    y = tf.py_function(slow_callback, [x], tf.float32)
    return y + 1


def main():
    print("result", float(step(tf.constant(1.0))))


main()
