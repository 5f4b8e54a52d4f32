"""Run one of the user's own kernels (tests/custom_op/user_kern.cc): ``use_user_kern.py LIBRARY MODE [READY]``.

MODE ``park``: write READY (when given), then run UserPark, which sleeps inside its Compute for up to
300 seconds (a process parked inside the user's kernel, for ``stack --pid``).  MODE ``segv``: run UserSegv,
which writes through a null pointer inside its Compute (the process dies of SIGSEGV there).
"""

import sys

import tensorflow as tf

ops = tf.load_op_library(sys.argv[1])
if sys.argv[2] == "park":
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            f.write("ready")
    print(ops.user_park([300]).numpy().tolist())  # tfn: the Python line that parks
else:
    print(ops.user_segv([[1, 2], [3, 4]]).numpy().tolist())  # tfn: the Python line that crashes
