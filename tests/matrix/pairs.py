"""The (Python, TensorFlow) pairs of the version matrix and where their virtual environments live.

Standard library only: ``tests/matrix/run`` imports this under any python3 >= 3.10, before any venv exists.

A pair is named ``py<X.Y>-tf<version>`` (``py3.14-tf2.22.0rc0``) or ``py<X.Y>-notf`` (plain-Python checks only).
The list below is what the matrix tests, nothing tfnative decides from.  Each pair's venv lives at
``$TFNATIVE_CACHE/venvs/<pair>/`` (default cache ``~/.cache/tfnative``) and is complete when it holds a ``READY``
file; what is in it (the interpreter's version, TensorFlow's) is read from the venv itself, never assumed.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PAIRS = [
    "py3.10-tf2.21.0",
    "py3.11-tf2.16.2",
    "py3.11-tf2.18.1",
    "py3.12-tf2.20.0",
    "py3.11-tf2.21.0",
    "py3.13-tf2.21.0",
    "py3.14-tf2.22.0rc0",
    "py3.15-notf",
]
WHY_NO_TF = {"py3.15-notf": "no TensorFlow wheel exists for CPython 3.15"}
NEWEST = "py3.14-tf2.22.0rc0"  # the newest pair: CI runs it on every change (tests/matrix/test_pair*.py)
OLDEST = "py3.11-tf2.16.2"  # the oldest: CI runs it on every change too (test_pair*.py, test_old_tf*.py)
CI_PAIRS = [OLDEST, NEWEST]  # what .ci/setup provisions; the full matrix (PAIRS) runs on demand: tests/matrix/run

_NAME = re.compile(r"^py(3\.\d+)-(?:tf(\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?)|notf)$")


class PairError(Exception):
    """A pair name or a venv that cannot be used: the message is one line for the user."""


def parse(name: str) -> tuple:
    """(python "3.X", tensorflow version or None) of a pair name."""
    m = _NAME.match(name)
    if not m:
        raise PairError("%r is not a pair name (py3.X-tfA.B.C or py3.X-notf; known: %s)" % (name, ", ".join(PAIRS)))
    return m.group(1), m.group(2)


def same_version(found: Optional[str], wanted: Optional[str]) -> bool:
    """``tf.__version__`` against the pip version a pair names: TensorFlow writes ``2.22.0-rc0`` for ``2.22.0rc0``
    (PEP 440 normal form); both None for a plain-Python pair."""
    if found is None or wanted is None:
        return found is wanted

    def norm(v: str) -> str:
        return re.sub(r"[-_.]?(a|b|rc)[-_.]?", r"\1", v.strip().lower())

    return norm(found) == norm(wanted)


def cache_dir() -> str:
    return os.environ.get("TFNATIVE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tfnative")


def venv_dir(name: str) -> str:
    return os.path.join(cache_dir(), "venvs", name)


def is_ready(venv: str) -> bool:
    return os.path.isfile(os.path.join(venv, "READY")) and os.path.exists(os.path.join(venv, "bin", "python"))


def requirements(name: str) -> List[str]:
    """What pip installs into a pair's venv, tfnative itself aside (it comes from the checkout, ``-e``)."""
    _python, tf = parse(name)
    return (["tensorflow-cpu==%s" % tf] if tf else []) + ["pytest"]


def requirements_key(name: str) -> str:
    """A content hash of what a pair's venv is made from: the pair, its requirements and tfnative's own
    ``pyproject.toml`` (its dependencies), and the checkout tfnative is installed from (editable: a venv made
    for another clone would run that clone's code).  ``READY`` records it; a venv whose key differs is brought up
    to date (``pip install`` again), one whose key is the same is left alone: a second provisioning is a no-op."""
    h = hashlib.sha256()
    h.update(json.dumps({"pair": name, "requirements": requirements(name), "checkout": os.path.realpath(ROOT)},
                        sort_keys=True).encode())
    try:
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            h.update(f.read())
    except OSError:
        pass
    return h.hexdigest()[:16]


def wheels_dir(name: str) -> str:
    """The pair's wheelhouse: every wheel its requirements need (downloaded, or built from an sdist), kept under
    the cache by a hash of the requirements, so that a venv made again installs from disk (``--no-index``)."""
    digest = hashlib.sha256(json.dumps({"pair": name, "requirements": requirements(name)}).encode()).hexdigest()
    return os.path.join(cache_dir(), "wheels", "%s-%s" % (name, digest[:12]))


def ready_key(venv: str) -> Optional[str]:
    """The requirements key a ready venv's ``READY`` records (None: none, an older ``READY``)."""
    try:
        with open(os.path.join(venv, "READY")) as f:
            for line in f:
                if line.startswith("key: "):
                    return line[5:].strip()
    except OSError:
        pass
    return None


def ci_pair_missing(name: str) -> Optional[str]:
    """Why a pair CI must have is not ready here (None: it is), naming the command that provisions it."""
    if find_venv(name) is not None:
        return None
    return "the venv of pair %s is not ready (%s has no READY file); provision it with: %s/tests/matrix/run " \
           "--provision --pair %s" % (name, venv_dir(name), ROOT, name)


def older_tf_pairs() -> List[str]:
    """The pairs whose TensorFlow is older than 2.21 (2.16-2.20: C++ runtime DWARF in ``libtensorflow_cc.so.2``,
    no thread names), in the order of PAIRS."""
    out = []
    for name in PAIRS:
        _py, tf = parse(name)
        if tf is not None and tuple(int(x) for x in tf.split(".")[:2]) < (2, 21):
            out.append(name)
    return out


def probe(python: str, with_tf: Optional[str] = "import", timeout: float = 300) -> dict:
    """What an interpreter reports about itself: sys.version, X.Y, where its tfnative comes from (None: not
    installed), and TensorFlow's version (None without it): ``tf.__version__`` with ``with_tf="import"`` (seconds),
    the installed distribution's version with ``"metadata"`` (fast), not looked at with None.  Raises PairError
    if it does not run."""
    code = (
        "import json, os, sys\n"
        "os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')\n"
        "out = {'sys_version': sys.version, 'python': '.'.join(map(str, sys.version_info[:2])),\n"
        "       'executable': sys.executable}\n"
        "for name in ('tfnative', 'tfnative_gdb'):\n"
        "    try:\n"
        "        mod = __import__(name)\n"
        "        out[name] = os.path.dirname(os.path.realpath(mod.__file__))\n"
        "    except Exception:\n"
        "        out[name] = None\n"
        "out['tensorflow'] = None\n"
        "if WITH_TF == 'import':\n"
        "    try:\n"
        "        import tensorflow as tf\n"
        "        out['tensorflow'] = tf.__version__\n"
        "    except Exception as e:\n"
        "        out['tensorflow_error'] = type(e).__name__ + ': ' + str(e)\n"
        "elif WITH_TF == 'metadata':\n"
        "    import importlib.metadata as md\n"
        "    for dist in ('tensorflow-cpu', 'tensorflow'):\n"
        "        try:\n"
        "            out['tensorflow'] = md.version(dist)\n"
        "            break\n"
        "        except md.PackageNotFoundError:\n"
        "            pass\n"
        "print('PROBE ' + json.dumps(out))\n"
    ).replace("WITH_TF", repr(with_tf))
    try:
        # cwd "/": ``-c`` puts the working directory first on sys.path, and a checkout there would shadow what
        # the venv itself has installed
        r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PairError("%s does not run: %s" % (python, e))
    for line in r.stdout.splitlines():
        if line.startswith("PROBE "):
            return json.loads(line[6:])
    last = (r.stderr.strip().splitlines() or [""])[-1]
    raise PairError("%s does not run (exit %s): %s" % (python, r.returncode, last))


def reused_venvs(name: str) -> List[str]:
    """Venvs outside the cache that may serve a pair if what they hold matches it (checked by probing):
    the checkout's own ``.venv``."""
    return [os.path.join(ROOT, ".venv")]


def _venv_of_python(venv: str, python: str) -> bool:
    """Whether a venv's pyvenv.cfg allows CPython ``python`` (X.Y) before it is probed (True if it says nothing)."""
    try:
        with open(os.path.join(venv, "pyvenv.cfg")) as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() in ("version", "version_info"):
                    return value.strip() == python or value.strip().startswith(python + ".")
    except OSError:
        pass
    return True


def find_venv(name: str) -> Optional[str]:
    """The ready venv of a pair: the cache's, or a reused one whose interpreter and TensorFlow are the pair's."""
    venv = venv_dir(name)
    if is_ready(venv):
        return venv
    python, tf = parse(name)
    for other in reused_venvs(name):
        exe = os.path.join(other, "bin", "python")
        if not os.path.exists(exe) or not _venv_of_python(other, python):
            continue
        try:
            found = probe(exe, with_tf="metadata" if tf else None, timeout=60)
        except PairError:
            continue
        if found["python"] == python and same_version(found["tensorflow"], tf):
            return other
    return None


def _installed_rules():  # tests/installed.py (standard library only), by its path: run imports this file alone
    path = os.path.join(ROOT, "tests", "installed.py")
    spec = importlib.util.spec_from_file_location("tfnative_tests_installed", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tfnative_differs(venv: str) -> Optional[str]:
    """None where ``<venv>/bin/tfnative`` is this checkout's wheel, installed (tfnative and tfnative_gdb, file by
    file); else why not, in a few words."""
    if not os.path.exists(os.path.join(venv, "bin", "tfnative")):
        return "no tfnative command in %s" % venv
    try:
        found = probe(os.path.join(venv, "bin", "python"), with_tf=None, timeout=60)
    except PairError as e:
        return str(e)
    rules = _installed_rules()
    for package in ("tfnative", "tfnative_gdb"):
        why = rules.differs(package, found.get(package))
        if why is not None:
            return why
    return None


def install_wheel(venv: str) -> None:
    """This checkout's wheel installed into ``venv`` (``.ci/wheel``, with tfnative's own dependencies); raises
    PairError with its last line where that fails."""
    r = subprocess.run(["bash", os.path.join(ROOT, ".ci", "wheel"), os.path.join(venv, "bin", "python"), "-"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise PairError(".ci/wheel into %s failed: %s" % (venv, (r.stderr.strip().splitlines() or ["?"])[-1]))


def tfnative_from(venv: str) -> Optional[str]:
    """``<venv>/bin/tfnative`` if this checkout's wheel is what is installed there, else None."""
    return os.path.join(venv, "bin", "tfnative") if tfnative_differs(venv) is None else None


def pyenv_python(minor: str) -> Optional[str]:
    """pyenv's CPython X.Y (the newest patch release installed)."""
    root = os.environ.get("PYENV_ROOT") or os.path.join(os.path.expanduser("~"), ".pyenv")
    found = glob.glob(os.path.join(root, "versions", "%s.*" % minor, "bin", "python%s" % minor))
    found = [p for p in found if re.match(r"^\d+\.\d+\.\d+$", os.path.basename(os.path.dirname(os.path.dirname(p))))]

    def key(p: str) -> tuple:
        return tuple(int(x) for x in os.path.basename(os.path.dirname(os.path.dirname(p))).split("."))

    return max(found, key=key) if found else None


def main_python() -> str:
    """The interpreter that runs the checks themselves (pytest): the checkout's .venv, else this one."""
    exe = os.path.join(ROOT, ".venv", "bin", "python")
    return exe if os.path.exists(exe) else sys.executable

