"""tfnative across the TensorFlow and CPython versions of the matrix, side by side with gdb and pystack (issue #22).

    .venv/bin/python bench/bench_versions.py [--runs 3] [--quick] [--pair NAME ...] [--out bench/results/versions.md]

For each pair of ``tests/matrix/pairs.py`` that has TensorFlow and a ready venv (``~/.cache/tfnative/venvs/<pair>/``
with a ``READY`` file, or the checkout's ``.venv`` where it holds the pair), in one run, one run of each tool in turn:

(a) ``tfnative attach --break TF_NewSession examples/open_session.py`` (the pair's own ``VENV/bin/tfnative`` where
    tfnative is installed there from this checkout, as the matrix runs it; else the checkout's with
    ``--python VENV/bin/python``) vs the manual gdb recipe in its simplest form:
    ``gdb -batch -ex 'set breakpoint pending on' -ex 'break TF_NewSession' -ex run -ex bt -ex py-bt -ex continue
    --args VENV/bin/python examples/open_session.py`` (the interpreter's ``python3.X-gdb.py`` sourced when it
    ships one, as a user would).  Wall time, and gdb's peak RSS (VmHWM from /proc, polled every 50 ms), against a
    plain run of the script without a debugger.
(b) ``tfnative stack --pid`` vs ``pystack remote --native PID`` on a ``bench/scripts/tf_hang.py`` process (a
    tf.function blocked in a tf.py_function that sleeps) run by the venv's python.
(c) ``tfnative core CORE`` vs ``pystack core CORE PYTHON --native-all`` on the core of a
    ``tests/scripts/tf_pyfunc_segv.py`` process run by the venv's python in a temporary directory with RLIMIT_CORE
    raised (``core_pattern`` is ``core``: it lands there; the directory is removed afterwards).

pystack is the checkout's (``.venv/bin/pystack``); it reads any supported interpreter's memory.  Each run is also
checked for what a user looks for (the TF frame, the Python frames); a run that did not find them is said so in the
table.  Medians of --runs runs (default 3; --quick: 1), min-max in brackets.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import psutil
from bench_speed import ENV, Run, fmt, kill_tree, med, run_cmd
from benchutil import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.matrix import pairs  # noqa: E402

OPEN_SESSION = os.path.join(ROOT, "examples", "open_session.py")
TF_HANG = os.path.join(ROOT, "bench", "scripts", "tf_hang.py")
PYFUNC_SEGV = os.path.join(ROOT, "tests", "scripts", "tf_pyfunc_segv.py")
PYSTACK = os.path.join(os.path.dirname(sys.executable), "pystack")


# ----------------------------------------------------------------------------------------------------
# what a pair runs


def tfnative_cmd(venv: str) -> List[str]:
    """The tfnative a pair runs, as the matrix does: the venv's own, else the checkout's with --python."""
    own = pairs.tfnative_from(venv)
    if own:
        return [own]
    main = os.path.join(ROOT, ".venv", "bin", "tfnative")
    return [main if os.path.exists(main) else sys.executable, *([] if os.path.exists(main) else ["-m", "tfnative"])]


def python_gdb_py(python: str) -> Optional[str]:
    """The ``python3.X-gdb.py`` the interpreter ships (next to the binary, pyenv; or in its prefix's gdb
    auto-load tree, Debian), or None."""
    real = os.path.realpath(python)
    prefix = os.path.dirname(os.path.dirname(real))
    for cand in (real + "-gdb.py",
                 os.path.join(prefix, "share", "gdb", "auto-load", "usr", "bin", os.path.basename(real) + "-gdb.py")):
        if os.path.exists(cand):
            return cand
    return None


def gdb_recipe(python: str) -> List[str]:
    cmd = ["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled off", "-iex", "set style enabled off"]
    script = python_gdb_py(python)
    if script:
        cmd += ["-iex", "source " + script]
    cmd += ["-ex", "set breakpoint pending on", "-ex", "break TF_NewSession", "-ex", "run", "-ex", "bt",
            "-ex", "echo @@PYBT\\n", "-ex", "py-bt", "-ex", "echo @@END\\n", "-ex", "continue",
            "--args", python, OPEN_SESSION]
    return cmd


# ----------------------------------------------------------------------------------------------------
# one pair


@dataclass
class RecipeRun(Run):
    """A run of the gdb recipe, and whether its py-bt printed the script's Python frames."""

    pybt: bool = False


def interleave(n: int, runs: Dict[str, Callable[[], Run]]) -> Dict[str, List[Run]]:
    out: Dict[str, List[Run]] = {label: [] for label in runs}
    for i in range(n):
        for label, fn in runs.items():
            r = fn()
            flag = "" if r.ok else " (%s)" % (r.note or "rc=%s" % r.rc)
            print("    #%d %-28s %6.2f s  gdb %5.0f MB  tree %5.0f MB%s" % (
                i + 1, label, r.wall, r.gdb_hwm_mb, r.tree_rss_mb, flag), flush=True)
            out[label].append(r)
    return out


def check(r: Run, needs: Dict[str, str]) -> Run:
    """Marks what the output shows: ``needs`` maps a label to a string the output must hold."""
    missing = [label for label, s in needs.items() if s not in r.out]
    r.ok = r.rc == 0 and not missing
    if r.rc != 0:
        last = [ln for ln in r.out.strip().splitlines() if ln.strip()][-1:] or [""]
        r.note = "exit %s: %s" % (r.rc, last[0][:160])
    elif missing:
        r.note = "no " + ", no ".join(missing)
    return r


def section_a(n: int, python: str, tfn: List[str]) -> Dict[str, List[Run]]:
    print("  (a) attach --break TF_NewSession vs gdb -batch recipe", flush=True)
    extra = [] if tfn[0].startswith(os.path.dirname(python)) else ["--python", python]

    def plain() -> Run:
        return check(run_cmd([python, OPEN_SESSION], timeout=300), {"the result": "result:"})

    def tfnative() -> Run:
        return check(run_cmd(tfn + ["attach", *extra, "--break", "TF_NewSession", OPEN_SESSION], timeout=600),
                     {"TF_NewSession frame": "TF_NewSession", "make_session frame": "make_session"})

    def manual() -> Run:
        r = RecipeRun(**vars(run_cmd(gdb_recipe(python), timeout=600)))
        bt, _, rest = r.out.partition("@@PYBT")
        pybt = rest.partition("@@END")[0]
        r.ok = r.rc == 0 and "TF_NewSession" in bt
        r.note = "" if r.ok else ("exit %s" % r.rc if r.rc else "no TF_NewSession in bt")
        # py-bt: Python frames only where the interpreter has DWARF and its gdb script was found
        r.pybt = "make_session" in pybt
        return r

    return interleave(n, {"plain run": plain, "tfnative attach": tfnative, "manual gdb": manual})


def section_b(n: int, python: str, tfn: List[str]) -> Dict:
    print("  (b) stack of a hung tf.function", flush=True)
    tmp = tempfile.mkdtemp(prefix="tfnative-bench-hang-")  # TMPDIR: AutoGraph's files of the killed target
    target = subprocess.Popen([python, TF_HANG], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, text=True, cwd=ROOT, env=dict(ENV, TMPDIR=tmp))
    try:
        assert target.stdout is not None
        if target.stdout.readline().strip() != "ready":
            raise RuntimeError("tf_hang.py did not start under %s" % python)
        time.sleep(1.0)
        pid = str(target.pid)
        threads = psutil.Process(target.pid).num_threads()
        needs = {"TFE_Execute frame": "TFE_Execute", "callback `slow`": "slow"}

        def one(cmd: List[str]) -> Callable[[], Run]:
            def go() -> Run:
                r = check(run_cmd(cmd, timeout=300), needs)
                if target.poll() is not None:
                    r.ok, r.note = False, "the target died"
                return r
            return go

        runs = interleave(n, {"tfnative stack --pid": one(tfn + ["stack", "--pid", pid]),
                              "pystack remote --native": one([PYSTACK, "remote", "--native", pid])})
        return {"threads": threads, "tools": runs}
    finally:
        kill_tree(target)
        shutil.rmtree(tmp, ignore_errors=True)


def _core_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def section_c(n: int, python: str, tfn: List[str]) -> Dict:
    print("  (c) core of a tf.py_function segfault", flush=True)
    tmp = tempfile.mkdtemp(prefix="tfnative-bench-core-")
    try:
        # TMPDIR: AutoGraph's generated files, which a crash leaves behind, go with the directory
        subprocess.run([python, PYFUNC_SEGV], cwd=tmp, preexec_fn=_core_limit, capture_output=True, timeout=600,
                       env=dict(ENV, TMPDIR=tmp), stdin=subprocess.DEVNULL)
        core = os.path.join(tmp, "core")
        if not os.path.exists(core):
            raise RuntimeError("no core was written by %s" % python)
        size = os.path.getsize(core) / 2**20
        needs = {"callback `bad_callback`": "bad_callback", "PyFuncOp frame": "PyFuncOp"}

        def one(cmd: List[str]) -> Callable[[], Run]:
            def go() -> Run:
                r = check(run_cmd(cmd, timeout=300), needs)
                r.note = r.note.replace(core, "CORE")  # the temporary path means nothing in the table
                return r
            return go

        runs = interleave(n, {"tfnative core": one(tfn + ["core", core]),
                              "pystack core --native-all": one([PYSTACK, "core", core, os.path.realpath(python),
                                                                "--native-all"])})
        return {"core_mb": size, "tools": runs}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench_pair(name: str, venv: str, n: int) -> Dict:
    python = os.path.join(venv, "bin", "python")
    found = pairs.probe(python, with_tf="import")
    tfn = tfnative_cmd(venv)
    print("%s: CPython %s, TensorFlow %s, %s" % (name, found["sys_version"].split()[0], found["tensorflow"],
                                                 " ".join(tfn)), flush=True)
    res: Dict = {"pair": name, "venv": venv, "python": found["sys_version"].split()[0],
                 "tensorflow": found["tensorflow"], "tfnative": " ".join(tfn), "pygdb": python_gdb_py(python)}
    for key, fn in (("a", section_a), ("b", section_b), ("c", section_c)):
        try:
            res[key] = fn(n, python, tfn)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            print("    failed: %s" % e, flush=True)
            res[key + "_error"] = str(e)
    return res


# ----------------------------------------------------------------------------------------------------
# report


def cell(runs: List[Run], attr: str = "wall", unit: str = "s", digits: int = 2) -> str:
    xs = [getattr(r, attr) for r in runs]
    if len(xs) < 2:
        return fmt(med(xs), unit, digits)
    return "%s [%.*f-%.*f %s]" % (fmt(med(xs), unit, digits), digits, min(xs), digits, max(xs), unit)


def found(runs: List[Run]) -> str:
    oks = sum(r.ok for r in runs)
    notes = sorted({r.note for r in runs if not r.ok and r.note})
    return "%d/%d%s" % (oks, len(runs), (": " + "; ".join(notes)) if notes else "")


def exited0(runs: List[Run]) -> Optional[float]:
    """Median wall of the runs that exited 0 (a tool that failed at once is not faster)."""
    return med([r.wall for r in runs if r.rc == 0])


def faster(a: List[Run], b: List[Run], name_a: str, name_b: str) -> str:
    ta, tb = exited0(a), exited0(b)
    if ta is None or tb is None:
        return "n/a (%s failed)" % (name_a if ta is None else name_b)
    return "%s, %.1fx" % (name_a, tb / ta) if ta <= tb else "**%s**, %.1fx" % (name_b, ta / tb)


def markdown(results: List[Dict], n: int, skipped: List[str]) -> List[str]:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "tfnative", "gdb_scripts"],
                           capture_output=True, text=True, cwd=ROOT).stdout.strip()
    gdbv = subprocess.run(["gdb", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    pystackv = subprocess.run([PYSTACK, "--version"], capture_output=True, text=True).stdout.strip()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    lines = [
        "# tfnative across TensorFlow and CPython versions, side by side with gdb and pystack",
        "",
        f"`{' '.join(['.venv/bin/python bench/bench_versions.py', *sys.argv[1:]])}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {head.strip()}"
        f"{' (tfnative/ or gdb_scripts/ modified in the work tree)' if dirty else ''}; "
        f"{os.cpu_count()} cores ({cpu}), {psutil.virtual_memory().total / 2**30:.0f} GiB, {gdbv}, "
        f"pystack {pystackv.split()[-1] if pystackv else '?'}.  Medians of {n} run(s), min-max in brackets; "
        "one run of each tool in turn.",
        "",
        "| pair | CPython | TensorFlow | tfnative run as | python-gdb.py for py-bt |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        tfn = r["tfnative"].replace(os.path.expanduser("~"), "~").replace(ROOT + "/", "")
        lines.append(f"| {r['pair']} | {r['python']} | {r['tensorflow']} | `{tfn}` | "
                     f"{'yes' if r['pygdb'] else 'none found'} |")
    if skipped:
        lines += ["", "Not measured: " + "; ".join(skipped) + "."]
    lines += [
        "",
        "## (a) attach --break TF_NewSession examples/open_session.py vs the gdb recipe",
        "",
        "Manual recipe: `gdb -batch -ex 'set breakpoint pending on' -ex 'break TF_NewSession' -ex run -ex bt "
        "-ex py-bt -ex continue --args VENV/bin/python examples/open_session.py` (the interpreter's "
        "`python3.X-gdb.py` sourced).  Both run the script to its end; the plain run is the script without a "
        "debugger.  gdb VmHWM: the peak RSS of gdb (tfnative's gdb child, or the recipe's gdb).",
        "",
        "| pair | plain run | tfnative attach | manual gdb | faster | gdb VmHWM tfnative | gdb VmHWM manual | "
        "tfnative: TF frame + user's line | gdb: bt / py-bt shows Python |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "a" not in r:
            lines.append(f"| {r['pair']} | failed: {r.get('a_error', '?')} |||||||")
            continue
        a = r["a"]
        t, m = a["tfnative attach"], a["manual gdb"]
        pybt = sum(1 for x in m if getattr(x, "pybt", False))
        lines.append(f"| {r['pair']} | {cell(a['plain run'])} | **{cell(t)}** | {cell(m)} | "
                     f"{faster(t, m, 'tfnative', 'gdb')} | **{cell(t, 'gdb_hwm_mb', 'MB', 0)}** | "
                     f"{cell(m, 'gdb_hwm_mb', 'MB', 0)} | {found(t)} | {found(m)} / {pybt}/{len(m)} |")
    lines += [
        "",
        "## (b) stack of a hung TF process: `tfnative stack --pid` vs `pystack remote --native`",
        "",
        "`bench/scripts/tf_hang.py`: a tf.function blocked in a tf.py_function that sleeps.  Peak RSS: the "
        "whole tool's process tree (polled).  Found: the output names `TFE_Execute` and the callback `slow`.",
        "",
        "| pair | threads | tfnative stack --pid | pystack remote --native | faster | peak RSS tfnative | "
        "peak RSS pystack | found: tfnative | found: pystack |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "b" not in r:
            lines.append(f"| {r['pair']} | failed: {r.get('b_error', '?')} |||||||")
            continue
        t, p = r["b"]["tools"]["tfnative stack --pid"], r["b"]["tools"]["pystack remote --native"]
        lines.append(f"| {r['pair']} | {r['b']['threads']} | **{cell(t)}** | {cell(p)} | "
                     f"{faster(t, p, 'tfnative', 'pystack')} | {cell(t, 'tree_rss_mb', 'MB', 0)} | "
                     f"{cell(p, 'tree_rss_mb', 'MB', 0)} | {found(t)} | {found(p)} |")
    lines += [
        "",
        "## (c) core of a tf.py_function segfault: `tfnative core` vs `pystack core --native-all`",
        "",
        "`tests/scripts/tf_pyfunc_segv.py` run by the pair's python with RLIMIT_CORE raised.  Found: the output "
        "names the callback `bad_callback` and `PyFuncOp`.",
        "",
        "| pair | core | tfnative core | pystack core --native-all | faster | peak RSS tfnative | "
        "peak RSS pystack | found: tfnative | found: pystack |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "c" not in r:
            lines.append(f"| {r['pair']} | failed: {r.get('c_error', '?')} |||||||")
            continue
        t, p = r["c"]["tools"]["tfnative core"], r["c"]["tools"]["pystack core --native-all"]
        lines.append(f"| {r['pair']} | {r['c']['core_mb']:.0f} MB | **{cell(t)}** | {cell(p)} | "
                     f"{faster(t, p, 'tfnative', 'pystack')} | {cell(t, 'tree_rss_mb', 'MB', 0)} | "
                     f"{cell(p, 'tree_rss_mb', 'MB', 0)} | {found(t)} | {found(p)} |")
    slower = []
    for r in results:
        for key, tool, peer in (("a", "tfnative attach", "manual gdb"), ("b", "tfnative stack --pid",
                                                                          "pystack remote --native"),
                                ("c", "tfnative core", "pystack core --native-all")):
            if key not in r:
                continue
            runs = r[key] if key == "a" else r[key]["tools"]
            ta, tp = exited0(runs[tool]), exited0(runs[peer])
            if ta is not None and tp is not None and tp < ta:
                short = [x for x in runs[peer] if x.rc == 0 and not x.ok]
                slower.append(f"{r['pair']}: `{peer}` {tp:.2f} s vs `{tool}` {ta:.2f} s" +
                              (f" (but its output had {short[0].note})" if short else ""))
    lines += ["", "Where a peer is faster (medians of the runs that exited 0): " +
              ("; ".join(slower) if slower else "nowhere") + "."]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each tool per pair (median reported; default 3)")
    ap.add_argument("--quick", action="store_true", help="one run of each (a smoke test, not a measurement)")
    ap.add_argument("--pair", action="append", default=[],
                    help="only this pair (repeatable or comma-separated; default: every pair with TensorFlow)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "versions.md"))
    args = ap.parse_args()
    n = 1 if args.quick else max(1, args.runs)
    wanted = [p.strip() for arg in args.pair for p in arg.split(",") if p.strip()] or list(pairs.PAIRS)
    todo, skipped = [], []
    for name in wanted:
        try:
            _py, tf = pairs.parse(name)
        except pairs.PairError as e:
            print("bench_versions: %s" % e, file=sys.stderr)
            return 2
        if tf is None:
            skipped.append("%s (%s)" % (name, pairs.WHY_NO_TF.get(name, "no TensorFlow")))
            continue
        venv = pairs.find_venv(name)
        if venv is None:
            skipped.append("%s (no ready venv: %s)" % (name, pairs.venv_dir(name)))
            continue
        todo.append((name, venv))
    if not todo:
        print("bench_versions: no ready venv among %s" % ", ".join(wanted), file=sys.stderr)
        return 2
    old = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))  # finally clauses end the targets, remove the cores
    results = []
    try:
        for name, venv in todo:
            try:
                results.append(bench_pair(name, venv, n))
            except pairs.PairError as e:
                skipped.append("%s (%s)" % (name, e))
    finally:
        signal.signal(signal.SIGTERM, old)
    print()
    publish(markdown(results, n, skipped), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
