"""Load the ZeroOut op built by Bazel and call it (tests/integration/test_bazel_custom_op.py runs this under
tfnative)."""

import sys

import tensorflow as tf


def run(lib):
    return lib.zero_out([5, 4, 3, 2, 1])  # tfn: the Python line that calls the op


def main():
    lib = tf.load_op_library(sys.argv[1])
    print("zeroed:", run(lib).numpy().tolist())


if __name__ == "__main__":
    main()
