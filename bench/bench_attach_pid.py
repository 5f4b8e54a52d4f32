"""tfnative attach --pid vs gdb -p: time from the command's start to a breakpoint armed; a watched loop's speed.

    .venv/bin/python bench/bench_attach_pid.py [--runs 3] [--gdb-runs 3] [--steps 20000] [--out FILE]
                                               [--skip-loop | --skip-armed]

(a) One process that imported TensorFlow and waits (bench/scripts/open_session_stdin.py).  Against it,
    in turn: ``tfnative attach --pid PID --break TF_NewSession`` (until its "armed TF_NewSession" line;
    then SIGTERM: it detaches) and ``gdb -p PID -ex 'break TF_NewSession' -ex 'echo ARMED'`` (until
    ARMED; gdb then detaches at -batch's end).  Medians of the time to that line.
(b) A small Keras-free training loop (bench/scripts/train_loop.py: STEPS matmul+gradient steps of a
    tf.function) timed by itself, unwatched and watched by ``tfnative attach --pid PID`` (no
    breakpoint: tfnative waits for a fatal signal); medians of its steps' wall time.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Callable, List

from benchutil import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAITER = os.path.join(ROOT, "bench", "scripts", "open_session_stdin.py")
TRAIN = os.path.join(ROOT, "bench", "scripts", "train_loop.py")
TFNATIVE = [sys.executable, "-m", "tfnative"]


def waiting_tf() -> subprocess.Popen:
    """A process that imported TensorFlow, waiting on its stdin."""
    proc = subprocess.Popen([sys.executable, WAITER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "waiting" not in line:
        sys.exit("the waiting TF process did not start: %r" % line)
    return proc


def time_to_line(cmd: List[str], marker: str, stream: str, after: Callable[[subprocess.Popen], None]) -> float:
    """Seconds from starting ``cmd`` to a line holding ``marker`` on its ``stream``; then ``after(proc)``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if stream == "stdout"
                            else subprocess.DEVNULL, stderr=subprocess.PIPE if stream == "stderr"
                            else subprocess.DEVNULL, text=True, cwd=ROOT)
    pipe = proc.stdout if stream == "stdout" else proc.stderr
    assert pipe is not None
    for line in pipe:
        if marker in line:
            took = time.perf_counter() - t0
            break
    else:
        proc.wait()
        sys.exit("%s never said %r (exit %s)" % (cmd[0], marker, proc.returncode))
    after(proc)
    pipe.read()
    proc.wait()
    return took


def bench_armed(runs: int, gdb_runs: int) -> dict:
    target = waiting_tf()
    try:
        pid = str(target.pid)
        ours = [time_to_line(TFNATIVE + ["attach", "--pid", pid, "--break", "TF_NewSession"],
                             "armed TF_NewSession", "stderr", lambda p: p.send_signal(signal.SIGTERM))
                for _ in range(runs)]
        gdb = [time_to_line(["gdb", "-nx", "-q", "-batch", "-iex", "set debuginfod enabled off", "-p", pid,
                             "-ex", "break TF_NewSession", "-ex", "echo ARMED\\n"],
                            "ARMED", "stdout", lambda p: None)
               for _ in range(gdb_runs)]
    finally:
        target.kill()
        target.wait()
    return {"tfnative": ours, "gdb": gdb}


def train_time(watched: bool, steps: int) -> float:
    """Seconds the training loop's own steps took (it times itself), unwatched or watched by tfnative."""
    proc = subprocess.Popen([sys.executable, TRAIN, str(steps)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.stdin is not None and proc.stdout is not None
    assert "ready" in proc.stdout.readline()
    watcher = None
    if watched:
        watcher = subprocess.Popen(TFNATIVE + ["attach", "--pid", str(proc.pid)], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        assert watcher.stderr is not None
        for line in watcher.stderr:
            if "attached to" in line:
                break
    proc.stdin.write("go\n")
    proc.stdin.flush()
    took = float(proc.stdout.readline().split()[1])
    proc.wait()
    if watcher is not None:
        watcher.wait(60)
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--gdb-runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--skip-loop", action="store_true", help="only (a)")
    ap.add_argument("--skip-armed", action="store_true", help="only (b)")
    ap.add_argument("--out")
    args = ap.parse_args()
    rows: List[str] = []
    if not args.skip_armed:
        armed = bench_armed(args.runs, args.gdb_runs)
        rows += ["| command | time to armed, median (runs) |", "|---|---|"]
        for name, label in (("tfnative", "tfnative attach --pid PID --break TF_NewSession"),
                            ("gdb", "gdb -p PID -ex 'break TF_NewSession'")):
            rows.append("| %s | %.2f s (%s) |" % (label, statistics.median(armed[name]),
                                                   ", ".join("%.2f" % t for t in armed[name])))
        rows.append("")
        rows.append("ratio: %.3f" % (statistics.median(armed["tfnative"]) / statistics.median(armed["gdb"])))
    if not args.skip_loop:
        plain, watched = [], []
        for _ in range(args.runs):  # interleaved: the machine's load drifts
            plain.append(train_time(False, args.steps))
            watched.append(train_time(True, args.steps))
        rows += ["| training loop (%d steps) | median (runs) |" % args.steps, "|---|---|"]
        for label, times in (("unwatched", plain), ("watched by tfnative attach --pid", watched)):
            rows.append("| %s | %.3f s (%s) |" % (label, statistics.median(times),
                                                  ", ".join("%.3f" % t for t in times)))
        rows.append("")
        rows.append("slowdown: %+.1f %%" % (100 * (statistics.median(watched) / statistics.median(plain) - 1)))
    publish(rows, args.out)


if __name__ == "__main__":
    main()
