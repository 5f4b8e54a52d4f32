import os
import sys
import time


def ready(path):
    with open(path, "w") as f:
        f.write(str(os.getpid()))


def wait_for_peers(path):
    ready(path)
    while True:
        time.sleep(0.05)  # the peers wait here


def stall_elsewhere(path):
    ready(path)
    while True:
        time.sleep(0.05)  # the odd one stalls here


def main():
    if sys.argv[1] == "odd":
        stall_elsewhere(sys.argv[2])
    else:
        wait_for_peers(sys.argv[2])


main()
