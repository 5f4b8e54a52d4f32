"""BlockLSTMGrad with seq_len_max (20) beyond x's time dimension (10), every input random and of its full size:
SIGABRT, eager.  2,617 input elements; a script that dies the same way (the same Check failed line, which names
x's time dimension) needs x's 10 steps and one element of everything else: `--repro-minimize`'s case where not
every change can be made (issue #45).

Source: tensorflow/tensorflow issue #124974 ("tf.raw_ops.BlockLSTMGrad crashes with fatal check failure (SIGABRT)
in Tensor::Slice when seq_len_max exceeds tensor dimension size"), with the sizes of issue #90915's inputs
(x of [10, 2, 16], random values).
TF 2.21: F tensor.cc:1120] Check failed: limit <= dim0_size (20 vs. 10), in BlockLSTMGradOp::Compute.
"""
import tensorflow as tf

T, B, N, C = 10, 2, 16, 8  # time, batch, input size, cell size


def r(*shape):
    return tf.random.stateless_uniform(shape, seed=(1, 2), dtype=tf.float32)


args = dict(x=r(T, B, N), cs_prev=r(B, C), h_prev=r(B, C), w=r(N + C, 4 * C), wci=r(C), wcf=r(C), wco=r(C), b=r(4 * C),
            i=r(T, B, C), cs=r(T, B, C), f=r(T, B, C), o=r(T, B, C), ci=r(T, B, C), co=r(T, B, C), h=r(T, B, C),
            cs_grad=r(T, B, C), h_grad=r(T, B, C), use_peephole=False)
print("calling", flush=True)
tf.raw_ops.BlockLSTMGrad(seq_len_max=tf.constant(20, tf.int64), **args)  # crash line
