"""A long-running TensorFlow job for ``attach --pid``: imports TF, writes its pid to READY, then waits.

``python tf_live_job.py READY GO MODE,MODE,...``: each time a file GO appears (the job removes it) it
runs the next step: ``session`` opens a ``tf.compat.v1.Session`` (``TF_NewSession``); ``segv`` dies of
SIGSEGV in a tf.py_function callback; ``exit`` exits with status 7.  After the last step it exits 0.
"""
import ctypes
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY, GO, MODES = sys.argv[1], sys.argv[2], sys.argv[3].split(",")


def open_session():
    graph = tf.Graph()
    with graph.as_default():
        tf.constant(1.0)
    return tf.compat.v1.Session(graph=graph)


def bad_callback(x):
    ctypes.string_at(0)  # SIGSEGV
    return x


@tf.function
def crash(x):
    return tf.py_function(bad_callback, [x], tf.float32)


def step(mode):
    if mode == "session":
        open_session().close()
    elif mode == "segv":
        crash(tf.constant(1.0))
    elif mode == "exit":
        sys.exit(7)


def wait_for_go():
    while not os.path.exists(GO):
        time.sleep(0.02)
    os.unlink(GO)


def main():
    with open(READY + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(READY + ".tmp", READY)
    for mode in MODES:
        wait_for_go()
        step(mode)
    print("done", flush=True)


main()
