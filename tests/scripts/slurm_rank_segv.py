"""One rank of a Slurm job for the crash watch: rank CRASH_RANK dies of SIGSEGV once GO_FILE exists.

argv: READY_DIR GO_FILE CRASH_RANK.  Each rank writes ``READY_DIR/rank-N`` (its pid) and then waits;
the crashing one polls for GO_FILE (written by the test once the watch is armed on every rank) and
then reads address 0 through ctypes; the others sleep until they are killed.
"""
import ctypes
import os
import sys
import time

READY_DIR, GO_FILE, CRASH = sys.argv[1], sys.argv[2], int(sys.argv[3])
RANK = int(os.environ["SLURM_PROCID"])


def crash():
    ctypes.string_at(0)  # the crashing rank dies here


def wait_for_go():
    while not os.path.exists(GO_FILE):
        time.sleep(0.05)
    crash()


def main():
    path = os.path.join(READY_DIR, "rank-%d" % RANK)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    if RANK == CRASH:
        wait_for_go()
    while True:
        time.sleep(0.05)  # the others wait here


main()
