"""Start a 3-worker MultiWorkerMirroredStrategy job on localhost as this process's children.

argv: READY_DIR [STALLED_INDEX (default 2)].  Picks three free loopback
ports, gives each worker its ``TF_CONFIG``, starts ``mwms_worker.py`` three
times and waits for them.  The workers die with the launcher
(``PR_SET_PDEATHSIG``: they ignore SIGTERM, so SIGKILL).
"""
import ctypes
import json
import os
import signal
import subprocess
import sys

from free_ports import free_ports  # (beside this script: ports below the ephemeral range)

READY_DIR = sys.argv[1]
STALLED = sys.argv[2] if len(sys.argv) > 2 else "2"
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mwms_worker.py")
PR_SET_PDEATHSIG = 1


def die_with_parent():
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def main():
    cluster = {"worker": ["127.0.0.1:%d" % p for p in free_ports(3)]}
    workers = []
    for i in range(3):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}))
        workers.append(subprocess.Popen([sys.executable, WORKER, READY_DIR, STALLED], env=env,
                                        preexec_fn=die_with_parent))
    with open(os.path.join(READY_DIR, "launcher"), "w") as f:
        f.write(" ".join(str(w.pid) for w in workers))
    for w in workers:
        w.wait()


main()
