"""A MultiWorkerMirroredStrategy job on localhost that trains in steps; one rank may stall at step 5.

argv: READY_DIR RANKS CULPRIT MODE.  This process (the launcher) picks RANKS free loopback ports and starts RANKS
workers (this same file, with ``TF_CONFIG`` set), which die with it (``PR_SET_PDEATHSIG``: the workers ignore
SIGTERM, so SIGKILL).  Each worker builds the strategy (which connects the cluster: ~30 s on 2 cores), then runs
steps, each an all-reduce across the ranks, 0.2 s apart, and writes ``READY_DIR/worker-INDEX`` ("PID STEP")
after each.  At step 5 worker CULPRIT (-1: none, a healthy job) does what MODE says:

- ``sleep``: it sleeps for ever in ``time.sleep`` (``STALL_LINE``); the others wait in the step's all-reduce;
- ``stop``: it writes "PID stop" and waits to be SIGSTOPped by the test (``STALL_LINE`` too);
- ``deadlock``: its main thread and a helper take two locks in opposite orders (``LOCK_LINE``);
- ``tfdata``: it asks a ``tf.data`` pipeline whose generator blocks for ever (``GENERATOR_LINE``) for an
  element (``NEXT_LINE``);
- ``leave``: it leaves the step loop and waits for ever on an event nobody sets (``LEAVE_LINE``);
- ``spin``: it spins in a Python loop (``SPIN_LINE``).

Each writes "PID MODE" as it does so.  Worker 0 also writes ``READY_DIR/steps`` (its step) after each step:
a progress file for ``--progress-file``.
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time

from free_ports import free_ports  # (beside this script: ports below the ephemeral range)

READY_DIR, RANKS, CULPRIT, MODE = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
STALL_STEP = 5


def die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def launch():
    cluster = {"worker": ["127.0.0.1:%d" % p for p in free_ports(RANKS)]}
    workers = []
    for i in range(RANKS):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
                   TF_CPP_MIN_LOG_LEVEL="2")
        workers.append(subprocess.Popen([sys.executable, __file__, *sys.argv[1:]], env=env,
                                        preexec_fn=die_with_parent))
    for w in workers:
        w.wait()


def note(index, what):
    path = os.path.join(READY_DIR, "worker-%d" % index)
    with open(path + ".tmp", "w") as f:
        f.write("%d %s" % (os.getpid(), what))
    os.replace(path + ".tmp", path)


def deadlock():
    a, b = threading.RLock(), threading.RLock()
    both = threading.Barrier(2)

    def helper():
        with b:
            both.wait()
            with a:  # HELPER_LOCK_LINE
                pass

    threading.Thread(target=helper, name="helper", daemon=True).start()
    with a:
        both.wait()
        with b:  # LOCK_LINE
            pass


def blocked_generator():
    threading.Event().wait()  # GENERATOR_LINE
    yield 1.0


def leave():
    done = threading.Event()
    done.wait()  # LEAVE_LINE


def spin():
    n = 0
    while n >= 0: n += 1  # noqa: E701  # SPIN_LINE


def stall(tf):
    if MODE == "deadlock":
        deadlock()
    elif MODE == "tfdata":
        pipeline = tf.data.Dataset.from_generator(blocked_generator,
                                                  output_signature=tf.TensorSpec((), tf.float32))
        next(iter(pipeline))  # NEXT_LINE
    elif MODE == "spin":
        spin()
    elif MODE == "leave":
        return
    time.sleep(10 ** 7)  # STALL_LINE


def work():
    import tensorflow as tf

    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        weight = tf.Variable(2.0)

    @tf.function
    def train_step(x):
        def replica_step(x):
            return tf.distribute.get_replica_context().all_reduce("sum", x * weight)
        return strategy.run(replica_step, args=(x,))

    step = 0
    while True:
        step += 1
        if index == CULPRIT and step == STALL_STEP:
            note(index, MODE)
            stall(tf)
            if MODE == "leave":
                break
        train_step(tf.constant(float(step)))  # STEP_LINE
        note(index, str(step))
        if index == 0:
            with open(os.path.join(READY_DIR, "steps"), "a") as f:
                f.write("%d\n" % step)
        time.sleep(0.2)
    leave()


if "TF_CONFIG" in os.environ:
    work()
else:
    launch()
