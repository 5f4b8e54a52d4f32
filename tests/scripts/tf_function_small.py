import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


@tf.function
def double_sum(x):
    return tf.reduce_sum(x * 2.0)


print("value", float(double_sum(tf.constant([1.0, 2.0]))))
