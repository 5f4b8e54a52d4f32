"""Many processes: one ``tfnative stack`` call on six hung TF processes vs ``pystack remote --native`` on each
in turn; ``tfnative merge`` of 1,000 documents of a real all-threads snapshot.

    .venv/bin/python bench/bench_many.py [--runs 5] [--procs 6]

(a) ``--procs`` processes of ``bench/scripts/tf_hang.py`` (a tf.function blocked in a tf.py_function),
started once.  Each round runs ``tfnative stack --pid P1 ... --pid P6 --json FILE`` (one call, the
processes snapshotted concurrently), ``pystack remote --native P`` for each P in turn and, for reference,
``tfnative stack --pid P`` for each P in turn, in alternating order so all see the same load; wall
times, medians of --runs rounds (min-max in brackets).  Every tfnative document must have each
process's main thread waiting in ``TFE_Execute``, and pystack must succeed on each.

(b) One ``tfnative stack --all-threads --json`` document of one of those processes, copied into 250, 500
and 1,000 documents (each its own pid and task) as JSON Lines; ``tfnative merge --all-threads`` of each
file: wall time (median of --runs) and peak RSS (``wait4``), to show that memory is linear in the input.

(c) In this process, ``run_many`` (``cli/stack.py``) on the same processes with one snapshot at a time and with
the pool (``MAX_JOBS``): wall time and how long each process is held (``ptrace.Frozen``'s enter to exit).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable
BIN = os.path.dirname(sys.executable)


def _timed(argv: List[str]) -> Tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, stdin=subprocess.DEVNULL, timeout=600)
    return time.perf_counter() - start, r


def _rss_run(argv: List[str]) -> Tuple[float, int, int]:
    """(wall seconds, peak RSS in KiB, exit status) of ``argv``, its output discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit("%s failed: %s" % (argv, proc.stderr.read().decode()[-500:] if proc.stderr else ""))
    proc.stderr.close()
    return wall, usage.ru_maxrss, proc.returncode


def _fmt(xs: List[float]) -> str:
    return "%.2f s [%.2f-%.2f]" % (statistics.median(xs), min(xs), max(xs))


def _start(n: int, tmp: str) -> List[subprocess.Popen]:
    procs = []
    for _ in range(n):
        procs.append(subprocess.Popen([PYTHON, os.path.join(ROOT, "bench", "scripts", "tf_hang.py")],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                      cwd=tmp))
    for p in procs:
        if p.stdout.readline() != b"ready\n":
            sys.exit("a TF target did not get ready")
    return procs


def _check_docs(path: str, pids: List[int]) -> None:
    with open(path) as f:
        docs = [json.loads(line) for line in f]
    if sorted(d["pid"] for d in docs) != sorted(pids):
        sys.exit("tfnative reported %s, not %s" % ([d["pid"] for d in docs], pids))
    for d in docs:
        main = d["events"][0]["threads"][0]["frames"]
        if not any(f.get("function") == "TFE_Execute" for f in main):
            sys.exit("pid %d: main thread not in TFE_Execute" % d["pid"])


def bench_stack(procs: List[subprocess.Popen], runs: int, tmp: str) -> Dict[str, List[float]]:
    pids = [p.pid for p in procs]
    pystack = shutil.which("pystack") or os.path.join(BIN, "pystack")
    times: Dict[str, List[float]] = {"ours": [], "ours_each": [], "pystack": []}

    def ours(i: int) -> None:
        out = os.path.join(tmp, "many%d.jsonl" % i)
        argv = [PYTHON, "-m", "tfnative", "stack", "--json", out]
        for pid in pids:
            argv += ["--pid", str(pid)]
        t, r = _timed(argv)
        if r.returncode != 0:
            sys.exit("tfnative failed: %s" % r.stderr[-500:])
        _check_docs(out, pids)
        times["ours"].append(t)

    def ours_each(i: int) -> None:
        total = 0.0
        for pid in pids:
            t, r = _timed([PYTHON, "-m", "tfnative", "stack", "--pid", str(pid)])
            if r.returncode != 0 or "TFE_Execute" not in r.stdout:
                sys.exit("tfnative failed on %d: %s" % (pid, r.stderr[-500:]))
            total += t
        times["ours_each"].append(total)

    def theirs(i: int) -> None:
        total = 0.0
        for pid in pids:
            t, r = _timed([pystack, "remote", "--native", str(pid)])
            if r.returncode != 0 or "TFE_Execute" not in r.stdout:
                sys.exit("pystack failed on %d: %s" % (pid, r.stderr[-500:]))
            total += t
        times["pystack"].append(total)

    for i in range(runs):
        for step in ((ours, theirs, ours_each) if i % 2 == 0 else (ours_each, theirs, ours)):
            step(i)
    return times


def bench_merge(pid: int, runs: int, tmp: str) -> List[Tuple[int, int, List[float], int]]:
    one = os.path.join(tmp, "one.json")
    t, r = _timed([PYTHON, "-m", "tfnative", "stack", "--pid", str(pid), "--all-threads", "--json", one])
    if r.returncode != 0:
        sys.exit("tfnative failed: %s" % r.stderr[-500:])
    with open(one) as f:
        doc = json.load(f)
    rows = []
    for n in (250, 500, 1000):
        path = os.path.join(tmp, "docs%d.jsonl" % n)
        with open(path, "w") as f:
            for i in range(n):
                doc["pid"], doc["task"] = 100000 + i, {"type": "worker", "index": i}
                f.write(json.dumps(doc, separators=(",", ":")) + "\n")
        walls, rss = [], 0
        for _ in range(runs):
            wall, peak, _code = _rss_run([PYTHON, "-m", "tfnative", "merge", "--all-threads", path])
            walls.append(wall)
            rss = max(rss, peak)
        threads = len(doc["events"][0]["threads"])
        rows.append((n, os.path.getsize(path), walls, rss, threads))
    return rows


def bench_holds(pids: List[int], runs: int) -> Dict[int, List[Tuple[float, float, float]]]:
    """(wall, longest hold, median hold) of ``run_many`` (``cli/stack.py``) in this process, per pool size; a
    hold is ``ptrace.Frozen``'s ``held_s``: from the first thread stopped to the last let go."""
    import io

    from tfnative.cli.stack import run_many
    from tfnative.snapshot import many as multistack
    from tfnative.snapshot.options import Selection, StackOptions
    from tfnative.sources import ptrace

    holds: List[float] = []
    hold = ptrace.Frozen.hold

    def timed_hold(self: ptrace.Frozen, while_held: Callable[[ptrace.Frozen], None]) -> None:
        try:
            hold(self, while_held)
        finally:
            holds.append(self.held_s)

    ptrace.Frozen.hold = timed_hold  # type: ignore[method-assign]
    defaults = multistack.snapshot_all.__defaults__
    out: Dict[int, List[Tuple[float, float, float]]] = {}
    try:
        for _ in range(runs + 1):  # the first round warms the caches
            for jobs in (1, multistack.MAX_JOBS):
                multistack.snapshot_all.__defaults__ = (jobs, None)
                holds.clear()
                t0 = time.perf_counter()
                run_many(Selection(pids=tuple(pids)), StackOptions(), io.StringIO(), io.StringIO())
                out.setdefault(jobs, []).append((time.perf_counter() - t0, max(holds), statistics.median(holds)))
    finally:
        ptrace.Frozen.hold = hold  # type: ignore[method-assign]
        multistack.snapshot_all.__defaults__ = defaults
    return {jobs: rows[1:] for jobs, rows in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--procs", type=int, default=6)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-many-")
    procs: List[subprocess.Popen] = []
    try:
        procs = _start(args.procs, tmp)
        time.sleep(1)
        times = bench_stack(procs, args.runs, tmp)
        print("(a) %d hung TF processes (bench/scripts/tf_hang.py), %d rounds, medians [min-max]"
              % (args.procs, args.runs))
        print("| tool | wall for all %d |" % args.procs)
        print("|---|---|")
        print("| tfnative stack --pid x%d (one call) | %s |" % (args.procs, _fmt(times["ours"])))
        print("| tfnative stack --pid, each in turn | %s |" % _fmt(times["ours_each"]))
        print("| pystack remote --native, each in turn | %s |" % _fmt(times["pystack"]))
        print("ratio (tfnative / pystack, medians): %.2f"
              % (statistics.median(times["ours"]) / statistics.median(times["pystack"])))
        print()
        rows = bench_merge(procs[0].pid, args.runs, tmp)
        print("(b) tfnative merge --all-threads of N copies of one real all-threads document "
              "(%d threads), medians of %d runs" % (rows[0][4], args.runs))
        print("| documents | input | wall | peak RSS |")
        print("|---|---|---|---|")
        for n, size, walls, rss, _threads in rows:
            print("| %d | %.1f MB | %s | %d MB |" % (n, size / 1e6, _fmt(walls), rss // 1024))
        print()
        holds = bench_holds([p.pid for p in procs], args.runs)
        print("(c) how long each process is held, one stack call on the %d (in process, medians of %d)"
              % (args.procs, args.runs))
        print("| snapshots at a time | wall | longest hold | median hold |")
        print("|---|---|---|---|")
        for jobs, rows3 in holds.items():
            wall, longest, median = (statistics.median(c) for c in zip(*rows3))
            print("| %d | %.3f s | %.3f s | %.3f s |" % (jobs, wall, longest, median))
        print()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
