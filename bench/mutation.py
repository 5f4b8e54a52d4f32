"""On-demand mutation testing: mutmut per module, with only the unit tests that reach it.

    python bench/mutation.py [--max-children N] [--show] [--out bench/results/mutation.md [--keep]] [MODULE ...]

For each module (default: all of ``MODULES``) the checkout's ``tfnative/``, ``tests/`` and
``pyproject.toml`` are copied into a temporary directory, the copy's ``[tool.mutmut]`` is given that module
(``only_mutate``) and its unit tests (``pytest_add_cli_args_test_selection``), and ``mutmut run`` runs there
(mutmut runs each mutant against the tests that reached its function in a first, traced run).  Nothing is
written into the checkout but the table: one row per module, killed / total and the score, and the surviving
mutants by name (docs/testing.md says why each one survives).  The temporary directories are removed.
``--keep``: the rows (and surviving mutants) of the modules not measured this time are kept from ``--out``
as it was, each row saying the commit it was measured at, so that one changed module can be measured again
alone.

It takes minutes per module on two cores (``--max-children`` 1 or 2 on a shared machine); run it by hand
after changing a module or its tests, not in CI.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchutil import publish  # noqa: E402

# Each module and the unit tests that reach it (fast, pure: no gdb, no target), as pytest arguments: a
# test that measures size or speed rather than behaviour is left out (it runs for every mutant of its module).
MODULES: Dict[str, List[str]] = {
    "tfnative/core/python/linetable.py": ["tests/unit/test_linetable.py", "tests/unit/test_pyframes.py"],
    "tfnative/core/tensorflow/tflog.py": ["tests/unit/test_tflog.py"],
    "tfnative/output/fit.py": ["tests/unit/test_fit.py", "tests/unit/test_text_width.py"],
    "tfnative/output/merge.py": ["tests/unit/test_merge.py", "tests/unit/test_merge_edges.py",
                                 "tests/unit/test_merge_chunks.py", "tests/unit/test_merge_text.py",
                                 "tests/unit/test_merge_inputs.py",
                                 "--deselect", "tests/unit/test_merge.py::test_thousand_documents_linear"],
    "tfnative/core/docread.py": ["tests/unit/test_merge.py", "tests/unit/test_merge_edges.py",
                                 "tests/unit/test_merge_chunks.py", "tests/unit/test_merge_inputs.py",
                                 "tests/unit/test_merge_trees.py",
                                 "--deselect", "tests/unit/test_merge.py::test_thousand_documents_linear"],
    "tfnative/core/elide.py": ["tests/unit/test_elide.py"],
    "tfnative/core/docschema.py": ["tests/unit/test_docschema.py", "tests/unit/test_merge_edges.py"],
    "tfnative/core/binary/mapfile.py": ["tests/unit/test_mapfile.py", "tests/unit/test_core_bounds.py"],
}
SECTION = re.compile(r"^\[tool\.mutmut\]\n(?:(?!\[).*\n)*", re.M)
_ROW = re.compile(r"^\| `([^`]+)` \|")  # a row of the table: its module
_LIVED = re.compile(r"^\* `.* \(([^()]+)\)`$")  # a surviving mutant: its module
_COMMIT = re.compile(r", commit ([0-9a-f]+);")


def _mutmut() -> str:
    """mutmut of the interpreter that runs this script (its venv's ``bin/``), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mutmut")
    found = here if os.path.exists(here) else shutil.which("mutmut")
    if not found:
        sys.exit("bench/mutation.py: mutmut is not installed (pip install mutmut)")
    return found


def _toml_list(items: List[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def _workspace(module: str, tests: List[str]) -> str:
    """A temporary copy of the checkout whose ``[tool.mutmut]`` mutates ``module`` and selects ``tests``."""
    work = tempfile.mkdtemp(prefix="tfnative-mutation-")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    shutil.copytree(os.path.join(ROOT, "tfnative"), os.path.join(work, "tfnative"), ignore=ignore)
    shutil.copytree(os.path.join(ROOT, "tests"), os.path.join(work, "tests"), ignore=ignore)
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        text = SECTION.sub("", f.read())
    text += ("\n[tool.mutmut]\nsource_paths = [\"tfnative\"]\nonly_mutate = %s\n"
             "pytest_add_cli_args = [\"-p\", \"no:cacheprovider\", \"-q\"]\n"
             "pytest_add_cli_args_test_selection = %s\n" % (_toml_list([module]), _toml_list(tests)))
    with open(os.path.join(work, "pyproject.toml"), "w") as f:
        f.write(text)
    return work


def run_module(module: str, tests: List[str], max_children: int, show: bool = False
               ) -> Tuple[Dict[str, int], List[str], float]:
    """``(stats, survivors, seconds)`` of one module: mutmut's counts and the names of the mutants that lived
    (``show``: each one's diff on stderr)."""
    work = _workspace(module, tests)
    mutmut = _mutmut()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    start = time.monotonic()
    try:
        run = subprocess.run([mutmut, "run", "--max-children", str(max_children)], cwd=work, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if run.returncode != 0:
            sys.stderr.write(run.stdout[-4000:])
            sys.exit("bench/mutation.py: mutmut run failed on %s (exit %d)" % (module, run.returncode))
        subprocess.run([mutmut, "export-cicd-stats"], cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(work, "mutants", "mutmut-cicd-stats.json")) as f:
            stats = json.load(f)
        results = subprocess.run([mutmut, "results"], cwd=work, env=env, check=True, stdout=subprocess.PIPE,
                                 text=True).stdout
        survivors = [ln.strip() for ln in results.splitlines() if ln.strip() and not ln.strip().endswith(": timeout")]
        for name in survivors if show else []:
            subprocess.run([mutmut, "show", name.split(":")[0]], cwd=work, env=env, stdout=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return stats, survivors, time.monotonic() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("modules", nargs="*", help="paths of modules (default: %s)" % ", ".join(MODULES))
    ap.add_argument("--max-children", type=int, default=1)
    ap.add_argument("--show", action="store_true", help="print each surviving mutant's diff on stderr")
    ap.add_argument("--out", default=None, help="write the table there too (bench/results/mutation.md)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the rows of --out's other modules (those not measured now) as they are")
    args = ap.parse_args()
    modules = args.modules or list(MODULES)
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        sys.exit("bench/mutation.py: no unit tests listed for %s (MODULES)" % ", ".join(unknown))
    if args.keep and not args.out:
        sys.exit("bench/mutation.py: --keep keeps the rows of --out: give --out")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    kept_rows: Dict[str, str] = {}
    kept_lived: Dict[str, List[str]] = {}
    if args.keep and os.path.exists(args.out):
        kept_rows, kept_lived = _kept(args.out, modules)
    rows: Dict[str, str] = {}
    lived: Dict[str, List[str]] = {}
    for module in modules:
        stats, survivors, seconds = run_module(module, MODULES[module], args.max_children, args.show)
        killed = stats["killed"] + stats["timeout"]  # a mutant that hangs the tests is caught too
        total = stats["total"] - stats["skipped"]
        score = 100.0 * killed / total if total else 0.0
        rows[module] = "| `%s` | %d | %d | %d | %d | **%.1f%%** | %s | %s |" % (
            module, total, killed, stats["survived"], stats["no_tests"], score,
            ", ".join("`%s`" % os.path.basename(t) for t in MODULES[module] if t.endswith(".py")), commit)
        lived[module] = ["%s (%s)" % (s.split(":")[0], module) for s in survivors]
        print("%s: %d/%d killed (%.1f%%), %.0f s" % (module, killed, total, score, seconds), file=sys.stderr)
    mutmut_version = "mutmut " + importlib.metadata.version("mutmut")
    lines = ["`python bench/mutation.py --max-children %d%s%s` on %s, commit %s; %s, Python %s.%s" % (
        args.max_children, " --keep" if kept_rows else "", "" if modules == list(MODULES) else " " + " ".join(modules),
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), commit,
        mutmut_version, ".".join(map(str, sys.version_info[:3])),
        " The other rows are kept from earlier runs (the last column: the commit each was measured at)."
        if kept_rows else ""),
        "",
        "| module | mutants | killed | survived | no test | score | unit tests | commit |",
        "|---|---|---|---|---|---|---|---|"]
    order = list(MODULES) + sorted(set(kept_rows) - set(MODULES))
    lines += [rows.get(m) or kept_rows[m] for m in order if m in rows or m in kept_rows]
    names = [s for m in order for s in lived.get(m, kept_lived.get(m, []))]
    if names:
        lines += ["", "Surviving mutants (`--show` prints the diff of each; docs/testing.md says why each lives):", ""]
        lines += ["* `%s`" % s for s in names]
    publish(lines, args.out)


def _kept(path: str, measured: List[str]) -> Tuple[Dict[str, str], Dict[str, List[str]]]:
    """The rows and surviving mutants of the modules not in ``measured``, from the table at ``path``; a row of
    the table's old form (no commit column) gets the commit its first line names."""
    with open(path) as f:
        text = f.read()
    found = _COMMIT.search(text.split("\n", 1)[0])
    old_commit = found.group(1) if found else "?"
    rows: Dict[str, str] = {}
    lived: Dict[str, List[str]] = {}
    for line in text.splitlines():
        row = _ROW.match(line)
        if row and row.group(1) not in measured:
            rows[row.group(1)] = line if line.count("|") == 9 else line + " %s |" % old_commit
        dead = _LIVED.match(line)
        if dead and dead.group(1) not in measured:
            lived.setdefault(dead.group(1), []).append(line[3:-1])
    return rows, lived


if __name__ == "__main__":
    main()
