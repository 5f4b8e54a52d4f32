"""What watching costs a training loop: ``tfnative watch`` beside no watcher and py-spy at the same rate.

    .venv/bin/python bench/bench_watch.py [--job tf|torch] [--runs 5] [--steps 1500] [--threads 1000]
                                          [--run-seconds S] [--max-seconds T] [--out bench/results/watch.md]

The job (``--job``) is ``bench/scripts/train_loop.py`` (``tf``: a tf.function step: matmul, loss, gradient,
update) or ``bench/scripts/train_loop_torch.py`` (``torch``, for a machine without TensorFlow: a small MLP's
forward, loss, backward and SGD step on CPU tensors, on ``--job-threads`` cores), started anew for every run:
once it says "ready" the watcher (if any) is started on its pid and given two seconds to settle, then the job
runs ``--steps`` steps and prints how long they took.  ``--run-seconds S``: ``--steps`` is first timed once
unwatched and scaled so that one run takes about S seconds (a machine whose step time is not known ahead).
One round runs every mode once, in an order that turns each round (a machine's speed drifts over minutes:
each mode goes first as often as the others), and the medians of ``--runs`` rounds are compared with the
unwatched run's:

* ``tfnative watch --pid P`` at its default interval, and at ``--interval 1``;
* ``py-spy record --nonblocking --rate 1`` (never stops the job, as watch never does between captures);
* ``py-spy record --rate 1`` (stops every thread at every sample).

A mode whose tool this machine lacks (py-spy) is skipped, and one whose watcher fails (exits before the steps
end) is dropped after its first failure; the table says which and why.  The watcher's own CPU time while the
steps ran is given beside (the part of a core it took; a watcher on another core costs the job only what it
disturbs).

First, the watcher's own peak RSS (polled every 20 ms, children included) over 15 s on a process of
``--threads`` idle Python threads (``bench/scripts/many_threads_idle.py``), beside ``py-spy record
--nonblocking --rate 1`` on the same process.  The results file is rewritten after every round
(``--max-seconds``: no round is started that would end past T seconds), so a run cut short keeps what it
measured.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from typing import Callable, Dict, List, Optional, Tuple, Union

import psutil
from benchutil import machine, publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
BIN = os.path.dirname(PY)
SETTLE_S = 2.0
RSS_S = 15.0
JOBS = {"tf": "train_loop.py", "torch": "train_loop_torch.py"}


def _tool(name: str) -> Optional[str]:
    """``name``'s path: beside this Python, else on PATH; None where this machine has none."""
    local = os.path.join(BIN, name)
    return local if os.path.exists(local) else shutil.which(name)


def _tfnative(*args: str) -> Callable[[int], List[str]]:
    return lambda pid: [PY, "-m", "tfnative", "watch", "--pid", str(pid), *args]


def _pyspy(*args: str) -> Callable[[int], List[str]]:
    return lambda pid: [_tool("py-spy") or "py-spy", "record", *args, "--rate", "1", "--pid", str(pid),
                        "-o", os.devnull, "-f", "raw"]


MODES: Dict[str, Optional[Callable[[int], List[str]]]] = {
    "unwatched": None,
    "tfnative watch (default interval)": _tfnative(),
    "tfnative watch --interval 1": _tfnative("--interval", "1"),
    "py-spy record --nonblocking --rate 1": _pyspy("--nonblocking"),
    "py-spy record --rate 1": _pyspy(),
}
TOOLS = {name: "py-spy" for name in MODES if name.startswith("py-spy")}


class ModeFailed(Exception):
    """A watcher that ended before the steps did: its exit status and last line on stderr."""


def _stop(proc: Optional[Union[subprocess.Popen[bytes], psutil.Popen]]) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and its children so far; 0 once it is gone."""
    try:
        proc = psutil.Process(pid)
        total = 0.0
        for p in [proc] + proc.children(recursive=True):
            t = p.cpu_times()
            total += t.user + t.system
        return total
    except psutil.Error:
        return 0.0


def _last_line(path: str) -> str:
    with open(path, errors="replace") as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    return lines[-1][:200] if lines else "(nothing on stderr)"


def one_run(job: List[str], mode: str, steps: int) -> Tuple[float, float]:
    """The seconds ``steps`` steps of the loop took with ``mode`` watching it, and the watcher's CPU seconds
    over those steps."""
    with tempfile.TemporaryFile("w+") as job_err, tempfile.NamedTemporaryFile("w+") as watcher_err:
        proc = subprocess.Popen(job[:1] + job[1:2] + [str(steps)] + job[2:], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=job_err, text=True,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        watcher: Optional[subprocess.Popen[bytes]] = None
        try:
            assert proc.stdin is not None and proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                proc.wait(timeout=30)
                job_err.seek(0)
                raise SystemExit("bench_watch: the training loop did not start (exit %s): %s"
                                 % (proc.returncode, job_err.read()[-2000:]))
            argv = MODES[mode]
            if argv is not None:
                watcher = subprocess.Popen(argv(proc.pid), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=watcher_err, cwd=ROOT, start_new_session=True)
            time.sleep(SETTLE_S)
            if watcher is not None and watcher.poll() is not None:
                raise ModeFailed("exit %s before the steps: %s" % (watcher.returncode, _last_line(watcher_err.name)))
            cpu0 = _cpu(watcher.pid) if watcher is not None else 0.0
            proc.stdin.write("go\n")
            proc.stdin.flush()
            line = proc.stdout.readline().split()
            if line[:1] != ["took"]:
                raise SystemExit("bench_watch: the training loop said %r" % line)
            cpu = _cpu(watcher.pid) - cpu0 if watcher is not None else 0.0
            if watcher is not None and watcher.poll() is not None:
                raise ModeFailed("exit %s during the steps: %s" % (watcher.returncode, _last_line(watcher_err.name)))
            return float(line[1]), cpu
        finally:
            _stop(watcher)
            proc.kill()
            proc.wait()


def watcher_rss(argv: List[str], seconds: float) -> Tuple[float, str]:
    """Peak RSS (MB, children included) of ``argv`` over ``seconds``, and a note if it ended before."""
    with tempfile.NamedTemporaryFile("w+") as err:
        proc = psutil.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
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
            note = "" if proc.poll() is None else " (ended early, exit %s: %s)" % (proc.returncode,
                                                                                   _last_line(err.name))
        finally:
            _stop(proc)
    return peak / 1e6, note


def rss_table(threads: int, modes: List[str]) -> List[str]:
    """The RSS rows: tfnative watch and (where this machine has it) py-spy on ``threads`` idle threads."""
    tmp = tempfile.mkdtemp(prefix="tfnative-bench-watch-")
    ready, gaps = os.path.join(tmp, "ready"), os.path.join(tmp, "gaps")
    target = subprocess.Popen([PY, os.path.join(ROOT, "bench", "scripts", "many_threads_idle.py"), ready, gaps,
                               str(threads)])
    rows = []
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.1)
        spy = "py-spy record --nonblocking --rate 1"
        for name, argv in (("tfnative watch --pid P", _tfnative()), (spy, MODES[spy])):
            if name == spy and spy not in modes:
                rows.append("| %s | skipped: py-spy not found on this machine |" % name)
                continue
            assert argv is not None
            mb, note = watcher_rss(argv(target.pid), RSS_S)
            rows.append("| %s | %.0f MB%s |" % (name, mb, note))
            print("rss: %s %.0f MB%s" % (name, mb, note), file=sys.stderr)
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return ["Watcher's peak RSS on a process of %d idle Python threads, %.0f s:" % (threads, RSS_S), "",
            "| watcher | peak RSS |", "|---|---|"] + rows


def _version(*dists: str) -> str:
    for dist in dists:
        try:
            return "%s %s" % (dist, metadata.version(dist))
        except metadata.PackageNotFoundError:
            continue
    return dists[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--job", choices=sorted(JOBS), default="tf", help="the training loop: TensorFlow or PyTorch")
    ap.add_argument("--job-threads", type=int, default=max(1, min(4, (os.cpu_count() or 1) // 4)),
                    help="torch's intra-op threads in the torch job (default: a quarter of the CPUs, 1 to 4)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--run-seconds", type=float, help="scale --steps (timed once, unwatched) to runs of S seconds")
    ap.add_argument("--max-seconds", type=float, help="start no round that would end past T seconds")
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "watch.md"))
    args = ap.parse_args()
    began = time.monotonic()
    script = JOBS[args.job]
    job = [PY, os.path.join(ROOT, "bench", "scripts", script)]
    if args.job == "torch":
        job.append(str(args.job_threads))
    names = list(MODES)
    missing = {name: TOOLS[name] for name in names if name in TOOLS and _tool(TOOLS[name]) is None}
    failed: Dict[str, str] = {}
    active = [name for name in names if name not in missing]
    rss = rss_table(args.threads, active)
    steps = args.steps
    if args.run_seconds:
        took0, _ = one_run(job, "unwatched", steps)
        steps = max(steps, int(round(args.run_seconds * steps / took0)))
        print("calibration: %d steps took %.3f s: %d steps a run" % (args.steps, took0, steps), file=sys.stderr)
    took: Dict[str, List[float]] = {name: [] for name in names}
    cpu: Dict[str, List[float]] = {name: [] for name in names}
    rounds, last_round = 0, 0.0
    for r in range(args.runs):
        if args.max_seconds and time.monotonic() - began + last_round > args.max_seconds:
            print("round %d not started: --max-seconds %g" % (r + 1, args.max_seconds), file=sys.stderr)
            break
        t0 = time.monotonic()
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            if name in missing or name in failed:
                continue
            try:
                t, c = one_run(job, name, steps)
            except ModeFailed as e:
                failed[name] = str(e)
                print("round %d: %s failed: %s" % (r + 1, name, e), file=sys.stderr)
                continue
            took[name].append(t)
            cpu[name].append(c)
            print("round %d: %s %.3f s (watcher CPU %.3f s)" % (r + 1, name, t, c), file=sys.stderr)
        rounds, last_round = r + 1, time.monotonic() - t0
        lines = _table(names, took, cpu, missing, failed) + [""] + rss + [""] + _footnote(args, script, steps, rounds)
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    publish(_table(names, took, cpu, missing, failed) + [""] + rss + [""] + _footnote(args, script, steps, rounds),
            args.out)


def _table(names: List[str], took: Dict[str, List[float]], cpu: Dict[str, List[float]], missing: Dict[str, str],
           failed: Dict[str, str]) -> List[str]:
    base = statistics.median(took["unwatched"]) if took["unwatched"] else 0.0
    lines = ["| mode | steps took (median) [min-max] | vs unwatched | watcher's CPU over the steps (median) |",
             "|---|---|---|---|"]
    for name in names:
        if name in missing:
            lines.append("| %s | skipped: %s not found on this machine | | |" % (name, missing[name]))
            continue
        if name in failed:
            lines.append("| %s | failed: %s | | |" % (name, failed[name].replace("|", "\\|")))
            continue
        if not took[name]:
            continue
        med = statistics.median(took[name])
        share = "" if name == "unwatched" else "%.3f s (%.1f%% of a core)" % (
            statistics.median(cpu[name]), 100 * statistics.median(c / t for c, t in zip(cpu[name], took[name])))
        lines.append("| %s | %.3f s [%.3f-%.3f] | %+.1f%% | %s |" % (
            name, med, min(took[name]), max(took[name]), (med / base - 1) * 100 if base else 0.0, share))
    return lines


def _footnote(args: argparse.Namespace, script: str, steps: int, rounds: int) -> List[str]:
    if args.job == "torch":
        job = "%s, %d intra-op threads" % (_version("torch"), args.job_threads)
    else:
        job = _version("tensorflow-cpu", "tensorflow")
    command = "bench/bench_watch.py --job %s --runs %d --steps %d --threads %d" % (args.job, args.runs, args.steps,
                                                                                   args.threads)
    if args.run_seconds:
        command += " --run-seconds %g" % args.run_seconds
    if args.max_seconds:
        command += " --max-seconds %g" % args.max_seconds
    return ["%d steps of bench/scripts/%s (%s), %d of %d interleaved rounds; %s." % (
        steps, script, job, rounds, args.runs, machine()), "Command: `python %s`" % command]


if __name__ == "__main__":
    main()
