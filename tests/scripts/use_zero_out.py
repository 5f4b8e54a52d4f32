"""Load a custom op library (argv[1]) and run its ZeroOut op once, then its ZeroOutAsync op.

With READY and RELEASE paths (argv[2:4]): TensorFlow is imported first, then READY is written and the
script waits for RELEASE before it loads the library (a process that loads it after ``attach --pid``).
"""

import os
import sys
import time

import tensorflow as tf

if len(sys.argv) > 3:
    with open(sys.argv[2], "w") as f:
        f.write("ready")
    deadline = time.monotonic() + 120
    while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
        time.sleep(0.05)

zero_out = tf.load_op_library(sys.argv[1])
print(zero_out.zero_out([[1, 2], [3, 4]]).numpy().tolist())  # tfn: the Python line that calls the op
print(zero_out.zero_out_async([[5, 6]]).numpy().tolist())  # tfn: the Python line that calls the async op
