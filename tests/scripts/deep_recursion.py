"""Recurses DEPTH levels (plain Python calls, or each through C: ``map``), then waits at the bottom.

usage: deep_recursion.py DEPTH python|c READY_FILE
"""

import sys
import time

DEPTH = int(sys.argv[1])
THROUGH_C = sys.argv[2] == "c"
sys.setrecursionlimit(DEPTH * 4 + 1000)


def bottom():
    with open(sys.argv[3], "w") as f:
        f.write("ready")
    while True:
        time.sleep(0.05)  # the bottom of the recursion


def recurse(n):
    if n == 0:
        return bottom()
    if THROUGH_C:
        return next(map(recurse, [n - 1]))
    return recurse(n - 1)


recurse(DEPTH)
