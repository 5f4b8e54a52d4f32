"""tf.data interleave with a huge cycle_length: a C++ exception (std::bad_alloc), then SIGSEGV, at the for loop.

Source: tensorflow/tensorflow issue #116198 ("Heap Segmentation Fault in InterleaveDatasetOp due to Missing
Upper Bound on cycle_length"; fix proposed in PR #120172).
TF 2.21: InterleaveDatasetOp::Dataset::MakeIteratorInternal sizes its per-cycle state by cycle_length and
throws std::bad_alloc, inside MakeIterator's kernel (the iterator is made at the user's for loop, on the main
thread); pybind11's translation of the exception then dies of SIGSEGV in PyErr_Occurred.
"""
import tensorflow as tf

ds = tf.data.Dataset.range(4).interleave(lambda x: tf.data.Dataset.range(2), cycle_length=2**62, block_length=1)
print("calling", flush=True)
for x in ds:  # crash line
    print(int(x))
