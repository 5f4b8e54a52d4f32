"""Cumsum with computed inputs, non-default attributes: eager on a 10x10 int64 tensor (more than 64 elements:
its values go to the reproducer's data file), then in a tf.function on a 3x4 one.  Each call prints its input's
and its result's dtype, shape and checksum (``tests/integration/test_break_op_repro.py`` compares those of the
scripts ``--break-op --repro`` writes with them)."""
import hashlib

import tensorflow as tf


def checksum(label, r):
    print(label, r.dtype.name, r.shape.as_list(), hashlib.sha256(r.numpy().tobytes()).hexdigest(), flush=True)


def make_input(rows, cols, seed):
    g = tf.random.Generator.from_seed(seed)
    return g.uniform([rows, cols], minval=-1000, maxval=1000, dtype=tf.int64)


@tf.function
def scan_rows(x, axis):
    return tf.math.cumsum(x * 3, axis=axis, exclusive=True)  # FUNCTION LINE


first = make_input(10, 10, 7)
checksum("EAGER_INPUT", first)
checksum("EAGER", tf.math.cumsum(first, axis=1, exclusive=True, reverse=True))  # EAGER LINE
second = make_input(3, 4, 11)
checksum("FUNCTION_INPUT", second * 3)
checksum("FUNCTION", scan_rows(second, tf.constant(0)))
