"""Run one bug of the custom-op corpus: argv[1] the op library, argv[2] the case, argv[3] "eager" or
"function" (the op called eagerly, or inside a tf.function).

Cases: ``matrix`` (time_two_matrix: TF's CHECK on a wrong-rank ``matrix<T>()``), ``oob``
(zero_out_oob: SIGSEGV reading out of bounds), ``shape`` (shape_check: a CHECK in the op's own shape
function), ``hang`` (hang_op: a kernel that waits forever; READY, argv[4], is written just before).
With ``core`` as argv[5] (or argv[4] outside ``hang``) the process raises RLIMIT_CORE first, so that the
kernel writes a core (``core_pattern`` is ``core`` in the working directory on the test machines).
"""

import resource
import sys

if "core" in sys.argv[4:]:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

import tensorflow as tf  # noqa: E402

lib = tf.load_op_library(sys.argv[1])
case, mode = sys.argv[2], sys.argv[3]


def run_case():
    if case == "matrix":
        return lib.time_two_matrix([1, 2, 3])  # tfn: matrix
    if case == "oob":
        return lib.zero_out_oob([1, 2, 3], tf.constant(1 << 40, tf.int64))  # tfn: oob
    if case == "shape":
        return lib.shape_check([1.0, 2.0])  # tfn: shape
    if case == "hang":
        with open(sys.argv[4], "w") as f:
            f.write("ready")
        return lib.hang_op([1])  # tfn: hang
    raise SystemExit("unknown case %r" % case)


if mode == "function":
    run_case = tf.function(run_case)  # noqa: F811
print(run_case())
