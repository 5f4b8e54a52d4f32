"""Many idle Python threads: how long each tool takes, and how long it holds the process.

    .venv/bin/python bench/bench_threads.py [--runs N] [--threads N] [--out bench/results/threads.md]

One process with N idle Python threads and no TensorFlow (``bench/scripts/many_threads_idle.py``)
is snapshotted in turn by ``tfnative stack --pid``, ``py-spy dump --native`` and
``pystack remote --native``, one run of each in turn (this machine's speed drifts over minutes).
For each run: the tool's wall time and peak RSS, and the *pause*: the longest gap the target's own
heartbeat thread saw during the run (it sleeps 1 ms in a loop; a tool that stops the process shows
as one gap as long as the hold).  Medians of --runs runs (min-max in brackets).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

import psutil
from benchutil import longest_pause

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
BIN = os.path.dirname(PY)


def _tool(name: str) -> str:
    local = os.path.join(BIN, name)
    return local if os.path.exists(local) else (shutil.which(name) or name)


TOOLS = {
    "tfnative stack --pid": lambda pid: [_tool("tfnative"), "stack", "--pid", str(pid)],
    "py-spy dump --native": lambda pid: [_tool("py-spy"), "dump", "--native", "--pid", str(pid)],
    "pystack remote --native": lambda pid: [_tool("pystack"), "remote", "--native", str(pid)],
}


def _run(cmd: List[str]) -> Tuple[float, float, int, float]:
    """(start, wall, exit status, peak RSS MB) of one tool run, RSS polled every 10 ms."""
    start = time.monotonic()
    proc = psutil.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, sum(p.memory_info().rss for p in [proc] + proc.children(recursive=True)))
        except psutil.Error:
            pass
        time.sleep(0.01)
    return start, time.monotonic() - start, proc.returncode, peak / 1e6


def _fmt(values: List[float], unit: str = "s") -> str:
    med = statistics.median(values)
    if unit == "MB":
        return "%.0f MB" % med
    return "**%.2f s** [%.2f-%.2f s]" % (med, min(values), max(values))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=220)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "threads.md"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tfnative-bench-threads-")
    ready, gaps = os.path.join(tmp, "ready"), os.path.join(tmp, "gaps")
    target = subprocess.Popen([PY, os.path.join(ROOT, "bench", "scripts", "many_threads_idle.py"), ready, gaps,
                               str(args.threads)])
    results: Dict[str, Dict[str, List[float]]] = {name: {"wall": [], "pause": [], "rss": []} for name in TOOLS}
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        for cmd in TOOLS.values():  # warm-up: caches, page cache
            _run(cmd(target.pid))
        for i in range(args.runs):
            for name, cmd in TOOLS.items():
                start, wall, code, rss = _run(cmd(target.pid))
                if code != 0:
                    raise SystemExit("%s exited %d" % (name, code))
                time.sleep(0.6)
                results[name]["wall"].append(wall)
                results[name]["pause"].append(longest_pause(gaps, start, start + wall))
                results[name]["rss"].append(rss)
                print("run %d %-26s wall %.2f s pause %.2f s rss %.0f MB"
                      % (i + 1, name, wall, results[name]["pause"][-1], rss), flush=True)
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = ["`bench/bench_threads.py --runs %d --threads %d` on %s, commit %s; %d cores, Python %s. "
             "Medians of %d runs (min-max in brackets)." % (args.runs, args.threads,
                                                          time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                          commit, os.cpu_count() or 0, platform.python_version(),
                                                          args.runs),
             "",
             "| tool (%d idle Python threads, no TF) | wall | pause of the target | peak RSS |" % args.threads,
             "|---|---|---|---|"]
    for name, r in results.items():
        lines.append("| `%s` | %s | %s | %s |" % (name, _fmt(r["wall"]), _fmt(r["pause"]), _fmt(r["rss"], "MB")))
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
