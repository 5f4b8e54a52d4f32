"""A real TF 2.21 crash from a C++ exception (TF issue 108664, fix PRs 108808/109326/115311).

``tf.raw_ops.AudioSpectrogram`` with a negative ``window_size``: the kernel's
``Spectrogram::Initialize`` resizes a vector to a huge size, ``std::length_error``
is thrown inside ``AudioSpectrogramOp::Compute``, unwinds the kernel's frames,
and the process dies of SIGSEGV in pybind11's translation code.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

print("calling", flush=True)
tf.raw_ops.AudioSpectrogram(input=tf.zeros([8, 1]), window_size=-5, stride=-1)  # throws std::length_error
