"""tfnative vs the manual gdb recipe and the Python profilers, side by side, in one run.

    .venv/bin/python bench/bench_speed.py [--runs N] [--quick] [--only a,b,c,d] [--out bench/results/speed.md]

(a) attach overhead: wall of ``tfnative attach --break TF_NewSession examples/open_session.py``
    minus ``python examples/open_session.py``, vs the manual recipe: the script imports TF and
    waits on stdin, ``gdb -p PID -batch -ex 'break TF_NewSession' -ex continue -ex bt -ex py-bt``
    (python-gdb.py allowed with ``-iex 'add-auto-load-safe-path FILE'``; gdb on a pty; an
    ``echo @@ARMED`` before ``continue`` tells the bench to send the script its line), minus the
    same script run with its line given at once.
(b) ``tfnative stack --pid`` vs ``pystack remote --native`` vs ``py-spy dump --native`` on a hung
    TF process (tf.function blocked in a tf.py_function that sleeps).
(e) the fast path's pieces: ElfIndex of libtensorflow_cc.so.2 built (empty cache) and loaded
    (cached), and its surrogate built, in a temporary cache directory.
(c) peak RSS of gdb: tfnative's gdb child vs the manual gdb, from VmHWM in /proc/PID/status
    (a high-water mark, polled every 50 ms with psutil finding the gdb process; the last
    sample before gdb exits is the peak), psutil's RSS max as a cross-check.
(d) hit-to-report: for tfnative, from its ``--gdb-log`` (a tail thread timestamps each line as it is
    flushed; the log's own timestamps win when it has them): from ``*stopped,reason="breakpoint-hit"``
    to the first MI command after the answer of ``-tfnative-capture`` (the report is printed then).
    For the manual recipe: from gdb's "Breakpoint 1, " line to an ``echo @@END`` after the last
    backtrace command.  Once for the stopped thread, once for all threads of a process with 24
    extra Python threads (``--all-threads`` vs ``thread apply all bt`` + ``thread apply all py-bt``).

Medians of --runs runs (default 5; --quick: 1).  Everything runs one after another (one TF + gdb
at a time).  The numbers measure whatever tfnative does now, honestly; nothing is tuned here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pty
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "bench", "scripts")
PY = sys.executable
BIN = os.path.dirname(PY)
TFNATIVE = [os.path.join(BIN, "tfnative")] if os.path.exists(os.path.join(BIN, "tfnative")) else [PY, "-m", "tfnative"]
OPEN_SESSION = os.path.join(ROOT, "examples", "open_session.py")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")


def python_gdb_py() -> Optional[str]:
    real = os.path.realpath(PY)
    cand = real + "-gdb.py"
    if os.path.exists(cand):
        return cand
    m = re.match(r"(.*python3\.\d+)", real)
    if m and os.path.exists(m.group(1) + "-gdb.py"):
        return m.group(1) + "-gdb.py"
    return None


# ----------------------------------------------------------------------------------------------------
# sampling


class Sampler(threading.Thread):
    """Polls a process tree: gdb's VmHWM/RSS, the tree's RSS, the target's thread count."""

    def __init__(self, root_pid: int, target_name: str = "python", interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.root_pid = root_pid
        self.interval = interval
        self.target_name = target_name
        self.gdb_hwm_kb = 0
        self.gdb_rss_max = 0
        self.tree_rss_max = 0
        self.target_threads = 0
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.root_pid)
        except psutil.NoSuchProcess:
            return
        while not self._halt.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            total = 0
            for p in procs:
                try:
                    name = p.name()
                    rss = p.memory_info().rss
                    total += rss
                    if name == "gdb":
                        self.gdb_rss_max = max(self.gdb_rss_max, rss)
                        with open(f"/proc/{p.pid}/status") as f:
                            for line in f:
                                if line.startswith("VmHWM:"):
                                    self.gdb_hwm_kb = max(self.gdb_hwm_kb, int(line.split()[1]))
                    elif name.startswith("python") and p.pid != self.root_pid:
                        self.target_threads = max(self.target_threads, p.num_threads())
                except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
                    continue
            self.tree_rss_max = max(self.tree_rss_max, total)
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(2)


class LogTail(threading.Thread):
    """Timestamps each line appended to a file (gdb's MI log) as it appears."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.lines: List[tuple] = []
        self._halt = threading.Event()

    def run(self) -> None:
        pos = 0
        buf = b""
        while True:
            stopping = self._halt.is_set()
            try:
                with open(self.path, "rb") as f:
                    f.seek(pos)
                    chunk = f.read()
            except OSError:
                chunk = b""
            if chunk:
                now = time.monotonic()
                pos += len(chunk)
                buf += chunk
                *done, buf = buf.split(b"\n")
                for ln in done:
                    self.lines.append((now, ln.decode("utf-8", "replace")))
            if stopping:
                break
            time.sleep(0.01)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


_STAMP = re.compile(r"^(\d+\.\d+) (.*)$")


def hit_to_report(lines: List[tuple]) -> Optional[float]:
    """Seconds from the first breakpoint-hit stop to the report being printed.

    The end is the first command tfnative sends after the answer of the
    ``-tfnative-registers`` (or ``-tfnative-capture``) that follows the stop:
    tfnative unwinds, names the frames and prints the report in between.  Lines carry our tail thread's timestamps;
    when the log has its own (a leading monotonic "SECONDS "), those are used.
    """
    t_hit = None
    token = None
    answered = False
    for t, ln in lines:
        m = _STAMP.match(ln)
        if m:
            t, ln = float(m.group(1)), m.group(2)
        if t_hit is None:
            if ln.startswith("<- *stopped") and 'reason="breakpoint-hit"' in ln:
                t_hit = t
            continue
        if token is None:
            # -tfnative-registers: tfnative unwinds itself; -tfnative-capture: gdb does
            m = re.match(r"-> (\d+)-tfnative-(?:registers|capture)", ln)
            if m:
                token = m.group(1)
            continue
        if not answered:
            answered = ln.startswith("<- " + token + "^")
            continue
        if ln.startswith("-> "):
            return t - t_hit
    return None


# ----------------------------------------------------------------------------------------------------
# one measured run


@dataclass
class Run:
    wall: float
    rc: int
    gdb_hwm_mb: float = 0.0
    gdb_rss_mb: float = 0.0
    tree_rss_mb: float = 0.0
    target_threads: int = 0
    hit_to_report: Optional[float] = None
    ok: bool = True
    note: str = ""
    out: str = field(default="", repr=False)


def kill_tree(proc: subprocess.Popen) -> None:
    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        kids = []
    for p in [*kids]:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    psutil.wait_procs(kids, timeout=5)


def run_cmd(cmd: List[str], timeout: float = 600, log_path: Optional[str] = None, stdin: Optional[str] = None) -> Run:
    tail = LogTail(log_path) if log_path else None
    if tail:
        tail.start()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=ENV,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL)
    sampler = Sampler(proc.pid)
    sampler.start()
    try:
        out, _ = proc.communicate(input=stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        out = "timeout"
    finally:
        if proc.poll() is None:
            kill_tree(proc)
    wall = time.monotonic() - t0
    sampler.stop()
    r = Run(wall, proc.returncode, sampler.gdb_hwm_kb / 1024, sampler.gdb_rss_max / 2**20,
            sampler.tree_rss_max / 2**20, sampler.target_threads, out=out)
    if tail:
        tail.stop()
        r.hit_to_report = hit_to_report(tail.lines)
    return r


def manual_recipe(script_args: List[str], gdb_cmds: List[str], timeout: float = 600) -> Run:
    """The script waits on stdin; gdb attaches, arms, continues; the script is released once the breakpoint is set."""
    t0 = time.monotonic()
    script = subprocess.Popen([PY, *script_args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    gdb = None
    try:
        assert script.stdout is not None and script.stdin is not None
        seen = []
        while True:
            line = script.stdout.readline()
            if not line or line.strip() == "waiting":
                break
            seen.append(line)
        if line.strip() != "waiting":
            raise RuntimeError("script did not start: %r" % "".join(seen[-5:]))
        pygdb = python_gdb_py()
        cmd = ["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled off", "-iex", "set style enabled off"]
        if pygdb:
            cmd += ["-iex", "add-auto-load-safe-path " + pygdb]
        cmd += ["-p", str(script.pid)]
        for c in gdb_cmds:
            cmd += ["-ex", c]
        # gdb block-buffers a pipe: give it a terminal, as a person running the recipe would.
        master, slave = pty.openpty()
        gdb = subprocess.Popen(cmd, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, cwd=ROOT,
                               start_new_session=True)
        os.close(slave)
        sampler = Sampler(gdb.pid)
        sampler.start()
        lines: List[tuple] = []
        deadline = time.monotonic() + timeout
        released = False
        buf = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if gdb.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: gdb closed the terminal
                break
            if not chunk:
                break
            now = time.monotonic()
            buf += chunk
            *done, buf = buf.split(b"\n")
            for raw in done:
                ln = raw.decode("utf-8", "replace").rstrip("\r")
                lines.append((now, ln))
                if os.environ.get("BENCH_DEBUG"):
                    print("    gdb| " + ln, flush=True)
                # gdb -batch does not say "Continuing." (from_tty is 0): release on our marker;
                # the line waits in the pipe until gdb has resumed the script.
                if not released and ln.strip() == "@@ARMED":
                    script.stdin.write("\n")
                    script.stdin.flush()
                    released = True
        os.close(master)
        gdb.wait(timeout=max(1, deadline - time.monotonic()))
        sampler.stop()
        rest, _ = script.communicate(timeout=max(1, deadline - time.monotonic()))
        wall = time.monotonic() - t0
        t_hit = next((t for t, ln in lines if re.match(r"(Thread \d+ .* hit )?Breakpoint 1, ", ln)), None)
        t_end = next((t for t, ln in lines if ln.strip() == "@@END"), None)
        text = "\n".join(ln for _, ln in lines)
        r = Run(wall, script.returncode, sampler.gdb_hwm_kb / 1024, sampler.gdb_rss_max / 2**20,
                sampler.gdb_rss_max / 2**20, sampler.target_threads, out=text + "\n" + rest)
        r.hit_to_report = (t_end - t_hit) if (t_hit is not None and t_end is not None) else None
        r.ok = released and t_hit is not None
        try:
            r.target_threads = len(set(re.findall(r"^Thread (\d+) \(", text, re.M))) or r.target_threads
        except ValueError:
            pass
        return r
    finally:
        for p in (gdb, script):
            if p is not None and p.poll() is None:
                kill_tree(p)


# ----------------------------------------------------------------------------------------------------
# the sections


def med(xs: List[Optional[float]]) -> Optional[float]:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x: Optional[float], unit: str = "s", digits: int = 2) -> str:
    if x is None:
        return "n/a"
    return f"{x:.{digits}f} {unit}".strip()


def spread(xs: List[Optional[float]], unit: str = "s") -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    return f"{min(xs):.2f}-{max(xs):.2f} {unit}"


def ratio(a: Optional[float], b: Optional[float]) -> str:
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}x"


def _report(label: str, i: int, r: Run) -> None:
    flag = "" if r.ok and r.rc == 0 else f" (rc={r.rc}{', ' + r.note if r.note else ''})"
    print(f"  {label} #{i + 1}: {r.wall:.2f} s, gdb peak {r.gdb_hwm_mb:.0f} MB"
          + (f", hit-to-report {r.hit_to_report:.2f} s" if r.hit_to_report is not None else "")
          + (f", threads {r.target_threads}" if r.target_threads else "") + flag, flush=True)
    if not (r.ok and r.rc == 0):
        print("    output tail: " + r.out[-800:].replace("\n", "\n    "), flush=True)


def interleave(n: int, runs: Dict[str, Callable[[], Run]]) -> Dict[str, List[Run]]:
    """``n`` rounds of one run of each: the machine's drift (this one's speed moves by 20 %
    over minutes) then weighs on every column alike, where ``n`` runs of one after ``n``
    of the other would put it all into their difference."""
    out: Dict[str, List[Run]] = {label: [] for label in runs}
    for i in range(n):
        for label, fn in runs.items():
            r = fn()
            _report(label, i, r)
            out[label].append(r)
    return out


def tfnative_attach(script: List[str], tmp: str, extra: List[str]) -> Run:
    log = os.path.join(tmp, "mi-%d.log" % time.monotonic_ns())
    r = run_cmd(TFNATIVE + ["attach", "--break", "TF_NewSession", "--gdb-log", log, *extra, *script], log_path=log)
    r.ok = r.rc == 0 and "TF_NewSession" in r.out
    if not r.ok:
        r.note = "no TF_NewSession frame in the report"
    try:
        os.unlink(log)
    except OSError:
        pass
    return r


def section_a(n: int, tmp: str, res: Dict) -> None:
    print("(a) attach overhead, (c) gdb peak RSS, (d) hit-to-report for the stopped thread", flush=True)
    runs = interleave(n, {
        "python open_session.py": lambda: run_cmd([PY, OPEN_SESSION]),
        "python open_session_stdin.py (line given at once)":
            lambda: run_cmd([PY, os.path.join(SCRIPTS, "open_session_stdin.py")], stdin="\n"),
        "tfnative attach": lambda: tfnative_attach([OPEN_SESSION], tmp, []),
        "manual gdb recipe": lambda: manual_recipe(
            [os.path.join(SCRIPTS, "open_session_stdin.py")],
            ["break TF_NewSession", "echo @@ARMED\\n", "continue", "bt", "py-bt", "echo @@END\\n"]),
    })
    res["a"] = {"base": runs["python open_session.py"],
                "base_wait": runs["python open_session_stdin.py (line given at once)"],
                "tfnative": runs["tfnative attach"], "manual": runs["manual gdb recipe"]}


def section_b(n: int, tmp: str, res: Dict) -> None:
    print("(b) snapshot of a hung TF process", flush=True)
    target = subprocess.Popen([PY, os.path.join(SCRIPTS, "tf_hang.py")], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, cwd=ROOT, env=ENV)
    try:
        assert target.stdout is not None
        if target.stdout.readline().strip() != "ready":
            raise RuntimeError("tf_hang.py did not start")
        time.sleep(1.0)
        pid = str(target.pid)
        threads = psutil.Process(target.pid).num_threads()
        tools = {
            "tfnative stack --pid": TFNATIVE + ["stack", "--pid", pid],
            "tfnative stack --pid --with-gdb": TFNATIVE + ["stack", "--pid", pid, "--with-gdb"],
            "pystack remote --native": [os.path.join(BIN, "pystack"), "remote", "--native", pid],
            "py-spy dump --native": [os.path.join(BIN, "py-spy"), "dump", "--native", "--pid", pid],
        }
        todo: Dict[str, Callable[[], Run]] = {}
        for label, cmd in tools.items():
            if not os.path.exists(cmd[0]) and shutil.which(cmd[0]) is None:
                print(f"  {label}: not installed", flush=True)
                continue

            def one(cmd: List[str] = cmd) -> Run:
                r = run_cmd(cmd)
                r.ok = r.rc == 0 and ("TFE_Execute" in r.out or "slow" in r.out)
                if not r.ok:
                    r.note = "no TFE_Execute / slow frame in the output"
                if target.poll() is not None:
                    r.ok, r.note = False, "the target died"
                return r

            todo[label] = one
        res["b"] = {"tools": interleave(n, todo), "threads": threads}
    finally:
        target.kill()
        target.wait()


def section_d(n: int, tmp: str, res: Dict) -> None:
    print("(d) hit-to-report, all threads of a process with 24 extra Python threads", flush=True)
    script = os.path.join(SCRIPTS, "many_threads_session.py")
    runs = interleave(n, {
        "tfnative attach --all-threads": lambda: tfnative_attach([script], tmp, ["--all-threads"]),
        "manual: thread apply all bt + py-bt": lambda: manual_recipe(
            [script, "wait"], ["break TF_NewSession", "echo @@ARMED\\n", "continue", "thread apply all bt",
                               "thread apply all py-bt", "echo @@END\\n"]),
    })
    res["d"] = {"tfnative": runs["tfnative attach --all-threads"],
                "manual": runs["manual: thread apply all bt + py-bt"]}


def section_e(n: int, tmp: str, res: Dict) -> None:
    print("(e) ElfIndex and surrogate of libtensorflow_cc.so.2", flush=True)
    code = """
import json, os, sys, time
sys.path.insert(0, %r)
from tfnative.core.binary.symindex import ElfIndex
from tfnative.gdb.surrogate import build_surrogate
import tensorflow
lib = os.path.join(os.path.dirname(tensorflow.__file__), "libtensorflow_cc.so.2")
t0 = time.perf_counter(); idx = ElfIndex.open(lib); t1 = time.perf_counter()
assert not idx.from_cache
syms = idx.find("TF_NewSession"); t2 = time.perf_counter()
path = build_surrogate(lib); t3 = time.perf_counter()
idx.close()
t4 = time.perf_counter(); again = ElfIndex.open(lib); t5 = time.perf_counter()
assert again.from_cache
again.find("TF_NewSession"); t6 = time.perf_counter()
print(json.dumps({"build": t1 - t0, "find": t2 - t1, "surrogate": t3 - t2, "load": t5 - t4, "find_cached": t6 - t5,
                  "symbols": len(again), "surrogate_bytes": os.path.getsize(path)}))
""" % ROOT
    rows = []
    for i in range(n):
        cache = os.path.join(tmp, "cache-%d" % i)
        env = dict(ENV, TFNATIVE_CACHE_DIR=cache)
        out = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        shutil.rmtree(cache, ignore_errors=True)
        if out.returncode != 0:
            print("  failed: " + out.stderr[-500:], flush=True)
            continue
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print("  #%d: build %.2f s, cached load %.3f s, surrogate %.2f s" % (i + 1, row["build"], row["load"],
                                                                           row["surrogate"]), flush=True)
        rows.append(row)
    res["e"] = rows


# ----------------------------------------------------------------------------------------------------
# report


def markdown(res: Dict, n: int, args: argparse.Namespace) -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "tfnative", "gdb_scripts"],
                           capture_output=True, text=True, cwd=ROOT).stdout.strip()
    gdbv = subprocess.run(["gdb", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    lines = [
        "# tfnative speed: side by side",
        "",
        f"`{' '.join(['bench/bench_speed.py', *sys.argv[1:]])}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"commit {head.strip()}{' (tfnative/ or gdb_scripts/ modified in the work tree)' if dirty else ''}; "
        f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, {gdbv}, "
        f"Python {platform.python_version()}.  Medians of {n} run(s) (min-max in brackets).",
        "",
    ]
    if "a" in res:
        a = res["a"]
        b0 = med([r.wall for r in a["base"]])
        b1 = med([r.wall for r in a["base_wait"]])
        t = med([r.wall for r in a["tfnative"]])
        m = med([r.wall for r in a["manual"]])
        ot = (t - b0) if t is not None and b0 is not None else None
        om = (m - b1) if m is not None and b1 is not None else None
        lines += [
            "## (a) attach overhead: break at TF_NewSession, report the stack",
            "",
            "| | wall | plain run | overhead | vs manual |",
            "|---|---|---|---|---|",
            f"| tfnative attach --break TF_NewSession open_session.py | {fmt(t)} "
            f"[{spread([r.wall for r in a['tfnative']])}] | {fmt(b0)} | **{fmt(ot)}** | {ratio(ot, om)} |",
            f"| manual: gdb -p + break + continue + bt + py-bt | {fmt(m)} "
            f"[{spread([r.wall for r in a['manual']])}] | {fmt(b1)} | **{fmt(om)}** | 1.00x |",
            "",
            "Plain run: the same script without a debugger (for the manual recipe: the stdin variant, "
            "its line given at once).",
            "",
            "## (c) peak RSS of gdb",
            "",
            "| | gdb VmHWM | gdb RSS max (psutil) | vs manual |",
            "|---|---|---|---|",
        ]
        ht = med([r.gdb_hwm_mb for r in a["tfnative"]])
        hm = med([r.gdb_hwm_mb for r in a["manual"]])
        lines += [
            f"| tfnative attach (its gdb child) | **{fmt(ht, 'MB', 0)}** | "
            f"{fmt(med([r.gdb_rss_mb for r in a['tfnative']]), 'MB', 0)} | {ratio(ht, hm)} |",
            f"| manual gdb -p | **{fmt(hm, 'MB', 0)}** | {fmt(med([r.gdb_rss_mb for r in a['manual']]), 'MB', 0)} "
            "| 1.00x |",
        ]
        via_gdb = "tfnative stack --pid --with-gdb"
        if "b" in res and via_gdb in res["b"]["tools"]:
            hs = med([r.gdb_hwm_mb for r in res["b"]["tools"][via_gdb]])
            lines.append(f"| {via_gdb} (its gdb child) | **{fmt(hs, 'MB', 0)}** | "
                         f"{fmt(med([r.gdb_rss_mb for r in res['b']['tools'][via_gdb]]), 'MB', 0)} "
                         f"| {ratio(hs, hm)} |")
        lines += ["", "`tfnative stack --pid` starts no gdb (see (b) for its whole peak RSS).", ""]
    if "b" in res:
        tools = res["b"]["tools"]
        lines += [
            f"## (b) snapshot of a hung TF process ({res['b']['threads']} threads; tf.function blocked in a "
            "tf.py_function)",
            "",
            "| tool | wall | peak RSS (whole tool) | vs tfnative | found the TF frame |",
            "|---|---|---|---|---|",
        ]
        ref = med([r.wall for r in tools.get("tfnative stack --pid", [])])
        for label, runs in tools.items():
            w = med([r.wall for r in runs])
            oks = sum(r.ok for r in runs)
            lines.append(f"| `{label}` | **{fmt(w)}** [{spread([r.wall for r in runs])}] | "
                         f"{fmt(med([r.tree_rss_mb for r in runs]), 'MB', 0)} | {ratio(w, ref)} | {oks}/{len(runs)} |")
        lines.append("")
    if "a" in res or "d" in res:
        lines += [
            "## (d) hit-to-report",
            "",
            "tfnative: in its `--gdb-log` (timestamped lines), from `*stopped,reason=\"breakpoint-hit\"` to the "
            "first MI command after the answer of `-tfnative-registers` (or `-tfnative-capture` when gdb captures: "
            "frames unwound, named and report printed by then).  "
            "Manual: from gdb's `Breakpoint 1, ` line to `echo @@END` after the last backtrace command (gdb on "
            "a pty, lines timestamped as they arrive).",
            "",
            "| | threads | tfnative | manual gdb | vs manual |",
            "|---|---|---|---|---|",
        ]
        if "a" in res:
            t = med([r.hit_to_report for r in res["a"]["tfnative"]])
            m = med([r.hit_to_report for r in res["a"]["manual"]])
            lines.append(f"| stopped thread (bt + py-bt) | 1 | **{fmt(t)}** | **{fmt(m)}** | {ratio(t, m)} |")
        if "d" in res:
            t = med([r.hit_to_report for r in res["d"]["tfnative"]])
            m = med([r.hit_to_report for r in res["d"]["manual"]])
            nthreads = max([r.target_threads for r in res["d"]["tfnative"] + res["d"]["manual"]] or [0])
            lines.append(f"| all threads (`--all-threads` vs `thread apply all bt` + `thread apply all py-bt`) | "
                         f"{nthreads} | **{fmt(t)}** | **{fmt(m)}** | {ratio(t, m)} |")
            tw = med([r.wall for r in res["d"]["tfnative"]])
            mw = med([r.wall for r in res["d"]["manual"]])
            lines += ["", f"Whole runs of the all-threads case: tfnative {fmt(tw)}, manual {fmt(mw)}."]
        lines.append("")
    if res.get("e"):
        e = res["e"]
        lines += [
            "## (e) the fast path's pieces on libtensorflow_cc.so.2 (file already in the page cache)",
            "",
            f"{e[0]['symbols']} function symbols; surrogate {e[0]['surrogate_bytes'] / 2**20:.1f} MB.",
            "",
            "| ElfIndex build (empty cache) | cached load | find TF_NewSession (fresh / cached) | surrogate build |",
            "|---|---|---|---|",
            f"| **{fmt(med([r['build'] for r in e]))}** | **{fmt(med([r['load'] for r in e]), 's', 3)}** | "
            f"{fmt(med([r['find'] for r in e]), 's', 3)} / {fmt(med([r['find_cached'] for r in e]), 's', 3)} | "
            f"{fmt(med([r['surrogate'] for r in e]))} |",
            "",
        ]
    failures = [(sec, label, i + 1, r.note or f"rc={r.rc}") for sec, group in res.items()
                for label, runs in (group.get("tools", group).items() if isinstance(group, dict) else [])
                if isinstance(runs, list) for i, r in enumerate(runs) if not (r.ok and r.rc == 0)]
    if failures:
        lines += ["## Runs that did not do their job", ""]
        lines += [f"- ({s}) {label} #{i}: {why}" for s, label, i, why in failures]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per measurement (median reported; default 5)")
    ap.add_argument("--quick", action="store_true", help="one run of each (a smoke test, not a measurement)")
    ap.add_argument("--only", default="a,b,d,e", help="sections to run, from a,b,d,e ((c) comes with a and b)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "speed.md"))
    args = ap.parse_args()
    n = 1 if args.quick else max(1, args.runs)
    sections = {s.strip() for s in args.only.split(",")}
    res: Dict = {}
    tmp = tempfile.mkdtemp(prefix="tfnative-bench-")
    old = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    try:
        if "a" in sections:
            section_a(n, tmp, res)
        if "b" in sections:
            section_b(n, tmp, res)
        if "d" in sections:
            section_d(n, tmp, res)
        if "e" in sections:
            section_e(n, tmp, res)
    finally:
        signal.signal(signal.SIGTERM, old)
        shutil.rmtree(tmp, ignore_errors=True)
    md = markdown(res, n, args)
    print()
    print(md)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(md + "\n")
    raw = {sec: {k: [vars(r) | {"out": r.out[-2000:]} for r in v] if isinstance(v, list) else
                 {kk: [vars(r) | {"out": r.out[-2000:]} for r in vv] for kk, vv in v.items()}
                 if isinstance(v, dict) else v
                 for k, v in (group.items())} if isinstance(group, dict) else group for sec, group in res.items()}
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(raw, f, indent=1, default=str)
    print(f"\nsaved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
