"""24 idle Python threads (each blocked in an Event.wait) plus TF's own, then a tf.compat.v1.Session.

With "wait" as the first argument it prints "waiting" and reads a line from stdin first (manual recipe).
"""

import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

N_THREADS = 24


def idle(ev):
    ev.wait()


def main():
    ev = threading.Event()
    threads = [threading.Thread(target=idle, args=(ev,), name="idle-%d" % i) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    if sys.argv[1:] == ["wait"]:
        print("waiting", flush=True)
        sys.stdin.readline()
    graph = tf.Graph()
    with graph.as_default():
        y = tf.constant(1.0) + 1
    sess = tf.compat.v1.Session(graph=graph)
    print("result:", sess.run(y))
    sess.close()
    ev.set()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
