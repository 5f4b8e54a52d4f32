"""``mwms_steps.py``'s worker as a task of a Slurm job step: its ``TF_CONFIG`` from the scheduler's variables.

argv: READY_DIR RANKS CULPRIT MODE (as ``mwms_steps.py``).  The job script picks RANKS free loopback ports and
exports them as ``MWMS_PORTS`` (``P0,P1,...``); each task is worker ``SLURM_PROCID`` of that cluster.  Unlike
``mwms_slurm_worker.py``, ``TF_CONFIG`` is in the worker's own environment (this wrapper execs it), as a job
script that exports it per task gives it: tfnative reads the cluster from ``/proc/PID/environ``.
"""
import json
import os
import sys

STEPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mwms_steps.py")
RANK = int(os.environ["SLURM_PROCID"])
PORTS = os.environ["MWMS_PORTS"].split(",")

env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"worker": ["127.0.0.1:%s" % p for p in PORTS]},
                                             "task": {"type": "worker", "index": RANK}}), TF_CPP_MIN_LOG_LEVEL="2")
os.execve(sys.executable, [sys.executable, STEPS, *sys.argv[1:]], env)
