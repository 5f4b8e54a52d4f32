"""One worker of a 3-worker MultiWorkerMirroredStrategy job; the worker named by argv[2] stalls before the step.

argv: READY_DIR STALLED_INDEX.  TF_CONFIG (set by ``mwms_launcher.py``) says
which worker this is.  Every worker builds the strategy (which connects the
cluster) and a variable; then the stalled one waits in ``stall`` (a Python
loop) while the others call the step and wait inside its all-reduce for it.
Each writes ``READY_DIR/worker-INDEX`` (its pid, "stall" or "step") just before it blocks.
"""
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY_DIR = sys.argv[1]
STALLED = int(sys.argv[2])
INDEX = json.loads(os.environ["TF_CONFIG"])["task"]["index"]


def ready(what):
    path = os.path.join(READY_DIR, "worker-%d" % INDEX)
    with open(path + ".tmp", "w") as f:
        f.write("%d %s" % (os.getpid(), what))
    os.replace(path + ".tmp", path)


def stall():
    ready("stall")
    while True:
        time.sleep(0.05)  # the stalled worker waits here


def main():
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        weight = tf.Variable(2.0)

    @tf.function
    def train_step(x):
        def replica_step(x):
            return tf.distribute.get_replica_context().all_reduce("sum", x * weight)
        return strategy.run(replica_step, args=(x,))

    if INDEX == STALLED:
        stall()  # the stalled worker is late
    ready("step")
    print("step", train_step(tf.constant(1.0)))  # the others wait in the step


main()
