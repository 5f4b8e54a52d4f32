"""The watcher's own CPU between reports: ``tfnative watch --pid P`` on a Python loop, its CPU time over a while.

    .venv/bin/python bench/bench_watch_idle.py [--seconds 10] [--out bench/results/watch-idle.md]

The job is a one-thread Python loop (a little work, then a 1 ms sleep, forever); each watcher is started on
it, given 2 s to settle, and its CPU time (user + system, ``/proc/PID/stat``) is read over ``--seconds``: what
watching costs the machine between reports, at the default interval, without the crash watch, and at
``--interval 1``.  On a machine whose job leaves a core free this is the cost to the job too: the job is never
stopped between reports.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import List

from benchutil import machine, publish

LOOP = "import time\nwhile True:\n    sum(range(10000)); time.sleep(0.001)"
MODES = [[], ["--no-crash-watch"], ["--interval", "1"]]


def cpu_s(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    loop = subprocess.Popen([sys.executable, "-c", LOOP])
    rows: List[str] = []
    try:
        time.sleep(0.5)
        for extra in MODES:
            w = subprocess.Popen([sys.executable, "-m", "tfnative", "watch", "--pid", str(loop.pid), *extra],
                                 stderr=subprocess.DEVNULL)
            try:
                time.sleep(2.0)
                a = cpu_s(w.pid)
                time.sleep(args.seconds)
                b = cpu_s(w.pid)
            finally:
                w.kill()
                w.wait()
            rows.append("| `tfnative watch --pid P%s` | %.2f s | %.2f%% |" % (
                "".join(" " + x for x in extra), b - a, 100.0 * (b - a) / args.seconds))
    finally:
        loop.kill()
        loop.wait()
    publish(["| watcher | CPU over %g s | of one core |" % args.seconds, "|---|---|---|", *rows, "",
             "%s.  Command: `python bench/bench_watch_idle.py --seconds %g`" % (machine(), args.seconds)], args.out)


if __name__ == "__main__":
    main()
