"""``tfnative stack`` vs ``pystack remote --native`` on a TensorFlow process busy in matmuls (oneDNN JIT).

    .venv/bin/python bench/bench_busy_tf.py [--runs 5]

One TF process runs ``tests/scripts/tf_busy_matmul.py``; the two tools take
turns (tfnative, pystack, tfnative, ...) so both see the same load.  Reported:
the median wall time of each, how many tfnative snapshots went through gdb,
and how many ended with every thread unwound to its start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable
BIN = os.path.dirname(sys.executable)


def _timed(argv: list) -> tuple:
    start = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    return time.perf_counter() - start, r


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()
    ready = os.path.join(tmp, "ready")
    target = subprocess.Popen([PYTHON, os.path.join(ROOT, "tests", "scripts", "tf_busy_matmul.py"), ready],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not os.path.exists(ready):
            if target.poll() is not None:
                sys.exit("the TF target exited")
            time.sleep(0.1)
        time.sleep(1)
        ours, theirs, via_gdb, complete = [], [], 0, 0
        for i in range(args.runs):
            out = os.path.join(tmp, "s%d.json" % i)
            t, r = _timed([PYTHON, "-m", "tfnative", "stack", "--pid", str(target.pid), "--all-threads",
                           "--json", out])
            ours.append(t)
            ev = json.load(open(out))["events"][0]
            via_gdb += ev["via"] == "gdb"
            complete += all(th["frames"] and th["frames"][-1]["function"] in ("_start", "clone3", "clone")
                            for th in ev["threads"])
            t, r = _timed([os.path.join(BIN, "pystack"), "remote", "--native", str(target.pid)])
            if r.returncode != 0:
                sys.exit("pystack failed: %s" % r.stderr[-500:])
            theirs.append(t)
        print("busy TF (%d runs, medians): tfnative stack --all-threads %.2f s (through gdb: %d, every thread "
              "to its start: %d); pystack remote --native %.2f s"
              % (args.runs, statistics.median(ours), via_gdb, complete, statistics.median(theirs)))
        print("tfnative:", " ".join("%.2f" % t for t in ours))
        print("pystack: ", " ".join("%.2f" % t for t in theirs))
    finally:
        target.kill()
        target.wait()


if __name__ == "__main__":
    main()
