"""``tfnative report --core``'s facts of a core dump, from what the core itself says (the report is
``output/bugreport.py``'s).

The versions are those of the files the crashed process mapped, not of this
host's installs: Python from ``Py_Version`` in the interpreter the core maps
(3.11 and later; the major.minor the frame reader found otherwise),
TensorFlow from the ``dist-info`` beside the ``tensorflow`` package the
process loaded, read where that package is on this host (``--sysroot``
applied).  The process's TensorFlow environment variables come from the
strings at the top of its main stack (``corefile/source.py``).  The doctor's
verdicts are given for the TensorFlow libraries the core maps whose file on
this host is the one the process ran (checked by ``corefile/source.py``); the facts
about this host are labelled as such.
"""

from __future__ import annotations

import glob
import os
import re
import struct
from typing import Dict, List, Optional

from ..core import frameclass
from ..core.binary.datasyms import data_symbols
from ..core.binary.elf import ElfError, ElfFile
from ..core.binary.mapfile import map_file
from ..core.model import Document
from ..toolchain import doctor
from ..toolchain.hostfacts import host_facts, onednn_words
from .source import CoreSource

TF_ENV_RE = re.compile(r"^(TF_[A-Z0-9_]*|XLA_FLAGS|CUDA_VISIBLE_DEVICES|OMP_NUM_THREADS|KMP_[A-Z_]+)$")
SITE_RE = re.compile(r"^(.*/(?:site|dist)-packages)/tensorflow/")
_LEVELS = {0xA: "a", 0xB: "b", 0xC: "rc", 0xF: ""}


def python_version(source: CoreSource) -> Optional[str]:
    """``3.11.7`` from ``Py_Version`` in the interpreter the core maps (None before 3.11 or when unread)."""
    for m in source.core.notes.files:
        host = source.host_of(m.path)
        if m.offset != 0 or not host or not frameclass.may_hold_interpreter(os.path.basename(m.path)):
            continue
        try:
            syms = data_symbols(host, ["Py_Version"])
            if "Py_Version" not in syms:
                continue
            with map_file(host) as mm:
                bias = m.start - ElfFile(mm, host, sections=False).first_load_vaddr()
            v, = struct.unpack("<I", source.core.read(bias + syms["Py_Version"], 4))
        except (OSError, ElfError, ValueError, MemoryError, struct.error):
            continue
        level = _LEVELS.get(v >> 4 & 0xF, "")
        return "%d.%d.%d%s" % (v >> 24, v >> 16 & 0xFF, v >> 8 & 0xFF, level + str(v & 0xF) if level else "")
    return None


def tensorflow_version(source: CoreSource) -> str:
    """``tensorflow-cpu 2.21.0 (SITE)`` for the TensorFlow package the process loaded."""
    site = next((m.group(1) for m in map(SITE_RE.match, (f.path for f in source.core.notes.files)) if m), None)
    if site is None:
        return "not loaded by the process"
    here = source.candidate(site)
    for meta in sorted(glob.glob(os.path.join(glob.escape(here), "t*.dist-info", "METADATA"))):
        fields: Dict[str, str] = {}
        try:
            with open(meta, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break
                    key, _, value = line.partition(":")
                    fields[key] = value.strip()
        except OSError:
            continue
        name = fields.get("Name", "")
        if re.match(r"^(tensorflow|tf[-_]nightly)([-_](cpu|gpu|intel|macos))?$", name, re.I):
            return "%s %s (%s)" % (name, fields.get("Version", "?"), site)
    return "loaded from %s (version unknown: no dist-info at %s on this host)" % (site, here)


def facts(source: CoreSource, doc: Document, core_path: str) -> Dict[str, str]:
    """The Versions section: the crashed process's, then this host's (labelled)."""
    event = doc.events[0]
    exe = source.exe_seen or "?"
    py = python_version(source) or event.python or "not found in the core"
    env = {k: v for k, v in source.environment().items() if TF_ENV_RE.match(k)}
    onednn = env.get("TF_ENABLE_ONEDNN_OPTS")
    out = {
        "TensorFlow": tensorflow_version(source),
        "Python": "%s (%s)" % (py, exe),
        "Core": "%s (%.1f MB), pid %s" % (core_path, source.core.size / 1e6, doc.pid),
        "TensorFlow environment the process started with": (", ".join("`%s=%s`" % kv for kv in sorted(env.items()))
                                                  or "none set"),
    }
    if SITE_RE.match(out["TensorFlow"].split("(")[-1].rstrip(")") + "/tensorflow/"):
        out["oneDNN"] = onednn_words(onednn)
    host = host_facts({})
    out["OS (this host, where the report was made)"] = host["OS"]
    out["CPU (this host)"] = host["CPU"]
    return out


TF_LIBRARY_RE = re.compile(r"/tensorflow/(lib[^/]*\.so[^/]*|python/lib_pywrap_tensorflow[^/]*\.so|"
                           r"python/_pywrap_tensorflow_internal\.so)$")


def library_verdicts(source: CoreSource) -> List[doctor.Report]:
    """The doctor on the TensorFlow libraries the core maps, where this host has the very file."""
    out = []
    for seen in dict.fromkeys(m.path for m in source.core.notes.files):
        host = source.host_of(seen)
        if host and TF_LIBRARY_RE.search(seen):
            try:
                out.append(doctor.inspect(host))
            except Exception:  # noqa: BLE001 - a library the doctor cannot read costs its line, not the report
                continue
    return out
