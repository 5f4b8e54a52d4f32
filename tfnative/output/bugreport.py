"""``tfnative report``: a Markdown bundle ready to paste into a TensorFlow issue.

What TF maintainers ask for again and again (issues 59461, 61266, 21277 went
stale without it): versions (TF, Python, gdb, OS, CPU flags, oneDNN), the
command, the mixed stacks, the dumps, and what the libraries carry.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
from typing import Dict, List, Optional

from ..core import procfs
from ..core.model import Document
from ..errors import TfnativeError
from ..toolchain import doctor
from ..toolchain.tfinstall import tensorflow_libraries
from . import render
from .report import crash_summary, op_lines, signal_title, summary_phrases

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
        "oneDNN": ("off (TF_ENABLE_ONEDNN_OPTS=%s)" % onednn if onednn in ("0", "false", "False")
                   else "on (TF's default on x86 Linux%s)" % (", TF_ENABLE_ONEDNN_OPTS=%s" % onednn if onednn else "")),
    }


def library_verdicts(python: str) -> List[doctor.Report]:
    try:
        return [doctor.inspect(p) for p in tensorflow_libraries(python)]
    except TfnativeError:
        return []


def markdown(doc: Document, command: List[str], facts: Dict[str, str], libraries: List[doctor.Report],
             exit_status: Optional[int], summary: Optional[List[str]] = None) -> str:
    """The report; ``summary``: the "What happened" lines when the caller knows better (a core)."""
    out: List[str] = ["# Native debugging report (tfnative)", ""]
    out += ["## Versions", ""] + ["- **%s**: %s" % kv for kv in facts.items()] + [""]
    out += ["## Command", "", "```", " ".join(shlex.quote(a) for a in command), "```", ""]
    if summary is None:
        summary = []
        if doc.exit:
            summary.append("exit: %s" % (("killed by " + doc.exit["signal"]) if "signal" in doc.exit
                                         else "status %d" % doc.exit["code"]))
        summary += summary_phrases(crash_summary(doc), code="`")
        if doc.unresolved:
            summary.append("never resolved: " + ", ".join("`%s`" % u for u in doc.unresolved))
    out += ["## What happened", ""] + ["- " + s for s in summary or ["nothing was caught"]] + [""]
    for i, e in enumerate(doc.events, 1):
        what = {"breakpoint": "breakpoint `%s`" % e.location, "signal": signal_title(e),
                "numerics": "NaN/Inf made by op `%s`" % render.op_label(e.op or {}),
                "core": "core dump" + (", " + signal_title(e) if e.signal else "")}
        out += ["## Event %d: %s" % (i, what.get(e.kind, e.kind)), ""]
        if e.log:
            out += ["TensorFlow's log: `%s`" % e.log, ""]
        out += ["```"]
        out += op_lines(e)
        for thread in e.threads:
            out += render.thread_block(thread)
            out.append("")
        out += ["```", ""]
    if doc.dumps:
        out += ["## Dumps", ""] + ["- `%s`" % p for p in doc.dumps] + [""]
    if doc.core:
        out += ["## Core file", "", "The process's core at the fatal signal: `%s` (attach it, or read it again with "
                "`tfnative core %s`)." % (doc.core, shlex.quote(doc.core)), ""]
    if libraries:
        out += ["## What the TensorFlow libraries carry (`tfnative doctor`)", ""]
        for rep in libraries:
            out.append("- `%s` (%.1f MB): %s" % (os.path.basename(rep.path), rep.size / 1e6, rep.verdict))
        out.append("")
    out.append("<sub>Made by `tfnative report`; mixed Python + native stacks, innermost frame first.</sub>")
    return "\n".join(out) + "\n"
