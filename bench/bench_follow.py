"""attach --follow-children: how soon a child is held, and what idle children cost the parent.

    .venv/bin/python bench/bench_follow.py [--runs 5] [--idle 8] [--steps 3000000] [--out FILE]

bench/scripts/follow_children_load.py, run three ways: by itself; under ``tfnative attach --break uname``;
under ``tfnative attach --follow-children --break uname``.  It times (medians of --runs):
- a ``multiprocessing`` spawn child's first line, from ``Process.start()`` (followed: the child is stopped
  at its exec and runs its first line only once its own session has armed ``uname``);
- a fork child being traced by its own session, from ``Process.start()`` (followed only);
- the parent's own loop (pure Python, a getppid every 1000 steps) with --idle fork children alive
  (followed: each held by its own session, breakpoints armed, before the loop starts; in every way the loop
  starts 3 s after the last child started, so that it times the steady state, not the sessions' start).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Dict, List

from benchutil import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOAD = os.path.join(ROOT, "bench", "scripts", "follow_children_load.py")
TFNATIVE = [sys.executable, "-m", "tfnative", "attach", "--break", "uname"]


def one(prefix: List[str], idle: int, steps: int, followed: bool) -> Dict[str, float]:
    r = subprocess.run(prefix + [LOAD, str(idle), str(steps), "1" if followed else "0"], capture_output=True,
                       text=True, cwd=ROOT, timeout=600)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("{")), None)
    if r.returncode != 0 or line is None:
        sys.exit("run failed (%s): %s" % (r.returncode, r.stderr[-2000:]))
    return json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--idle", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3_000_000)
    ap.add_argument("--out")
    a = ap.parse_args()
    ways = [("python alone", [sys.executable], False),
            ("attach --break uname", TFNATIVE, False),
            ("attach --follow-children --break uname", TFNATIVE[:4] + ["--follow-children"] + TFNATIVE[4:], True)]
    results: Dict[str, List[Dict[str, float]]] = {name: [] for name, _, _ in ways}
    for _ in range(a.runs):  # interleaved, so that the machine's load falls on every way alike
        for name, prefix, followed in ways:
            results[name].append(one(prefix, a.idle, a.steps, followed))

    def med(name: str, key: str) -> str:
        values = [r[key] for r in results[name] if key in r]
        return "%.3f" % statistics.median(values) if values else "-"

    lines = ["attach --follow-children: medians of %d runs, %d idle fork children, %d loop steps"
             % (a.runs, a.idle, a.steps), "",
             "| way | spawn child's first line (s) | fork child held (s) | parent's loop (s) |",
             "|---|---|---|---|"]
    for name, _, _ in ways:
        lines.append("| %s | %s | %s | %s |" % (name, med(name, "spawn_first_line_s"), med(name, "fork_traced_s"),
                                               med(name, "loop_s")))
    publish(lines, a.out)


if __name__ == "__main__":
    main()
