"""One rank of a 2-node Slurm job whose first node waits on a slow peer: no TensorFlow.

argv: DIR BUSY_S ODD_RANK [crash].  Node 0's ranks (``SLURM_NODEID`` 0) block reading a FIFO each
(``DIR/pipe-R``, R their rank), as a rank blocks in a receive from a peer: no CPU, no wake-ups, the same
wait all along.  Node 1's ranks compute for BUSY_S seconds (the slow peers), then each writes to its
partner's FIFO (rank R to rank R-2) and writes ``DIR/sent-R``.  Then every rank waits for good (``the ranks
hang here together``; rank ODD_RANK alone in ``hang_alone``, the odd one): the whole job is hung.  With
``crash``, the odd rank dies of SIGSEGV instead (``crash_alone``).  Each rank writes ``DIR/rank-R`` (its
pid) once it has started.
"""
import os
import sys
import threading
import time

DIR, BUSY_S, ODD = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
CRASH = sys.argv[4:] == ["crash"]
RANK = int(os.environ["SLURM_PROCID"])
NODE = int(os.environ["SLURM_NODEID"])


def mark(name, text):
    path = os.path.join(DIR, name)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def receive(partner):
    with open(os.path.join(DIR, "pipe-%d" % RANK), "rb") as pipe:  # waits for the slow peer here
        return pipe.read(1), partner


def compute(seconds):
    end = time.monotonic() + seconds
    total = 0
    while time.monotonic() < end:  # the slow peer computes here
        total += sum(i * i for i in range(1000))
    return total


def main():
    if NODE == 0:
        os.mkfifo(os.path.join(DIR, "pipe-%d" % RANK))
    mark("rank-%d" % RANK, str(os.getpid()))
    if NODE == 0:
        receive(RANK + 2)
    else:
        compute(BUSY_S)
        partner = os.path.join(DIR, "pipe-%d" % (RANK - 2))
        while not os.path.exists(partner):
            time.sleep(0.1)
        with open(partner, "wb") as pipe:
            pipe.write(b"x")
        mark("sent-%d" % RANK, "%f" % time.time())
    if RANK == ODD:
        crash_alone() if CRASH else hang_alone()
    hang_together()


def hang_together():
    threading.Event().wait()  # the ranks hang here together


def crash_alone():
    import ctypes

    ctypes.string_at(0)  # the odd rank crashes here


def hang_alone():
    threading.Event().wait()  # the odd rank hangs here


main()
