"""Reshape's SIGFPE (tests/corpus/reshape_fpe_eager.py) on a 100 MB input: float32[5000, 5000], larger than the
64 MiB ``--repro`` reads whole (issue #45: such an input is copied to the data file a chunk at a time).

argv[1], where given: a file that gets the SHA-256 of the input's bytes (row-major, little-endian) before the
call, for the test to compare with the data file's.
"""
import hashlib
import sys

import tensorflow as tf

n = 5000
tensor = tf.reshape(tf.sin(tf.range(n * n, dtype=tf.float32)), [n, n])
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        f.write(hashlib.sha256(tensor.numpy().tobytes()).hexdigest() + "\n")
shape = tf.constant([0, 1879048192, 100000000, 1610612736, -1], dtype=tf.int32)
print("calling", flush=True)
tf.raw_ops.Reshape(tensor=tensor, shape=shape)  # crash line
