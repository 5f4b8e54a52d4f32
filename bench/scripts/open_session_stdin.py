"""examples/open_session.py for the manual gdb recipe: imports TF, says "waiting", reads one line
from stdin (so that gdb can attach and arm its breakpoint first), then opens a tf.compat.v1.Session."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402


def make_session(graph):
    return tf.compat.v1.Session(graph=graph)


def build_model():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant([[1.0, 2.0]])
        y = tf.matmul(x, tf.transpose(x))
    sess = make_session(graph)
    return sess, y


def main():
    print("waiting", flush=True)
    sys.stdin.readline()
    sess, y = build_model()
    print("result:", sess.run(y).tolist())
    sess.close()


if __name__ == "__main__":
    main()
