"""What the wait-for graph behind the hang verdict costs: ``stack --pid`` on a hung TensorFlow process with
200 waiting Python threads, this tree against a tree from before the graph, side by side.

    .venv/bin/python bench/bench_waitgraph.py [--runs 11] [--threads 200] [--baseline REV]
                                              [--out bench/results/waitgraph.md]

The target (``bench/scripts/tf_hang.py N``) is started once; then ``python -m tfnative stack --pid``
runs alternately from this checkout and from ``git archive REV`` of the baseline (REV: the last commit
before the wait-for graph, by default), ``--runs`` times each.  Medians of the wall times (min-max in
brackets) and their ratio; the baseline's verdict and this tree's, to show what the time buys.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Dict, List, Tuple

from benchutil import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
TARGET = os.path.join(ROOT, "bench", "scripts", "tf_hang.py")
# The last commit before the wait-for graph (issue #25).
BASELINE = "5ee41d1"


def extract(rev: str, into: str) -> None:
    """``tfnative`` and ``gdb_scripts`` of ``rev`` under ``into``."""
    blob = subprocess.run(["git", "-C", ROOT, "archive", rev, "tfnative", "gdb_scripts"], check=True,
                          capture_output=True).stdout
    path = os.path.join(into, "tree.tar")
    with open(path, "wb") as f:
        f.write(blob)
    with tarfile.open(path) as tar:
        tar.extractall(into, filter="data")
    os.unlink(path)


def stack(cwd: str, pid: int) -> Tuple[float, str]:
    start = time.monotonic()
    r = subprocess.run([PY, "-m", "tfnative", "stack", "--pid", str(pid)], cwd=cwd, capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    took = time.monotonic() - start
    if r.returncode != 0:
        raise SystemExit("tfnative stack failed (%s): %s" % (cwd, r.stderr[-2000:]))
    verdict = next((line for line in r.stderr.splitlines() if "verdict:" in line), "")
    return took, verdict.split("verdict:", 1)[-1].strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "waitgraph.md"))
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="tfnative-baseline-")
    target = subprocess.Popen([PY, TARGET, str(args.threads)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, text=True)
    try:
        extract(args.baseline, base)
        assert target.stdout is not None
        if target.stdout.readline().strip() != "ready":
            raise SystemExit("the target did not get ready")
        times: Dict[str, List[float]] = {"baseline": [], "graph": []}
        verdicts: Dict[str, str] = {}
        stack(ROOT, target.pid)  # warm the symbol index cache for both
        for _ in range(args.runs):
            for name, cwd in (("baseline", base), ("graph", ROOT)):
                took, verdict = stack(cwd, target.pid)
                times[name].append(took)
                verdicts[name] = verdict
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(base, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    lines = [
        "# The wait-for graph's cost: `stack --pid` on a hung TF process with %d waiting threads" % args.threads,
        "",
        "`%s` (%d runs each, alternating; %s, %d cores)." % (
            " ".join(["bench/bench_waitgraph.py"] + sys.argv[1:]), args.runs, platform.python_version(),
            os.cpu_count() or 0),
        "",
        "| tree | median wall time | min-max |",
        "|---|---|---|",
    ]
    for name, label in (("baseline", "before the graph (%s)" % args.baseline), ("graph", "with the graph")):
        lines.append("| %s | %.3f s | %.3f-%.3f |" % (label, med[name], min(times[name]), max(times[name])))
    lines += ["", "Ratio with/before: %.3f (%+.1f %%)." % (med["graph"] / med["baseline"],
                                                        100 * (med["graph"] / med["baseline"] - 1)),
              "", "Verdict before: %s" % verdicts.get("baseline", ""), "",
              "Verdict with the graph: %s" % verdicts.get("graph", "")]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
