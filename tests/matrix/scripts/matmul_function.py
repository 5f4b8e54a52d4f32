"""One MatMul, inside a tf.function called from the user's main() (for --break-op MatMul)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


@tf.function
def layer(x):
    return tf.matmul(x, x)  # MATMUL LINE


def main():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    print("result", float(tf.reduce_sum(layer(x))))  # CALL LINE


main()
