"""FusedPadConv2D on a rank-2 input, paddings as a Python list: SIGABRT, eager (the eager fallback path).

Source: tensorflow/tensorflow issue #125505 ("tf.raw_ops.FusedPadConv2D aborts process on rank mismatch
instead of raising an exception", TF 2.21); see also #67527 and #63376.
A Python list argument makes the generated op wrapper take its *_eager_fallback path (quick_execute):
still one eager op, not a tf.function.
TF 2.21: F tensor_shape.cc:362] Check failed: d < dims() (2 vs. 2), in the FusedPadConv2D kernel.
"""
import tensorflow as tf

image = tf.zeros([3, 2], tf.float32)
paddings = [[0, 0], [1, 1], [1, 1], [0, 0]]  # a list, not a tensor: the op wrapper's eager fallback path
print("calling", flush=True)
conv = dict(filter=tf.ones([3, 3, 1, 1]), mode="REFLECT", strides=[1, 1, 1, 1], padding="VALID")
tf.raw_ops.FusedPadConv2D(input=image, paddings=paddings, **conv)  # crash line
