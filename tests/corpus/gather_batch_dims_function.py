"""tf.gather with batch_dims beyond the inputs' ranks and an axis that is a tensor, inside a tf.function:
SIGABRT in GatherV2's shape function while the function is traced (no kernel runs).

Source: tensorflow/tensorflow issue #62985 ("C++ API `GatherV2` aborts with inappropriate input"): with an axis
that is not a constant, GatherV2's shape function (tensorflow/core/ops/array_ops.cc) asks for an unknown shape
of rank rank(params) + rank(indices) - 1 - batch_dims without checking it.  TF 2.21:
F shape_inference.cc:711] Check failed: rank >= 0 (-3 vs. 0) rank must not be negative,
in InferenceContext::UnknownShapeOfRank, under ShapeRefiner::RunShapeFn and TF_FinishOperation.
"""
import tensorflow as tf


@tf.function
def pick(params, indices, axis):
    return tf.gather(params, indices, axis=axis, batch_dims=5)  # crash line (while pick is traced)


print("calling", flush=True)
print(pick(tf.ones([2, 3]), tf.constant([0, 1]), tf.constant(1)))
