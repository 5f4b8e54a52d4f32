"""LSTMBlockCellGrad with a rank-1 x and every other input [28, 29]: SIGABRT, eager; 12,197 input elements where
a handful crash it (the input of `--repro-minimize`'s test, issue #45).

Source: tensorflow/tensorflow issue #66763 ("Aborted (core dumped) with `tf.raw_ops.LSTMBlockCellGrad`": "The
parameter x is expected to be two-dimensional, and an error will occur when x is one-dimensional"), its inputs.
TF 2.21: F tensor_shape.cc:362] Check failed: d < dims() (1 vs. 1), in LSTMBlockCellGradOp::Compute.
"""
import tensorflow as tf

x = tf.constant(0, shape=[17], dtype=tf.float32)
names = ("cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b", "i", "cs", "f", "o", "ci", "co", "cs_grad", "h_grad")
args = {name: tf.constant(0.837607, shape=[28, 29], dtype=tf.float32) for name in names}
print("calling", flush=True)
tf.raw_ops.LSTMBlockCellGrad(x=x, use_peephole=False, **args)  # crash line
