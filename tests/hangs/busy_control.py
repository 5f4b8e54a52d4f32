"""Control: a process that is merely slow (a busy loop in the main thread), not hung.  No deadlock to report.

argv: READY (written just before the loop).
"""
import os
import sys

READY = sys.argv[1]


def crunch():
    total = 0
    while True:
        total += sum(i * i for i in range(10000))  # busy here


with open(READY, "w") as f:
    f.write(str(os.getpid()))
crunch()
