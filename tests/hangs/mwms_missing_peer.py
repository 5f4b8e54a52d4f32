"""``MultiWorkerMirroredStrategy()`` with a ``TF_CONFIG`` naming 2 workers where worker 1 never starts: the
constructor of worker 0 blocks in ``TFE_EnableCollectiveOps`` waiting for worker 1.

Reproduces the start-up hang of tensorflow/tensorflow#35878 ("MultiWorkerMirroredStrategy Keras Example
Hangs") and tensorflow/recommenders#274 ("MultiWorkerMirroredStrategy appears hanging on 3 machines"): a
worker waits silently for a peer that is not there.  This process is worker 0 of a 2-worker cluster on two
free loopback ports; nothing listens on worker 1's.

argv: READY (written just before the blocking constructor).
"""
import json
import os
import socket
import sys


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["127.0.0.1:%d" % p for p in free_ports(2)]},
                                      "task": {"type": "worker", "index": 0}})
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
with open(READY, "w") as f:
    f.write(str(os.getpid()))
strategy = tf.distribute.MultiWorkerMirroredStrategy()  # hangs here: main
print("connected", strategy.num_replicas_in_sync)
