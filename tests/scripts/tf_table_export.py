"""A crash on a resource input that is no variable (issue #45): a lookup table exported with other dtypes than its own.

Source: tensorflow/tensorflow issue #125503 ("tf.raw_ops.LookupTableExportV2 aborts process on dtype mismatch",
TF 2.21): SIGABRT, ``tensor.cc:896] Check failed: dtype() == expected_dtype (7 vs. 9)`` in LookupTableExportV2's
kernel.  Its input is the table's handle: no script can be given its value, and ``--repro`` says so.
"""
import tensorflow as tf

table = tf.lookup.StaticHashTable(
    tf.lookup.KeyValueTensorInitializer(tf.constant([0], dtype=tf.int64), tf.constant([1], dtype=tf.int64)), -1)


def export(t):
    return tf.raw_ops.LookupTableExportV2(table_handle=t.resource_handle, Tkeys=tf.string, Tvalues=tf.string)


print("calling", flush=True)
export(table)  # crash line
