"""An eager ``tf.queue.FIFOQueue.dequeue()`` on an empty queue whose producer never started.

Reproduces the eager form of tensorflow/tensorflow#18045 ("Raise Error when using queue without starting it":
functions using queues "are still executable but hang indefinitely").  The main thread waits in
``QueueDequeueV2`` (``TFE_Execute``).

argv: READY (written just before the blocking dequeue).
"""
import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
requests = tf.queue.FIFOQueue(8, tf.float32, shapes=[])


def produce():  # the producer, meant to run on a thread that is never started
    for i in range(8):
        requests.enqueue(float(i))


producer = threading.Thread(target=produce, name="producer")
with open(READY, "w") as f:
    f.write(str(os.getpid()))
print(requests.dequeue())  # hangs here: main
