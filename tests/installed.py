"""Which tfnative the tests run: the one users install (the wheel), never the checkout's files.

``tests/conftest.py`` calls ``prepare()`` before any test module imports tfnative.  It moves the checkout to the
end of ``sys.path`` (pytest put it first, to import ``tests``), so that ``import tfnative`` finds the installed
package, and checks that package against the checkout file by file: the wheel ``.ci/wheel`` built from this very
tree.  Where it differs (a checkout edited since, an editable install, none at all) it runs ``.ci/wheel`` once and
checks again; a difference that remains ends the session with one line saying what differs.

``TFNATIVE_TESTS_FROM_SOURCE=1`` runs the tests on the checkout's files instead (a quick loop while editing, or a
git worktree beside the venv's own checkout); CI refuses it.  The commands the tests start follow the same
choice: ``TFNATIVE`` is the installed ``tfnative`` script, or ``python -m tfnative`` from the checkout.
"""

from __future__ import annotations

import filecmp
import importlib
import importlib.util
import os
import subprocess
import sys
from typing import List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (package, its directory in the checkout): what the wheel holds (pyproject's packages.find and package-data).
PACKAGES = (("tfnative", os.path.join(ROOT, "tfnative")),
            ("tfnative_gdb", os.path.join(ROOT, "gdb_scripts", "tfnative_gdb")))
DATA_SUFFIXES = (".py", ".html", ".typed")


def from_source() -> bool:
    """Whether the tests run on the checkout's files (``TFNATIVE_TESTS_FROM_SOURCE=1``)."""
    return os.environ.get("TFNATIVE_TESTS_FROM_SOURCE", "") not in ("", "0")


def tree_files(top: str) -> List[str]:
    """The files of a package directory that its wheel holds, relative to it, sorted: its modules and data files
    (no ``__pycache__``)."""
    out = []
    for d, dirs, files in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for name in files:
            if name.endswith(DATA_SUFFIXES):
                out.append(os.path.relpath(os.path.join(d, name), top))
    return sorted(out)


def _inside(path: str, top: str) -> bool:
    path, top = os.path.realpath(path), os.path.realpath(top)
    return path == top or path.startswith(top + os.sep)


def installed_dir(package: str) -> Optional[str]:
    """Where ``import package`` finds it with the checkout off the front of ``sys.path``, or None."""
    importlib.invalidate_caches()
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def differs(package: str, where: Optional[str]) -> Optional[str]:
    """None where ``where`` (a package's installed directory) holds the checkout's files of ``package`` exactly;
    else what differs, in a few words."""
    source = dict(PACKAGES)[package]
    if where is None:
        return "%s is not installed" % package
    if _inside(where, source):
        return "%s is imported from the checkout (%s): an editable install or PYTHONPATH" % (package, where)
    ours, theirs = tree_files(source), tree_files(where)
    if ours != theirs:
        extra = sorted(set(theirs) - set(ours))[:3]
        missing = sorted(set(ours) - set(theirs))[:3]
        return "%s's files differ from the checkout's (missing: %s; not in the checkout: %s)" % (
            package, ", ".join(missing) or "none", ", ".join(extra) or "none")
    for rel in ours:
        if not filecmp.cmp(os.path.join(source, rel), os.path.join(where, rel), shallow=False):
            return "%s/%s differs from the checkout's" % (package, rel)
    return None


def difference() -> Optional[str]:
    """None where the installed tfnative and tfnative_gdb (as this interpreter imports them) are this checkout's
    files exactly; else what differs, in a few words."""
    for package, _ in PACKAGES:
        why = differs(package, installed_dir(package))
        if why is not None:
            return why
    return None


def _checkout_last() -> None:
    """The checkout (and the working directory, '') at the end of ``sys.path``: site-packages first."""
    for entry in (ROOT, "", "."):
        while entry in sys.path:
            sys.path.remove(entry)
    sys.path.append(ROOT)


def prepare() -> Tuple[str, str]:
    """Make ``import tfnative`` find the installed wheel of this checkout (building and installing it where it is
    missing or stale), or the checkout itself with ``TFNATIVE_TESTS_FROM_SOURCE``.  Returns (mode, where tfnative
    is imported from); raises RuntimeError with one line where the installed copy cannot be made current."""
    if "tfnative" in sys.modules:
        raise RuntimeError("tfnative was imported before tests/installed.prepare() chose which one")
    if from_source():
        if os.environ.get("CI"):
            raise RuntimeError("CI tests the installed wheel: unset TFNATIVE_TESTS_FROM_SOURCE")
        if ROOT in sys.path:
            sys.path.remove(ROOT)
        sys.path.insert(0, ROOT)
        return "source", os.path.join(ROOT, "tfnative")
    _checkout_last()
    why = difference()
    if why is not None:
        sys.stderr.write("tests: %s; installing this checkout's wheel (.ci/wheel)\n" % why)
        r = subprocess.run(["bash", os.path.join(ROOT, ".ci", "wheel"), sys.executable], capture_output=True,
                           text=True, stdin=subprocess.DEVNULL, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(".ci/wheel failed: %s" % (r.stderr.strip().splitlines() or ["?"])[-1])
        why = difference()
        if why is not None:
            raise RuntimeError("after .ci/wheel, %s" % why)
    import tfnative

    where = os.path.dirname(os.path.abspath(tfnative.__file__))
    if _inside(where, PACKAGES[0][1]):  # the session check: never the checkout's files (a venv may lie inside it)
        raise RuntimeError("tfnative is imported from the checkout (%s), not from the installed wheel" % where)
    return "installed", where


def tfnative_command() -> List[str]:
    """How the tests run the ``tfnative`` command: the installed script beside this interpreter, as a user runs it
    (no working directory can put the checkout's files before it), or ``python -m tfnative`` from source."""
    script = os.path.join(os.path.dirname(sys.executable), "tfnative")
    if not from_source() and os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "tfnative"]


def import_paths() -> List[str]:
    """The directories that hold the tfnative under test and its ``tfnative_gdb``, for a ``PYTHONPATH`` that
    another interpreter (or gdb's Python) imports them from: the installed wheel's site-packages, or the
    checkout and its ``gdb_scripts`` with ``TFNATIVE_TESTS_FROM_SOURCE``."""
    if from_source():
        return [ROOT, os.path.join(ROOT, "gdb_scripts")]
    out = []
    for package, _ in PACKAGES:
        where = installed_dir(package)
        if where is not None and os.path.dirname(where) not in out:
            out.append(os.path.dirname(where))
    return out
