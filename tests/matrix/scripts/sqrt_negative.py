"""tf.sqrt of a negative number inside a tf.function: a NaN (for --check-numerics)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


@tf.function
def scale(x):
    y = tf.sqrt(x)  # NAN LINE
    return y * 2.0


def main():
    print(scale(tf.constant([4.0, -1.0])).numpy())  # CALL LINE


main()
