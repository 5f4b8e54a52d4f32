"""tfnative core (own unwinder, and --with-gdb) vs pystack core vs gdb's 'thread apply all bt', side by side.

    .venv/bin/python bench/bench_core.py [--runs 5] [--gdb-runs 3] [--core CORE] [--out bench/results/core.md]

Without --core it makes one: tests/scripts/tf_pyfunc_segv.py (a TF process that segfaults inside a
tf.py_function) run in a temporary directory with RLIMIT_CORE raised.  Each tool runs --runs times
(gdb --gdb-runs times: it takes tens of seconds per run on a TF core), one after another; the table
gives the median wall time and the median peak RSS (ru_maxrss of the finished child, from wait4; for
--with-gdb that is the larger of tfnative and its gdb).
"""

from __future__ import annotations

import argparse
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


def _core_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def make_core(tmp: str) -> str:
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "scripts", "tf_pyfunc_segv.py")], cwd=tmp,
                   preexec_fn=_core_limit, capture_output=True, timeout=900)
    path = os.path.join(tmp, "core")
    if not os.path.exists(path):
        sys.exit("no core was written in %s" % tmp)
    return path


def measure(cmd: List[str]) -> Tuple[float, float]:
    """(wall seconds, peak RSS MB) of one run of ``cmd``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        print("warning: %s exited %d" % (cmd[0], proc.returncode), file=sys.stderr)
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gdb-runs", type=int, default=3)
    ap.add_argument("--core")
    ap.add_argument("--out")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-core-") as tmp:
        core = args.core or make_core(tmp)
        pystack = shutil.which("pystack") or os.path.join(os.path.dirname(sys.executable), "pystack")
        tools = [
            ("tfnative core", [sys.executable, "-m", "tfnative", "core", core], args.runs),
            ("tfnative core --with-gdb", [sys.executable, "-m", "tfnative", "core", core, "--with-gdb"], args.runs),
            ("pystack core --native-all", [pystack, "core", core, PYTHON, "--native-all"], args.runs),
            ("gdb thread apply all bt", ["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled off",
                                         "-ex", "thread apply all bt", PYTHON, core], args.gdb_runs),
        ]
        rows = []
        for name, cmd, runs in tools:
            samples = [measure(cmd) for _ in range(runs)]
            rows.append((name, runs, statistics.median(s[0] for s in samples),
                         statistics.median(s[1] for s in samples)))
        size = os.path.getsize(core) / 1e6
    lines = ["core: %.0f MB (tf.py_function segfault); medians" % size, "",
             "| tool | runs | wall s | peak RSS MB |", "|---|---|---|---|"]
    lines += ["| %s | %d | %.2f | %.0f |" % r for r in rows]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
