"""Conv2D (oneDNN) on a rank-1 input inside a tf.function: SIGABRT on an executor thread.

Source: tensorflow/tensorflow issue #85250 ("Abort in tensorflow.keras.backend.conv2d", the crash in the
Conv2D op) and #111453 (oneDNN Conv aborts on a non-4D input; the same CHECK in tensor_format.h).
The function's unknown-rank input_signature keeps graph-time shape inference from catching the rank.
TF 2.21 with oneDNN on: F tensor_format.h:428] Check failed: index >= 0 && index < num_total_dims
Invalid index from the dimension: 3, 0, C, in the oneDNN Conv2D kernel.
"""
import os

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"  # the set-up: the oneDNN kernel is the one that aborts
import tensorflow as tf  # noqa: E402


@tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
def conv(x):
    return tf.nn.conv2d(x, tf.ones([13, 8, 5, 14]), strides=[1, 1, 1, 1], padding="VALID")


print("calling", flush=True)
print(conv(tf.constant([1.5841993e+38, 4.7480855e+36, -1.8916006e+38])))  # crash line
