"""Bundled example: a TF1-style session opened from a nested call chain.

    tfnative attach examples/open_session.py --break TF_NewSession

stops inside TensorFlow's C API while ``build_model -> make_session`` runs.
"""

import os

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
    sess, y = build_model()
    print("result:", sess.run(y).tolist())
    sess.close()


if __name__ == "__main__":
    main()
