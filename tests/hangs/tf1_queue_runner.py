"""A TF1 graph whose input queue is filled by a ``tf.compat.v1.train.QueueRunner`` that was never started:
``sess.run(batch)`` waits forever.

Reproduces tensorflow/tensorflow#7034 ("QueueRunner hanging ... unless I uncomment the line
``threads = tf.train.start_queue_runners(sess=sess, coord=coord)``"), tensorflow/tensorflow#7945 ("Input
producer freezes if queue runner not started") and tensorflow/tensorflow#18045.

argv: READY (written just before the blocking ``sess.run``).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
READY = sys.argv[1]

examples = tf1.FIFOQueue(32, [tf.float32], shapes=[[4]], name="examples")
enqueue = examples.enqueue([tf1.random_normal([4])])
tf1.train.add_queue_runner(tf1.train.QueueRunner(examples, [enqueue] * 2))
batch = examples.dequeue_many(8)

with tf1.Session() as sess:
    # tf1.train.start_queue_runners(sess) is missing
    with open(READY, "w") as f:
        f.write(str(os.getpid()))
    print(sess.run(batch))  # hangs here: main
