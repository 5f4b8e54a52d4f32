"""A crash on a resource input (issue #45): ResourceGather with ``batch_dims=1`` on a rank-1 variable.

Source: tensorflow/tensorflow issue #106497 ("tf.raw_ops.ResourceGather crashes when batch_dims is incompatible
with resource and indices rank", TF 2.19); TF 2.21 here: SIGABRT, ``tensor_shape.cc:362] Check failed: d < dims()
(1 vs. 1)`` in ``ResourceGatherOp<Eigen::ThreadPoolDevice, float, int>::Compute``.  The variable's shape is left
unknown (``shape=tf.TensorShape(None)``) so that graph-time shape inference lets the call reach the kernel; the
gather runs in a tf.function, on an executor thread, its indices computed there, and the variable's value is
changed after it was made: what the kernel got is on no line of this script.
"""
import tensorflow as tf

table = tf.Variable(tf.range(10.0, 60.0, 10.0), shape=tf.TensorShape(None))
table.assign_add(tf.fill([5], 0.5))  # [10.5, 20.5, 30.5, 40.5, 50.5]


@tf.function
def lookup(ids):
    rows = tf.math.floormod(ids * 3, 5)  # [1, 3, 4]
    return tf.raw_ops.ResourceGather(resource=table.handle, indices=rows, dtype=tf.float32, batch_dims=1)


print("calling", flush=True)
print(lookup(tf.constant([2, 1, 3])))  # crash line
