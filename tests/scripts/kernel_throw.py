"""Load a custom op library (argv[1], tests/custom_op/segment_throw.cc) and run its SegmentThrow op with a
segment id past the end: the kernel throws std::out_of_range (vector::at) and the process dies."""

import sys

import tensorflow as tf

ops = tf.load_op_library(sys.argv[1])
print(ops.segment_throw([1.0, 2.0, 3.0], [0, 1, 7]))  # tfn: SegmentThrow throws here
