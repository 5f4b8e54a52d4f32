"""Helpers shared by the benchmarks (run as scripts: ``bench/`` is on their path)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def longest_pause(gaps_file: str, start: float, end: float, ticker: Optional[str] = None) -> float:
    """The longest gap a target's ticker wrote to ``gaps_file`` (lines ``AT GAP [TICKER]``, monotonic seconds)
    that began at or after ``start`` and ended by ``end`` (plus half a second): how long a tool held it.
    ``ticker``: that ticker's gaps alone (a target with several)."""
    worst = 0.0
    with open(gaps_file) as f:
        for line in f:
            fields = line.split()
            at, gap = float(fields[0]), float(fields[1])
            if ticker is not None and fields[2:3] != [ticker]:
                continue
            if start <= at - gap and at <= end + 0.5:
                worst = max(worst, gap)
    return worst


def publish(lines: List[str], out: Optional[str]) -> None:
    """Print a result table, and write it to ``out`` (a results file under ``bench/results/``) when given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)


def shown_path(path: str) -> str:
    """A path as a results file shows it: relative to the checkout where it lies inside it or beside it (a
    worktree of an older commit, ``../wt-before``), under ``~`` in the home directory; never one machine's
    absolute path to the checkout (tests/unit/test_docs.py keeps the pages so)."""
    if not os.path.isabs(path):
        return path
    path = os.path.normpath(path)
    parent = os.path.dirname(ROOT)
    if path == ROOT or path.startswith(ROOT + os.sep) or path.startswith(parent + os.sep):
        return os.path.relpath(path, ROOT)
    home = os.path.expanduser("~")
    if home not in ("/", "") and path.startswith(home + os.sep):
        return "~" + path[len(home):]
    return path


def machine() -> str:
    """The machine a result was measured on, for its table's footnote: architecture, CPU model, cores, memory,
    kernel, Python (read from /proc, so that it works without psutil)."""
    model, mem_gib = "", 0.0
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
        with open("/proc/meminfo") as f:
            mem_gib = next((int(ln.split()[1]) / 2**20 for ln in f if ln.startswith("MemTotal:")), 0.0)
    except OSError:
        pass
    return "%s%s, %d CPUs, %.0f GiB, kernel %s, Python %s" % (
        platform.machine(), " (%s)" % model if model else "", os.cpu_count() or 0, mem_gib, platform.release(),
        platform.python_version())


def install(tree: str, where: str) -> str:
    """tfnative of the checkout ``tree`` installed the way a user installs it (``pip install``: a wheel, not
    editable, its byte-code compiled) into a new venv at ``where``; its dependencies are this venv's (one
    ``.pth`` line).  The venv's python.  An editable install runs setuptools' import hook at every start
    (~20 ms here), which an installed tfnative does not."""
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", where], check=True)
    py = os.path.join(where, "bin", "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tfnative-bench-src-") as src:
        # from a copy: setuptools builds in the tree (build/lib, egg-info), and a checkout keeps its own
        src = os.path.join(src, "tfnative")
        shutil.copytree(tree, src, ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "*.egg-info", ".mypy_cache", ".ruff_cache", ".pytest_cache", "lib",
            "bdist.*", "site", "results"))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                        "--no-build-isolation", "--target", site, src], check=True)
    subprocess.run([py, "-m", "compileall", "-q", site], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(site, "tfnative-bench-deps.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    return py
