"""Does the GIL state, kernel state, pool count and verdict make ``tfnative stack`` slower?

    .venv/bin/python bench/bench_stuck.py [--runs N] [--baseline /work/main] [--threads N]

Two targets: a stuck TensorFlow process (``tests/scripts/tf_stuck.py gil``: a callback holds the GIL, two
threads wait for it, the main thread waits for the tf.function) and N idle Python threads with a heartbeat
(``bench/scripts/many_threads_idle.py``, which logs how long the process was held).  On each,
``tfnative stack --pid`` of this checkout and of the baseline checkout (its own ``.venv``, run from its
directory) are run in turn, one of each per round (this machine's speed drifts over minutes): wall time
and, on the idle-threads target, the pause (the longest gap the heartbeat saw).  Medians of --runs runs
(min-max in brackets).
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
from typing import Dict, List

from benchutil import longest_pause

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fmt(xs: List[float]) -> str:
    return "%.3f s [%.3f-%.3f]" % (statistics.median(xs), min(xs), max(xs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", default="/work/main")
    ap.add_argument("--threads", type=int, default=220)
    args = ap.parse_args()
    checkouts = {"this": ROOT, "baseline": os.path.abspath(args.baseline)}
    tmp = tempfile.mkdtemp(prefix="bench-stuck-")
    ready, gaps = os.path.join(tmp, "ready"), os.path.join(tmp, "gaps")
    idle = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "scripts", "many_threads_idle.py"),
                             ready, gaps, str(args.threads)], stdin=subprocess.DEVNULL)
    stuck = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "scripts", "tf_stuck.py"), "gil"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        assert stuck.stdout.readline() == b"ready\n"
        while not os.path.exists(ready):
            time.sleep(0.05)
        open(gaps, "a").close()
        time.sleep(3)  # the callback reaches its PyDLL call
        wall: Dict[tuple, List[float]] = {}
        pause: Dict[str, List[float]] = {}
        for _ in range(args.runs):
            for name, root in checkouts.items():
                for target, pid in (("stuck TF process", stuck.pid), ("%d idle threads" % args.threads, idle.pid)):
                    cmd = [os.path.join(root, ".venv", "bin", "python"), "-m", "tfnative", "stack", "--pid", str(pid)]
                    t0 = time.monotonic()
                    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300)
                    t1 = time.monotonic()
                    assert r.returncode == 0, r.stderr
                    wall.setdefault((target, name), []).append(t1 - t0)
                    if pid == idle.pid:
                        pause.setdefault(name, []).append(longest_pause(gaps, t0, t1))
        print("| target | checkout | wall | pause of the target |")
        print("|---|---|---|---|")
        for (target, name), xs in wall.items():
            held = _fmt(pause[name]) if "idle" in target else "-"
            print("| %s | %s | %s | %s |" % (target, name, _fmt(xs), held))
    finally:
        for p in (idle, stuck):
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
