"""tf.data interleave with a huge cycle_length: a C++ exception, then SIGSEGV, when the iterator is made.

Source: tensorflow/tensorflow issue #116198 ("Heap Segmentation Fault in InterleaveDatasetOp due to Missing
Upper Bound on cycle_length"; fix proposed in PR #120172).
TF 2.21: the interleave iterator sizes a vector by cycle_length: std::length_error, unwound through the
iterator's construction at the user's for loop; the process dies of SIGSEGV in PyErr_Occurred.
"""
import tensorflow as tf

ds = tf.data.Dataset.range(4).interleave(lambda x: tf.data.Dataset.range(2), cycle_length=2**62, block_length=1)
print("calling", flush=True)
for x in ds:  # crash line
    print(int(x))
