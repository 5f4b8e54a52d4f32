"""The custom-op corpus (``tests/custom_op/*.cc``), built with g++ against the TensorFlow of this interpreter.

Each op library is built once per source, build flavour and TensorFlow, and kept under
``~/.cache/tfnative/ops/<key>/`` where ``key`` hashes the source (its text and path), the flags and the
TensorFlow it is built against (its directory and its framework library's size and time): a cached build costs
no TensorFlow import. Two flavours, as the users' builds come: ``"g"`` (``-g -O1``, what a kernel developer
builds and what ``build/``'s presets make) and ``"g0"`` (``-O2 -g0``: ``.symtab`` and no DWARF, as pip-
installed op packages ship). A build is written whole or not at all (a ``.part`` renamed), should two sessions
build one at once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from typing import Dict, List

from .utils import ROOT

SOURCES = os.path.join(ROOT, "tests", "custom_op")
FLAVOURS: Dict[str, List[str]] = {"g": ["-g", "-O1"], "g0": ["-O2", "-g0"]}
_flags: Dict[str, List[str]] = {}  # per interpreter


def source(name: str) -> str:
    """The path of ``tests/custom_op/NAME.cc``."""
    return os.path.join(SOURCES, name + ".cc")


def _tf_flags(python: str) -> List[str]:
    if python not in _flags:
        _flags[python] = subprocess.run(
            [python, "-c", "import tensorflow as tf; print(' '.join(tf.sysconfig.get_compile_flags()"
             " + tf.sysconfig.get_link_flags()))"], capture_output=True, text=True, timeout=120, check=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).stdout.split()
    return _flags[python]


def _tf_dir(python: str) -> str:
    """The directory of the TensorFlow ``python`` imports (found without importing it)."""
    if python == sys.executable:
        spec = importlib.util.find_spec("tensorflow")
        assert spec is not None and spec.origin
        return os.path.dirname(os.path.realpath(spec.origin))
    return subprocess.run([python, "-c", "import importlib.util, os; print(os.path.dirname(os.path.realpath("
                           "importlib.util.find_spec('tensorflow').origin)))"], capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def build_op(name: str, flavour: str = "g", python: str = sys.executable) -> str:
    """The op library built from ``tests/custom_op/NAME.cc`` in ``flavour`` (``"g"`` or ``"g0"``) against the
    TensorFlow of ``python`` (this interpreter's by default): its path."""
    tf_dir = _tf_dir(python)
    framework = os.stat(os.path.join(tf_dir, "libtensorflow_framework.so.2"))
    opts = FLAVOURS[flavour]
    with open(source(name), "rb") as f:
        # the source's path too: the build's DWARF names it, and tests read the kernel's source line through it
        key = hashlib.sha256(f.read() + ("\0%s\0%s\0%s\0%d\0%d" % (source(name), " ".join(opts), tf_dir,
                                                                   framework.st_size, framework.st_mtime_ns)
                                         ).encode()).hexdigest()[:16]
    where = os.path.join(os.path.expanduser("~"), ".cache", "tfnative", "ops", key)
    so = os.path.join(where, "%s.so" % name)
    if os.path.exists(so):
        return so
    os.makedirs(where, exist_ok=True)
    part = "%s.%d.part" % (so, os.getpid())
    try:
        subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", *opts, "-w", source(name), *_tf_flags(python),
                        "-o", part], check=True, capture_output=True, timeout=600)
        os.replace(part, so)
    finally:
        if os.path.exists(part):
            os.unlink(part)
    return so
