"""BlockLSTMGrad with seq_len_max beyond the time dimension of x: SIGABRT, eager.

Source: tensorflow/tensorflow issue #124974 ("tf.raw_ops.BlockLSTMGrad crashes with fatal check failure
(SIGABRT) in Tensor::Slice when seq_len_max exceeds tensor dimension size"); see also #104847, #90915.
TF 2.21: F tensor.cc:1120] Check failed: limit <= dim0_size (5 vs. 1), in BlockLSTMGradOp::Compute.
"""
import tensorflow as tf

T, B, N, C = 1, 1, 1, 1  # time, batch, input size, cell size


def z(*shape):
    return tf.zeros(shape, tf.float32)


args = dict(x=z(T, B, N), cs_prev=z(B, C), h_prev=z(B, C), w=z(N + C, 4 * C), wci=z(C), wcf=z(C), wco=z(C), b=z(4 * C),
            i=z(T, B, C), cs=z(T, B, C), f=z(T, B, C), o=z(T, B, C), ci=z(T, B, C), co=z(T, B, C), h=z(T, B, C),
            cs_grad=z(T, B, C), h_grad=z(T, B, C), use_peephole=False)
print("calling", flush=True)
tf.raw_ops.BlockLSTMGrad(seq_len_max=tf.constant(5, tf.int64), **args)  # crash line
