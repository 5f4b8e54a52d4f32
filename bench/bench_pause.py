"""Issue #26: the pause a snapshot costs an idle process, `stack`'s wall time on a hung TF process, start-up.

    .venv/bin/python bench/bench_pause.py [--runs 7] [--baseline DIR] [--out bench/results/pause.md]

1. The pause: idle processes of 200 and 1,000 threads, plain Python and TensorFlow
   (``bench/scripts/many_threads_idle.py``; with TF, idle Python threads are added to TF's own up to
   the count).  Two heartbeat threads, the first and the last started, sleep 1 ms in a loop and log
   every gap over 5 ms: the longest gap either saw during a tool's run is how long that tool held a
   thread of the process, measured from inside.  A tool stops and lets go of the threads one after
   another: the first one stopped may wait longest, or the last one let go, so both ends are watched.
   Each round runs every tool once, in turn (this machine's speed drifts over minutes).
2. The wall time of ``stack`` on a hung TF process (``bench/scripts/tf_hang.py``).
3. Start-up: ``tfnative --version`` and ``tfnative stack --help`` against ``python -c pass``.
4. Nothing else slower (with --baseline): ``tfnative core`` of a TF core (``bench_core.make_core``) and
   ``tfnative merge --all-threads`` of 1,000 documents (copies of one all-threads snapshot of the hung
   TF process), this checkout against the baseline, interleaved.

With ``BENCH_PTRACE_FLOOR=1`` the pause rows add ``bench/scripts/ptrace_floor.py``: every thread stopped and let go
with ptrace, nothing read, the least any ptrace snapshot costs.

Tools: ``tfnative stack --pid`` of this checkout, the same of ``--baseline DIR`` where given (an older
checkout, e.g. a ``git worktree`` of an older commit), ``py-spy dump --native`` and ``pystack remote
--native``.  Each checkout is installed as a user installs it (``pip install``, not editable: an
editable install's import hook costs ~20 ms a start that users do not pay) into a venv of its own, and
runs from outside any checkout.  Medians of --runs (min-max in brackets).  The tools run with byte-code
caching on (as installed packages run), whatever PYTHONDONTWRITEBYTECODE says here.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

from benchutil import install, longest_pause, publish, shown_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
BIN = os.path.dirname(PY)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _tool(name: str) -> str:
    local = os.path.join(BIN, name)
    return local if os.path.exists(local) else (shutil.which(name) or name)


Cmd = Tuple[List[str], Optional[str]]  # argv, cwd


# tfnative as users run it: each checkout installed by pip into a venv of its own (``benchutil.install``), run
# from outside any checkout.  Set by main().
INSTALLED: Dict[str, str] = {}  # "this" / "baseline" -> that venv's python
OUTSIDE = tempfile.gettempdir()  # the directory the tools run in


def _tfnative(which: str, *argv: str) -> Cmd:
    return [INSTALLED[which], "-m", "tfnative", *argv], OUTSIDE


def _tools(baseline: Optional[str]) -> Dict[str, Callable[[int], Cmd]]:
    tools: Dict[str, Callable[[int], Cmd]] = {
        "tfnative stack --pid": lambda pid: _tfnative("this", "stack", "--pid", str(pid))}
    if baseline:
        tools["tfnative (baseline) stack --pid"] = lambda pid: _tfnative("baseline", "stack", "--pid", str(pid))
    if os.environ.get("BENCH_PTRACE_FLOOR"):
        tools["ptrace alone (nothing read)"] = lambda pid: (
            [PY, os.path.join(ROOT, "bench", "scripts", "ptrace_floor.py"), str(pid)], OUTSIDE)
    tools["py-spy dump --native"] = lambda pid: ([_tool("py-spy"), "dump", "--native", "--pid", str(pid)], None)
    tools["pystack remote --native"] = lambda pid: ([_tool("pystack"), "remote", "--native", str(pid)], None)
    return tools


def _run(cmd: Cmd) -> Tuple[float, float, int]:
    """(start, wall, exit status) of one run."""
    start = time.monotonic()
    code = subprocess.run(cmd[0], cwd=cmd[1], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          stdin=subprocess.DEVNULL).returncode
    return start, time.monotonic() - start, code


def _fmt(xs: List[float], ms: bool = False) -> str:
    if not xs:
        return "-"
    if ms:
        return "**%.0f ms** [%.0f-%.0f]" % (statistics.median(xs) * 1e3, min(xs) * 1e3, max(xs) * 1e3)
    return "**%.3f s** [%.3f-%.3f]" % (statistics.median(xs), min(xs), max(xs))


def _pause(threads: int, tf: bool, runs: int, tools: Dict[str, Callable[[int], Cmd]]) -> Dict[str, List[float]]:
    tmp = tempfile.mkdtemp(prefix="tfnative-bench-pause-")
    ready, gaps = os.path.join(tmp, "ready"), os.path.join(tmp, "gaps")
    argv = [PY, os.path.join(ROOT, "bench", "scripts", "many_threads_idle.py"), ready, gaps, str(threads)]
    target = subprocess.Popen(argv + (["tf"] if tf else []), env=dict(ENV, TMPDIR=tmp),
                              stderr=subprocess.DEVNULL)
    out: Dict[str, List[float]] = {name: [] for name in tools}
    try:
        deadline = time.monotonic() + 180
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        n = len(os.listdir("/proc/%d/task" % target.pid))
        for cmd in tools.values():  # warm-up: symbol caches, page cache
            _run(cmd(target.pid))
        for i in range(runs):
            for name, cmd in tools.items():
                start, wall, code = _run(cmd(target.pid))
                time.sleep(0.5)
                if code != 0:
                    print("%s exited %d" % (name, code), flush=True)
                    continue
                out[name].append(longest_pause(gaps, start, start + wall))
                out.setdefault(name + " last", []).append(longest_pause(gaps, start, start + wall, "last"))
                out.setdefault(name + " wall", []).append(wall)
                print("%s %d threads run %d %-32s pause %.0f ms wall %.2f s"
                      % ("TF" if tf else "Python", n, i + 1, name, out[name][-1] * 1e3, wall), flush=True)
        out["_threads"] = [float(n)]
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _hung_tf(runs: int, tools: Dict[str, Callable[[int], Cmd]], doc_path: str = "") -> Dict[str, List[float]]:
    tmp = tempfile.mkdtemp(prefix="tfnative-bench-hang-")
    target = subprocess.Popen([PY, os.path.join(ROOT, "bench", "scripts", "tf_hang.py")], stdout=subprocess.PIPE,
                              text=True, env=dict(ENV, TMPDIR=tmp))
    out: Dict[str, List[float]] = {name: [] for name in tools}
    try:
        assert target.stdout is not None
        target.stdout.readline()  # "ready"
        time.sleep(1.0)
        if doc_path:  # the document merge is measured on
            _run(([PY, "-m", "tfnative", "stack", "--pid", str(target.pid), "--all-threads", "--json", doc_path],
                  ROOT))
        for cmd in tools.values():
            _run(cmd(target.pid))
        for i in range(runs):
            for name, cmd in tools.items():
                _start, wall, code = _run(cmd(target.pid))
                if code == 0:
                    out[name].append(wall)
                print("hung TF run %d %-32s wall %.3f s (exit %d)" % (i + 1, name, wall, code), flush=True)
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _startup(runs: int, baseline: Optional[str]) -> Dict[str, List[float]]:
    cases: Dict[str, Cmd] = {"python -c pass": ([INSTALLED["this"], "-c", "pass"], OUTSIDE),
                             "tfnative --version": _tfnative("this", "--version"),
                             "tfnative stack --help": _tfnative("this", "stack", "--help")}
    if baseline:
        cases["tfnative (baseline) --version"] = _tfnative("baseline", "--version")
        cases["tfnative (baseline) stack --help"] = _tfnative("baseline", "stack", "--help")
    out: Dict[str, List[float]] = {name: [] for name in cases}
    for cmd in cases.values():
        _run(cmd)  # byte-code written
    for _ in range(runs * 3):
        for name, cmd in cases.items():
            _start, wall, _code = _run(cmd)
            out[name].append(wall)
    return out


def _others(runs: int, baseline: str, doc_path: str, tmp: str) -> Dict[str, Dict[str, List[float]]]:
    import json

    from bench_core import make_core

    with open(doc_path) as f:
        doc = json.load(f)
    docs = os.path.join(tmp, "docs1000.jsonl")
    with open(docs, "w") as f:
        for i in range(1000):
            doc["pid"], doc["task"] = 100000 + i, {"type": "worker", "index": i}
            f.write(json.dumps(doc, separators=(",", ":")) + "\n")
    core = make_core(tmp)
    cases = {"tfnative core CORE": ["core", core],
             "tfnative merge --all-threads (1,000 documents)": ["merge", "--all-threads", docs]}
    out: Dict[str, Dict[str, List[float]]] = {name: {"this": [], "baseline": []} for name in cases}
    for argv in cases.values():
        for key in ("this", "baseline"):
            _run(_tfnative(key, *argv))
    for _ in range(runs):
        for name, argv in cases.items():
            for key in ("this", "baseline"):
                _start, wall, code = _run(_tfnative(key, *argv))
                out[name][key].append(wall)
                print("%-48s %-8s %.3f s (exit %d)" % (name, key, wall, code), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--baseline", default=None, help="an older checkout to run side by side")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "pause.md"))
    ap.add_argument("--only", choices=("pause", "hung", "startup", "others"), action="append")
    args = ap.parse_args()
    venvs = tempfile.mkdtemp(prefix="tfnative-bench-venvs-")
    INSTALLED["this"] = install(ROOT, os.path.join(venvs, "this"))
    if args.baseline:
        INSTALLED["baseline"] = install(args.baseline, os.path.join(venvs, "baseline"))
    tools = _tools(args.baseline)
    only = args.only or ["pause", "hung", "startup", "others"]
    tmp = tempfile.mkdtemp(prefix="tfnative-bench-others-")
    doc_path = os.path.join(tmp, "one.json") if args.baseline and "others" in only else ""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = ["`bench/bench_pause.py --runs %d%s%s` on %s, commit %s; %d cores (shared), Python %s. "
             "Medians of %d runs (min-max in brackets)." % (
                 args.runs, " --baseline %s" % shown_path(args.baseline) if args.baseline else "",
                 "".join(" --only %s" % o for o in args.only or []),
                 time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit, os.cpu_count() or 0,
                 platform.python_version(), args.runs), ""]
    if "pause" in only:
        lines += ["Longest pause either of the target's heartbeats (its first and its last thread) saw during one "
                  "run:", "",
                  "| target | threads | " + " | ".join("`%s`" % n for n in tools) + " |",
                  "|---|---|" + "---|" * len(tools)]
        walls, lasts = [], []
        for tf, threads in ((True, 201), (False, 200), (False, 1000), (True, 1000)):
            r = _pause(threads, tf, args.runs, tools)
            what = "| %s | %d | " % ("idle TensorFlow" if tf else "idle Python", int(r.pop("_threads")[0]))
            lines.append(what + " | ".join(_fmt(r[n], ms=True) for n in tools) + " |")
            lasts.append(what + " | ".join(_fmt(r.get(n + " last", []), ms=True) for n in tools) + " |")
            walls.append(what + " | ".join(_fmt(r.get(n + " wall", [])) for n in tools) + " |")
        head = [lines[-len(walls) - 2], lines[-len(walls) - 1]]
        lines += ["", "The same runs, the last thread's heartbeat alone (the probe issue #26 was measured with: the "
                  "thread started last, stopped last):", ""] + head + lasts
        lines += ["", "Wall time of the same runs:", ""] + head + walls
        lines.append("")
    if "hung" in only or doc_path:
        r = _hung_tf(args.runs if "hung" in only else 0, tools, doc_path)
    if "hung" in only:
        lines += ["Wall time on a hung TF process (`bench/scripts/tf_hang.py`):", "",
                  "| " + " | ".join("`%s`" % n for n in tools) + " |", "|" + "---|" * len(tools),
                  "| " + " | ".join(_fmt(r[n]) for n in tools) + " |", ""]
    if "startup" in only:
        r = _startup(args.runs, args.baseline)
        lines += ["Start-up (%d runs each, interleaved):" % (args.runs * 3), "", "| command | wall |", "|---|---|"]
        lines += ["| `%s` | %s |" % (n, _fmt(xs, ms=True)) for n, xs in r.items()]
        lines.append("")
    if doc_path:
        o = _others(args.runs, args.baseline, doc_path, tmp)
        lines += ["Nothing else slower (this checkout vs the baseline, interleaved):", "",
                  "| command | this checkout | baseline |", "|---|---|---|"]
        lines += ["| `%s` | %s | %s |" % (n, _fmt(r2["this"]), _fmt(r2["baseline"])) for n, r2 in o.items()]
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(venvs, ignore_errors=True)
    publish(lines, args.out)


if __name__ == "__main__":
    main()
