"""A tf.data pipeline whose map function (a tf.py_function) blocks until a release file appears."""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
RELEASE = sys.argv[2] if len(sys.argv) > 2 else None


def slow_map(x):
    with open(READY, "w") as f:
        f.write(str(os.getpid()))
    while RELEASE is None or not os.path.exists(RELEASE):
        time.sleep(0.05)
    return x * 2


def main():
    ds = tf.data.Dataset.range(4).map(lambda x: tf.py_function(slow_map, [x], tf.int64), num_parallel_calls=2)
    ds = ds.prefetch(1)
    for x in ds:
        print("got", int(x))


main()
