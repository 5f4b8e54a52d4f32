"""A whole Slurm job in one command: ``tfnative stack --slurm-job J`` against one local ``stack --children``.

    .venv/bin/python bench/bench_slurm.py [--runs 5] [--out bench/results/slurm.md]

Starts a private single-node Slurm (``tests/slurmlocal.py``; root, Slurm and munge installed, as
``.ci/setup`` does), submits the 3-task ``MultiWorkerMirroredStrategy`` job of ``tests/integration/test_slurm.py``
(each task ``tests/scripts/mwms_slurm_worker.py``, rank 2 stalled before the step) and waits until ranks
0 and 1 wait in the step.  Then, in alternating order so that all see the same load, --runs rounds of:

(a) ``tfnative stack --slurm-job J`` (``srun --overlap`` step, one task per node, the snapshots on the
    node, the documents back, the merged tree printed);
(b) ``tfnative stack --children STEPD --json -`` run here on the same three processes (STEPD: the
    ``slurmstepd`` of the job's step 0, their parent): one local snapshot of them, no merge;
(c) (b) piped into ``tfnative merge -``: what (a) replaces.

Wall times, medians (min-max); the target is (a) <= 2 x (b).  Every (a) must name rank 2 as the outlier.
Stops the job and the cluster at the end, nothing left running.  (a) starts tfnative twice (here and on
the node): compile tfnative's modules first (``python -m compileall tfnative gdb_scripts``, as ``pip`` and
``.ci/setup`` do) where ``PYTHONDONTWRITEBYTECODE`` is set, or each start compiles them all again.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchutil import publish  # noqa: E402

from tests.slurmlocal import LocalSlurm  # noqa: E402

TFNATIVE = [sys.executable, "-m", "tfnative"]
WORKER = os.path.join(ROOT, "tests", "scripts", "mwms_slurm_worker.py")
FREE_PORTS = os.path.join(ROOT, "tests", "scripts", "free_ports.py")  # below the ephemeral range (it says why)


def _timed(argv: List[str], env: dict, stdin: str = None) -> Tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600,
                       input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)
    return time.perf_counter() - start, r


def _fmt(xs: List[float]) -> str:
    return "%.2f s [%.2f-%.2f]" % (statistics.median(xs), min(xs), max(xs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "slurm.md"))
    opts = ap.parse_args()
    cluster = LocalSlurm().start()
    tmp = tempfile.mkdtemp(prefix="bench-slurm-")
    os.chmod(tmp, 0o755)
    ready = os.path.join(tmp, "ready")
    os.mkdir(ready)
    job = None
    try:
        script = os.path.join(tmp, "job.sh")
        with open(script, "w") as f:
            f.write("#!/bin/bash\nexport MWMS_PORTS=$(%s %s 3)\nsrun --kill-on-bad-exit=0 %s %s %s 2\n"
                    % (sys.executable, FREE_PORTS, sys.executable, WORKER, ready))
        job = cluster.run(["sbatch", "--parsable", "-n", "3", "-D", tmp, "-o", os.path.join(tmp, "job.out"), script],
                          cwd=ROOT).stdout.strip()
        env = cluster.env()
        deadline = time.monotonic() + 900
        while True:
            wall, r = _timed(TFNATIVE + ["stack", "--slurm-job", job], env)
            step = [ln for ln in r.stdout.splitlines() if "TFE_Execute in" in ln]
            if r.returncode == 0 and step and "[rank:0-1]" in step[0]:
                break
            if time.monotonic() > deadline:
                sys.exit("the job's ranks 0 and 1 never waited in the step: %s %s" % (r.stdout, r.stderr))
            time.sleep(2)
        pids = [int(open(os.path.join(ready, "worker-%d" % i)).read().split()[0]) for i in range(3)]
        stepd = int(open("/proc/%d/stat" % pids[0]).read().rsplit(")", 1)[1].split()[1])
        times = {"a": [], "b": [], "c": []}
        for i in range(opts.runs):
            order = ["a", "b", "c"] if i % 2 == 0 else ["c", "b", "a"]
            for which in order:
                if which == "a":
                    wall, r = _timed(TFNATIVE + ["stack", "--slurm-job", job], env)
                    flagged = [ln for ln in r.stdout.splitlines() if "<== OUTLIER" in ln]
                    assert r.returncode == 0 and len(flagged) == 1 and "rank 2 on node" in flagged[0], r.stderr
                elif which == "b":
                    wall, r = _timed(TFNATIVE + ["stack", "--children", str(stepd), "--json", "-"], env)
                    assert r.returncode == 0 and len(r.stdout.splitlines()) == 3, r.stderr
                else:
                    start = time.perf_counter()
                    _, r = _timed(TFNATIVE + ["stack", "--children", str(stepd), "--json", "-"], env)
                    _, m = _timed(TFNATIVE + ["merge", "-"], env, stdin=r.stdout)
                    wall = time.perf_counter() - start
                    assert m.returncode == 0 and "<== OUTLIER" in m.stdout, m.stderr
                times[which].append(wall)
        ratio = statistics.median(times["a"]) / statistics.median(times["b"])
        lines = [
            "Whole-job snapshot of a 3-rank MultiWorkerMirroredStrategy job (rank 2 stalled) on a private "
            "single-node Slurm, %d rounds, this 2-core machine (shared)." % opts.runs,
            "",
            "| command | wall, median [min-max] |",
            "|---|---|",
            "| (a) tfnative stack --slurm-job J (srun --overlap, snapshot on the node, merged tree) | %s |"
            % _fmt(times["a"]),
            "| (b) tfnative stack --children STEPD --json - (local, the same 3 processes) | %s |" % _fmt(times["b"]),
            "| (c) (b) then tfnative merge - | %s |" % _fmt(times["c"]),
            "",
            "ratio (a)/(b): %.2f (target: at most 2)" % ratio,
            "",
            "runs (a): %s" % ", ".join("%.2f" % x for x in times["a"]),
            "runs (b): %s" % ", ".join("%.2f" % x for x in times["b"]),
            "runs (c): %s" % ", ".join("%.2f" % x for x in times["c"]),
        ]
        publish(lines, opts.out)
    finally:
        if job:
            while job in cluster.jobs():
                cluster.run(["scancel", "--signal=KILL", "--full", job], check=False)
                time.sleep(0.5)
        cluster.stop()
        left = cluster.leftovers()
        cluster.remove()
        shutil.rmtree(tmp, ignore_errors=True)
        if left:
            print("left running: %s" % left, file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
