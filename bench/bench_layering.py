"""Issues #24, #35 and #43 (the layering, the stages): this checkout against an older one, the same commands
interleaved.

    .venv/bin/python bench/bench_layering.py --baseline DIR [--runs 11] [--out bench/results/layering.md]

``DIR`` is the tree before the change (e.g. ``git worktree add DIR COMMIT``), run with this venv's
interpreter (``python -m tfnative`` in that directory).  On one hung TensorFlow process
(``bench/scripts/tf_hang.py``): ``stack --pid P -a`` and ``stack --pid P`` (each with ``--json``, whose
``held_ms`` is how long the process was held: the longest and the median hold are reported); ``merge`` of 200
and of 1,000 copies of its document (as many ranks); then ``tfnative --version`` (start-up).  Each round runs
every command once from each tree, alternating which goes first, so a drift of the machine's speed falls on
both; the medians of ``--runs`` rounds and their ratio are reported, for wall time and for CPU time (user +
system, which moves less on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

from benchutil import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}


def wall(argv: List[str], cwd: str) -> Tuple[float, float, Optional[float]]:
    """(wall seconds, CPU seconds: user + system, the hold in ms) of one ``python -m tfnative ARGV`` in ``cwd``
    (a failed run is an error: nothing to compare).  CPU time moves less than wall time on a shared machine.
    The hold: the ``held_ms`` of the document a ``stack ... --json FILE`` wrote (None for other commands)."""
    start = time.monotonic()
    proc = subprocess.Popen([PY, "-m", "tfnative", *argv], cwd=cwd, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    took = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit("tfnative %s in %s exited %d" % (" ".join(argv), cwd, proc.returncode))
    held = None
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1]) as f:
            held = json.load(f)["events"][0].get("held_ms")
    return took, usage.ru_utime + usage.ru_stime, held


Runs = Dict[str, Dict[str, List[Tuple[float, float, Optional[float]]]]]
MERGED = (200, 1000)  # documents ``merge DOCS`` reads: the hung process's, as so many ranks


def _documents(pid: str, path: str, count: int) -> None:
    """``count`` copies of the process's ``stack --json`` document as JSON Lines at ``path``, each a rank of its
    own (``merge`` reads them, builds the tree and prints it: the reader and the tree of issue #35)."""
    one = subprocess.run([PY, "-m", "tfnative", "stack", "--pid", pid, "-a", "--json", "-"], cwd=ROOT, env=ENV,
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(one)
    with open(path, "w") as f:
        for i in range(count):
            doc["pid"], doc["labels"] = 10000 + i, {"rank": str(i)}
            f.write(json.dumps(doc, separators=(",", ":")) + "\n")


def measure(cases: Dict[str, List[str]], trees: Dict[str, str], runs: int) -> Runs:
    """{case: {tree: [(wall, cpu, hold)]}}: every case from every tree once per round, the trees' order
    alternating."""
    out: Runs = {c: {t: [] for t in trees} for c in cases}
    for argv in cases.values():  # warm-up: byte code, symbol caches, page cache
        for where in trees.values():
            wall(argv, where)
    names = list(trees)
    for i in range(runs):
        order = names if i % 2 == 0 else names[::-1]
        for case, argv in cases.items():
            for t in order:
                out[case][t].append(wall(argv, trees[t]))
            print("round %d %-28s %s" % (i + 1, case, "  ".join("%s %.3f s" % (t, out[case][t][-1][0])
                                                                for t in names)), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="the tree before the change")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "layering.md"))
    args = ap.parse_args()
    baseline = os.path.abspath(args.baseline)
    tmp = tempfile.mkdtemp(prefix="tfnative-bench-layering-")
    target = subprocess.Popen([PY, os.path.join(ROOT, "bench", "scripts", "tf_hang.py")], stdout=subprocess.PIPE,
                              text=True, env=dict(ENV, TMPDIR=tmp))
    try:
        assert target.stdout is not None
        target.stdout.readline()  # "ready"
        time.sleep(1.0)
        pid = str(target.pid)
        held = os.path.join(tmp, "held.json")
        cases = {"stack --pid P -a": ["stack", "--pid", pid, "-a", "--json", held],
                 "stack --pid P": ["stack", "--pid", pid, "--json", held]}
        for count in MERGED:
            docs = os.path.join(tmp, "docs%d.jsonl" % count)
            _documents(pid, docs, count)
            cases["merge %s DOCS" % format(count, ",")] = ["merge", "--all-threads", docs]
        cases["--version"] = ["--version"]
        res = measure(cases, {"this": ROOT, "baseline": baseline}, args.runs)
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    commits = [subprocess.run(["git", "-C", d, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() for d in (ROOT, baseline)]
    lines = ["`bench/bench_layering.py --baseline BASELINE --runs %d` on %s: this checkout %s, baseline %s; "
             "%d cores (shared), Python %s. Medians of %d interleaved rounds (min-max in brackets), on one hung "
             "TF process (`bench/scripts/tf_hang.py`); `merge N DOCS`: N copies of its `stack -a --json` document, "
             "as N ranks; the hold: `held_ms` of `stack`'s own document, the longest of the rounds (the median)." % (
                 args.runs, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commits[0], commits[1],
                 os.cpu_count() or 0, platform.python_version(), args.runs), "",
             "| command | wall: this checkout | wall: baseline | ratio | CPU: this checkout | CPU: baseline | ratio "
             "| hold: this checkout | hold: baseline |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case, r in res.items():
        cells = []
        for k in (0, 1):
            a, b = ([x[1] if k else x[0] for x in r[t]] for t in ("this", "baseline"))
            cells.append("**%.3f s** [%.3f-%.3f] | %.3f s [%.3f-%.3f] | %.2f" % (
                statistics.median(a), min(a), max(a), statistics.median(b), min(b), max(b),
                statistics.median(a) / statistics.median(b)))
        for t in ("this", "baseline"):
            holds = [x[2] for x in r[t] if x[2] is not None]
            cells.append("%.1f ms (%.1f)" % (max(holds), statistics.median(holds)) if holds else "")
        lines.append("| `tfnative %s` | %s |" % (case, " | ".join(cells)))
    publish(lines, args.out)


if __name__ == "__main__":
    main()
