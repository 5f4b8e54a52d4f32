"""A ``tf.function`` that dequeues from an empty ``tf.queue.FIFOQueue`` whose producer never started.

The ``tf.function`` form of tensorflow/tensorflow#18045 / #7034 ("QueueRunner hanging" until the queue runners
are started).  The main thread waits for the function in ``TFE_Execute``; ``QueueDequeueV2`` is pending in the
function's executor.

argv: READY (written just before the blocking call).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
requests = tf.queue.FIFOQueue(8, tf.float32, shapes=[])


@tf.function
def next_request():
    return requests.dequeue() * 2.0


with open(READY, "w") as f:
    f.write(str(os.getpid()))
print(next_request())  # hangs here: main
