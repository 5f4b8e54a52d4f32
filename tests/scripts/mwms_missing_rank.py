"""A 3-worker MultiWorkerMirroredStrategy job whose worker 2 never starts: workers 0 and 1 both wait for it.

tensorflow/tensorflow#35878 and tensorflow/recommenders#274 as a job of several processes: the launcher picks
three free loopback ports, gives each worker its ``TF_CONFIG`` and starts workers 0 and 1 only (this script
again, with ``--worker``); each blocks in ``MultiWorkerMirroredStrategy()`` (``TFE_EnableCollectiveOps``) waiting
for the peer that is not there; the launcher waits for them.

argv: READY_DIR.  Each worker writes ``READY_DIR/worker-INDEX`` (its pid) just before the constructor; the
launcher writes ``READY_DIR/ready`` (the workers' pids) once both have.  The workers die with the launcher
(``PR_SET_PDEATHSIG``).
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

READY_DIR = sys.argv[1]
PR_SET_PDEATHSIG = 1


def free_ports(n):
    """``n`` ports free now, below the kernel's ephemeral range (``free_ports.py`` says why: a port from
    ``bind(0)`` may become another connection's own port before its worker binds it; and the import of socket)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        from free_ports import free_ports as below_ephemeral
    finally:
        del sys.path[0]
    return below_ephemeral(n)


def die_with_parent():
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def launcher():
    cluster = {"worker": ["127.0.0.1:%d" % p for p in free_ports(3)]}
    workers = []
    for i in range(2):  # worker 2 is missing
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}))
        workers.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), READY_DIR, "--worker"], env=env,
                                        preexec_fn=die_with_parent))
    paths = [os.path.join(READY_DIR, "worker-%d" % i) for i in range(2)]
    while not all(os.path.exists(p) for p in paths):
        if any(w.poll() is not None for w in workers):
            sys.exit("a worker exited before it was ready")
        time.sleep(0.05)
    with open(os.path.join(READY_DIR, "ready.tmp"), "w") as f:
        f.write(" ".join(str(w.pid) for w in workers))
    os.replace(os.path.join(READY_DIR, "ready.tmp"), os.path.join(READY_DIR, "ready"))
    for w in workers:
        w.wait()  # hangs here: launcher


def worker():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    path = os.path.join(READY_DIR, "worker-%d" % index)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # hangs here: worker
    print("connected", strategy.num_replicas_in_sync)


if sys.argv[2:] == ["--worker"]:
    worker()
else:
    launcher()
