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
import sys


def free_ports(n):
    """``n`` ports free now, below the kernel's ephemeral range (``tests/scripts/free_ports.py`` says why: a port
    from ``bind(0)`` may become another connection's own port before its worker binds it)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    try:
        from free_ports import free_ports as below_ephemeral
    finally:
        del sys.path[0]
    return below_ephemeral(n)


os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["127.0.0.1:%d" % p for p in free_ports(2)]},
                                      "task": {"type": "worker", "index": 0}})
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

READY = sys.argv[1]
with open(READY, "w") as f:
    f.write(str(os.getpid()))
strategy = tf.distribute.MultiWorkerMirroredStrategy()  # hangs here: main
print("connected", strategy.num_replicas_in_sync)
