"""The facts of this host a bug report gives (``tfnative report``, ``core --report``): the versions of
TensorFlow, Python and gdb, the OS and CPU, oneDNN's switch, and what the TensorFlow libraries carry
(``doctor``), gathered here and handed to the renderer (``output/bugreport.markdown``).
"""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Dict, List, Optional

from ..core import procfs
from ..errors import TfnativeError
from . import doctor
from .tfinstall import tensorflow_libraries

CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")


def _first_line(argv: List[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def versions(python: str, gdb: str, env: Dict[str, str]) -> Dict[str, str]:
    """Versions and machine facts, without importing TensorFlow."""
    tf = _first_line([python, "-c",
                      "import importlib.metadata as m\n"
                      "for d in ('tensorflow', 'tensorflow-cpu', 'tensorflow-gpu', 'tf-nightly'):\n"
                      "    try:\n        print(d, m.version(d)); break\n"
                      "    except m.PackageNotFoundError:\n        pass\n"
                      "else:\n    print('not installed')"])
    return {
        "TensorFlow": tf,
        "Python": _first_line([python, "-c", "import sys; print(sys.version.split()[0], sys.executable)"]),
        "gdb": _first_line([gdb, "--version"]),
        **host_facts(env),
    }


def host_facts(env: Dict[str, str]) -> Dict[str, str]:
    """This machine's OS and CPU, and oneDNN's switch in ``env``."""
    os_name = "unknown"
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    cpu, have = procfs.cpuinfo()
    flags = [fl for fl in CPU_FLAGS if fl in have]
    onednn = env.get("TF_ENABLE_ONEDNN_OPTS")
    return {
        "OS": "%s (kernel %s, %s)" % (os_name, platform.release(), platform.machine()),
        "CPU": "%s, %d cores; flags: %s" % (cpu, os.cpu_count() or 0, " ".join(flags) or "none of interest"),
        "oneDNN": onednn_words(onednn),
    }


def onednn_words(onednn: Optional[str]) -> str:
    """oneDNN's switch (``TF_ENABLE_ONEDNN_OPTS``, None: unset) in words."""
    if onednn in ("0", "false", "False"):
        return "off (TF_ENABLE_ONEDNN_OPTS=%s)" % onednn
    return "on (TF's default on x86 Linux%s)" % (", TF_ENABLE_ONEDNN_OPTS=%s" % onednn if onednn else "")


def library_verdicts(python: str) -> List[doctor.Report]:
    """The doctor's report on each TensorFlow library of ``python``'s TensorFlow ([] where none is found)."""
    try:
        return [doctor.inspect(p) for p in tensorflow_libraries(python)]
    except TfnativeError:
        return []
