"""``mwms_worker.py`` as a task of a Slurm job step: its ``TF_CONFIG`` computed from the scheduler's variables.

argv: READY_DIR STALLED_INDEX (as ``mwms_worker.py``).  The job script picks three free loopback ports
and exports them as ``MWMS_PORTS`` (``P0,P1,P2``); each task is worker ``SLURM_PROCID`` of that cluster.
``TF_CONFIG`` is set in this process's ``os.environ`` only (as a wrapper around
``SlurmClusterResolver`` would), so ``/proc/PID/environ`` holds Slurm's variables and no ``TF_CONFIG``:
tfnative names the process by its Slurm rank.
"""
import json
import os
import runpy
import sys

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mwms_worker.py")
RANK = int(os.environ["SLURM_PROCID"])
PORTS = os.environ["MWMS_PORTS"].split(",")

os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["127.0.0.1:%s" % p for p in PORTS]},
                                      "task": {"type": "worker", "index": RANK}})
sys.argv = [WORKER] + sys.argv[1:]
runpy.run_path(WORKER, run_name="__main__")
