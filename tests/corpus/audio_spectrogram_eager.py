"""AudioSpectrogram with a negative window_size: a C++ exception, then SIGSEGV, eager.

Source: tensorflow/tensorflow issue #108664 (reproducer in its fix, PR #109326: "Validate window_size and
stride in AudioSpectrogramOp constructor"; also PR #115311).
TF 2.21: Spectrogram::Initialize resizes a vector by a negative size: std::length_error thrown in
AudioSpectrogramOp::Compute unwinds the kernel; pybind11's translation then dies of SIGSEGV in PyErr_Occurred.
"""
import tensorflow as tf

audio = tf.zeros([8, 1])
print("calling", flush=True)
tf.raw_ops.AudioSpectrogram(input=audio, window_size=-5, stride=-1)  # crash line
