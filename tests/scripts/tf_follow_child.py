"""A script that runs no TensorFlow itself; its spawn child does: a MatMul, then a segfault in a py_function."""
import multiprocessing as mp
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from follow_children import wait_followed  # noqa: E402


def bad_callback(x):
    import ctypes

    ctypes.string_at(0)  # SIGSEGV
    return x


def tf_child():
    wait_followed()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    tf.matmul(a, a)  # CHILD MATMUL LINE
    tf.py_function(bad_callback, [a], tf.float32)  # CHILD PYFUNC LINE


if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=tf_child)
    p.start()
    p.join()
    print("tf child %d %s" % (p.pid, p.exitcode), flush=True)
