"""One rank of a several-node Slurm job for ``stack --slurm-job``: no TensorFlow, two Python threads each.

argv: READY_DIR ODD_RANK.  Each rank starts a helper thread (it waits in ``helper``), writes
``READY_DIR/rank-N`` (its pid) and waits in ``wait_with_the_others``; rank ODD_RANK waits in
``wait_alone`` instead, the one odd rank of the job.
"""
import os
import sys
import threading
import time

READY_DIR, ODD = sys.argv[1], int(sys.argv[2])
RANK = int(os.environ["SLURM_PROCID"])


def helper():
    while True:
        time.sleep(0.05)  # every rank's helper thread waits here


def wait_with_the_others():
    while True:
        time.sleep(0.05)  # the ranks wait here together


def wait_alone():
    while True:
        time.sleep(0.05)  # the odd rank waits here


def main():
    threading.Thread(target=helper, name="helper", daemon=True).start()
    path = os.path.join(READY_DIR, "rank-%d" % RANK)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    if RANK == ODD:
        wait_alone()  # the odd rank goes its own way
    wait_with_the_others()


main()
