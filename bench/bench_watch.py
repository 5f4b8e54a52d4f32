"""What watching costs a training loop: ``tfnative watch`` beside no watcher and py-spy at the same rate.

    .venv/bin/python bench/bench_watch.py [--runs 5] [--steps 1500] [--threads 1000] [--out bench/results/watch.md]

The job is ``bench/scripts/train_loop.py`` (a tf.function step: matmul, loss, gradient, update), started
anew for every run: once it says "ready" the watcher (if any) is started on its pid and given two seconds
to settle, then the job runs ``--steps`` steps and prints how long they took.  One round runs every mode
once, in an order that turns each round (this machine's speed drifts over minutes: each mode goes first
as often as the others), and the medians of ``--runs`` rounds are compared with the unwatched run's:

* ``tfnative watch --pid P`` at its default interval, and at ``--interval 1``;
* ``py-spy record --nonblocking --rate 1`` (never stops the job, as watch never does between captures);
* ``py-spy record --rate 1`` (stops every thread at every sample).

Then the watcher's own peak RSS (polled every 20 ms, children included) over 15 s on a process of
``--threads`` idle Python threads (``bench/scripts/many_threads_idle.py``), beside ``py-spy record
--nonblocking --rate 1`` on the same process.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Union

import psutil
from benchutil import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
BIN = os.path.dirname(PY)
SETTLE_S = 2.0


def _tool(name: str) -> str:
    local = os.path.join(BIN, name)
    return local if os.path.exists(local) else (shutil.which(name) or name)


def _tfnative(*args: str) -> Callable[[int], List[str]]:
    return lambda pid: [PY, "-m", "tfnative", "watch", "--pid", str(pid), *args]


MODES: Dict[str, Optional[Callable[[int], List[str]]]] = {
    "unwatched": None,
    "tfnative watch (default interval)": _tfnative(),
    "tfnative watch --interval 1": _tfnative("--interval", "1"),
    "py-spy record --nonblocking --rate 1": lambda pid: [_tool("py-spy"), "record", "--nonblocking", "--rate", "1",
                                                         "--pid", str(pid), "-o", os.devnull, "-f", "raw"],
    "py-spy record --rate 1": lambda pid: [_tool("py-spy"), "record", "--rate", "1", "--pid", str(pid),
                                           "-o", os.devnull, "-f", "raw"],
}


def _stop(proc: Optional[Union[subprocess.Popen[bytes], psutil.Popen]]) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_run(mode: str, steps: int) -> float:
    """The seconds ``steps`` steps of the loop took with ``mode`` watching it."""
    job = subprocess.Popen([PY, os.path.join(ROOT, "bench", "scripts", "train_loop.py"), str(steps)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    watcher: Optional[subprocess.Popen[bytes]] = None
    try:
        assert job.stdin is not None and job.stdout is not None
        if job.stdout.readline().strip() != "ready":
            raise SystemExit("bench_watch: the training loop did not start")
        argv = MODES[mode]
        if argv is not None:
            watcher = subprocess.Popen(argv(job.pid), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, cwd=ROOT, start_new_session=True)
        time.sleep(SETTLE_S)
        if watcher is not None and watcher.poll() is not None:
            raise SystemExit("bench_watch: %s ended early (exit %s)" % (mode, watcher.returncode))
        job.stdin.write("go\n")
        job.stdin.flush()
        line = job.stdout.readline().split()
        if line[:1] != ["took"]:
            raise SystemExit("bench_watch: the training loop said %r" % line)
        return float(line[1])
    finally:
        _stop(watcher)
        job.kill()
        job.wait()


def watcher_rss(argv: List[str], seconds: float) -> float:
    """Peak RSS (MB, children included) of ``argv`` over ``seconds``."""
    proc = psutil.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        cwd=ROOT, start_new_session=True)
    peak = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end and proc.poll() is None:
            try:
                peak = max(peak, sum(p.memory_info().rss for p in [proc] + proc.children(recursive=True)))
            except psutil.Error:
                pass
            time.sleep(0.02)
    finally:
        _stop(proc)
    return peak / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "watch.md"))
    args = ap.parse_args()
    names = list(MODES)
    took: Dict[str, List[float]] = {name: [] for name in names}
    for r in range(args.runs):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            took[name].append(one_run(name, args.steps))
            print("round %d: %s %.3f s" % (r + 1, name, took[name][-1]), file=sys.stderr)
    base = statistics.median(took["unwatched"])
    lines = ["| mode | steps took (median) [min-max] | vs unwatched |", "|---|---|---|"]
    for name in names:
        med = statistics.median(took[name])
        lines.append("| %s | %.3f s [%.3f-%.3f] | %+.1f%% |" % (name, med, min(took[name]), max(took[name]),
                                                                (med / base - 1) * 100))
    tmp = tempfile.mkdtemp(prefix="tfnative-bench-watch-")
    ready, gaps = os.path.join(tmp, "ready"), os.path.join(tmp, "gaps")
    target = subprocess.Popen([PY, os.path.join(ROOT, "bench", "scripts", "many_threads_idle.py"), ready, gaps,
                               str(args.threads)])
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.1)
        spy = MODES["py-spy record --nonblocking --rate 1"]
        assert spy is not None
        rss = {"tfnative watch --pid P": watcher_rss(_tfnative()(target.pid), 15),
               "py-spy record --nonblocking --rate 1": watcher_rss(spy(target.pid), 15)}
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    lines += ["", "Watcher's peak RSS on a process of %d idle Python threads, 15 s:" % args.threads, "",
              "| watcher | peak RSS |", "|---|---|"]
    lines += ["| %s | %.0f MB |" % (name, mb) for name, mb in rss.items()]
    lines += ["", "%d steps of bench/scripts/train_loop.py, %d interleaved rounds; %s, %d CPUs, Python %s." % (
        args.steps, args.runs, platform.machine(), os.cpu_count() or 0, platform.python_version()),
        "Command: `.venv/bin/python bench/bench_watch.py --runs %d --steps %d --threads %d`"
        % (args.runs, args.steps, args.threads)]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
