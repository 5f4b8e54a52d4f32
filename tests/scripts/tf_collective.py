"""One worker of a 2-worker MultiWorkerMirroredStrategy job (TF_CONFIG set by the caller).

Worker 0 runs a step whose all-reduce needs worker 1; worker 1 never runs it (it sleeps): worker 0's
tf.function stays pending, with no thread running its ops.  Each prints "ready" once its strategy and
variable exist (which needs both workers).
"""
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

INDEX = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    weight = tf.Variable(1.0)


@tf.function
def train_step():
    def replica_fn():
        return tf.distribute.get_replica_context().all_reduce("sum", weight * 2.0)

    return strategy.run(replica_fn)


print("ready", flush=True)
if INDEX == 0:
    train_step()  # worker 0: waits here for worker 1
else:
    time.sleep(3600)  # worker 1: never joins the step
