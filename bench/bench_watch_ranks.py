"""The watcher's cost as ranks grow: ``tfnative watch --env`` over 8, 32 and 128 simulated ranks.

    .venv/bin/python bench/bench_watch_ranks.py [--ranks 8,32,128] [--runs 3] [--seconds 8] [--out FILE.md]

Each simulated rank is a plain Python process (not TensorFlow) with a rank's threads: a main thread that
waits (as in a collective), three threads in timed waits that time out and wait again every 200 ms (as gRPC's
pollers and timers do) and a worker that does a little work every 200 ms (so the rank progresses and no
report is ever taken).  The watcher finds them by their environment (``--env``), reads them every second
(``--interval 1``, ``--hang-after 3600``: no report), with the crash watch (every thread traced, as by
default); after 3 s to settle, its CPU time (user + system, ``/proc/PID/stat``) is read over ``--seconds`` and
its resident memory (``VmRSS``) at the end.  Each size is run ``--runs`` times, on fresh ranks and a fresh
watcher; the medians are shown.  The cost grows at most linearly when the CPU per interval and per rank stays
flat (or falls) as ranks grow.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Dict, List, Tuple

from benchutil import machine, publish

RANK = """
import sys, threading, time
stop = threading.Event()
def poller():
    while not stop.wait(0.2):
        pass
def worker():
    while not stop.wait(0.2):
        sum(range(2000))
for i in range(3):
    threading.Thread(target=poller, name="poller-%d" % i, daemon=True).start()
threading.Thread(target=worker, name="worker", daemon=True).start()
sys.stdout.write("ready\\n"); sys.stdout.flush()
stop.wait()
"""
INTERVAL_S = 1.0
SETTLE_S = 3.0


def cpu_s(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def one_run(ranks: int, seconds: float) -> Tuple[float, float]:
    """(watcher CPU seconds per interval, watcher RSS in MiB) over ``ranks`` fresh simulated ranks."""
    mark = uuid.uuid4().hex
    env = dict(os.environ, TFNATIVE_BENCH_RANK=mark)
    procs: List[subprocess.Popen[bytes]] = []
    watcher = None
    try:
        for _ in range(ranks):
            procs.append(subprocess.Popen([sys.executable, "-c", RANK], env=env, stdout=subprocess.PIPE,
                                          stdin=subprocess.DEVNULL))
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        err = tempfile.TemporaryFile()
        watcher = subprocess.Popen([sys.executable, "-m", "tfnative", "watch", "--env", "TFNATIVE_BENCH_RANK=" + mark,
                                    "--interval", str(INTERVAL_S), "--hang-after", "3600"],
                                   stdout=subprocess.DEVNULL, stderr=err)
        time.sleep(SETTLE_S)
        a = cpu_s(watcher.pid)
        time.sleep(seconds)
        b = cpu_s(watcher.pid)
        rss = rss_mib(watcher.pid)
        if watcher.poll() is not None:  # a watcher that ended measures nothing
            err.seek(0)
            raise SystemExit("the watcher of %d ranks ended (%s): %s" % (ranks, watcher.returncode,
                                                                        err.read().decode(errors="replace")[-2000:]))
        return (b - a) / (seconds / INTERVAL_S), rss
    finally:
        if watcher is not None:
            watcher.kill()
            watcher.wait()
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="8,32,128")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda _n, _f: sys.exit(143))  # the ranks are killed on the way out
    sizes = [int(x) for x in args.ranks.split(",")]
    got: Dict[int, List[Tuple[float, float]]] = {n: [] for n in sizes}
    for _ in range(args.runs):
        for n in sizes:
            got[n].append(one_run(n, args.seconds))
    rows = ["| ranks | watcher CPU per interval (median) | per rank | watcher RSS (median) | runs (CPU ms) |",
            "|---|---|---|---|---|"]
    for n in sizes:
        cpu = statistics.median(c for c, _ in got[n])
        rss = statistics.median(r for _, r in got[n])
        rows.append("| %d | %.1f ms | %.2f ms | %.0f MiB | %s |" % (
            n, 1000 * cpu, 1000 * cpu / n, rss, ", ".join("%.1f" % (1000 * c) for c, _ in got[n])))
    first, last = sizes[0], sizes[-1]
    growth = statistics.median(c for c, _ in got[last]) / max(1e-9, statistics.median(c for c, _ in got[first]))
    rows += ["", "CPU per interval grows %.1fx for %.0fx the ranks (linear: %.0fx)." % (
        growth, last / first, last / first)]
    publish(rows + ["", "Each rank: 5 threads (a waiting main thread, 3 timed waiters at 200 ms, a worker at "
                    "200 ms); `--interval 1`, the crash watch on.  %s.  Command: `python bench/bench_watch_ranks.py "
                    "--ranks %s --runs %d --seconds %g`" % (machine(), args.ranks, args.runs, args.seconds)],
            args.out)


if __name__ == "__main__":
    main()
