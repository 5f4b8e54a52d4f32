"""tfnative core vs pystack core on the cores of the real crash corpus (tests/corpus), side by side.

    .venv/bin/python bench/bench_corpus_core.py [--runs 3] [--out bench/results/corpus_core.md]

Each script of ``tests/corpus`` (real TensorFlow crashes from public issues) runs once in a temporary
directory with RLIMIT_CORE raised; its core is read by ``tfnative core CORE PYTHON`` and by
``pystack core CORE PYTHON --native-all`` alternately, ``--runs`` times each, then deleted (a TF core is
~300 MB).  Per core: the median wall times and peak RSS of each tool, their ratio, and whether the tool read
the core (exit 0); at the end the median of the ratios over the cores both read.
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import List, Tuple

from benchutil import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = os.path.realpath(sys.executable)
PYSTACK = os.path.join(os.path.dirname(sys.executable), "pystack")


def _core_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def measure(cmd: List[str]) -> Tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit status) of one run of ``cmd``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def _cell(median: Tuple[float, float, bool]) -> str:
    wall, _rss, ok = median
    return "%.2f s" % wall if ok else "%.2f s (failed)" % wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "corpus_core.md"))
    args = ap.parse_args()
    if not os.path.exists(PYSTACK):
        sys.exit("pystack is not installed beside this Python (pip install pystack)")
    rows = ["| core of | tfnative | pystack | tfnative / pystack | tfnative RSS | pystack RSS |",
            "|---|---|---|---|---|---|"]
    ratios = []
    for script in sorted(glob.glob(os.path.join(ROOT, "tests", "corpus", "*.py"))):
        tmp = tempfile.mkdtemp(prefix="tfnative-corpus-core-")
        try:
            subprocess.run([sys.executable, script], cwd=tmp, preexec_fn=_core_limit, capture_output=True,
                           timeout=600, env=dict(os.environ, TMPDIR=tmp))
            core = os.path.join(tmp, "core")
            if not os.path.exists(core):
                rows.append("| %s | no core written | | | | |" % os.path.basename(script))
                continue
            tools = {"tfnative": [sys.executable, "-m", "tfnative", "core", core, PYTHON],
                     "pystack": [PYSTACK, "core", core, PYTHON, "--native-all"]}
            runs = {name: [] for name in tools}
            for _ in range(args.runs):
                for name, cmd in tools.items():
                    runs[name].append(measure(cmd))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        med = {name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs),
                      all(r[2] == 0 for r in rs)) for name, rs in runs.items()}

        both = med["tfnative"][2] and med["pystack"][2]
        ratio = med["tfnative"][0] / med["pystack"][0]
        if both:
            ratios.append(ratio)
        rows.append("| %s | %s | %s | %s | %.0f MB | %.0f MB |" % (
            os.path.basename(script), _cell(med["tfnative"]), _cell(med["pystack"]), "%.2f" % ratio if both else "-",
            med["tfnative"][1], med["pystack"][1]))
    lines = ["# `tfnative core` vs `pystack core --native-all` on the real crash corpus (tests/corpus)", "",
             "`bench/bench_corpus_core.py --runs %d`: medians of %d alternating runs per core (2 shared cores)." % (
                 args.runs, args.runs), ""] + rows + [
        "", "Median ratio over the cores both read: %s." % ("%.2f" % statistics.median(ratios) if ratios else "-"),
        "'failed': the tool exited non-zero (pystack: 'doesn't look like a valid core file' on some)."]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
