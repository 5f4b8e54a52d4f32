"""BlockLSTMGrad in a tf.data map function, seq_len_max from the data: SIGABRT on a tf.data thread.

Source: tensorflow/tensorflow issue #124974 (BlockLSTMGrad: Check failed in Tensor::Slice when seq_len_max
exceeds the time dimension). In a map function the kernel runs on a tf.data worker thread while the main
thread waits in IteratorGetNext at the for loop. seq_len_max is a value: shape inference cannot catch it.
TF 2.21: F tensor.cc:1120] Check failed: limit <= dim0_size (5 vs. 1).
"""
import tensorflow as tf

T, B, N, C = 1, 1, 1, 1  # time, batch, input size, cell size


def lstm_grad(seq_len_max):
    z = lambda *shape: tf.zeros(shape, tf.float32)  # noqa: E731
    gates = dict(i=z(T, B, C), cs=z(T, B, C), f=z(T, B, C), o=z(T, B, C), ci=z(T, B, C), co=z(T, B, C),
                 h=z(T, B, C))
    return tf.raw_ops.BlockLSTMGrad(seq_len_max=seq_len_max, x=z(T, B, N), cs_prev=z(B, C), h_prev=z(B, C),
                                    w=z(N + C, 4 * C), wci=z(C), wcf=z(C), wco=z(C), b=z(4 * C),
                                    cs_grad=z(T, B, C), h_grad=z(T, B, C), use_peephole=False, **gates)[0]


ds = tf.data.Dataset.from_tensors(tf.constant(5, tf.int64)).map(lstm_grad)
print("calling", flush=True)
for x in ds:  # crash line
    print(x)
