"""``tfnative report``: a Markdown bundle ready to paste into a TensorFlow issue.

What TF maintainers ask for again and again (issues 59461, 61266, 21277 went
stale without it): versions (TF, Python, gdb, OS, CPU flags, oneDNN), the
command, the mixed stacks, the dumps, and what the libraries carry.
"""

from __future__ import annotations

import os
import shlex
from typing import Dict, List, Optional, Protocol, Sequence

from ..core.model import Document, Op
from . import render
from .report import Said, core_phrases, crash_summary, op_lines, signal_title, summary_phrases


class Library(Protocol):
    """What the report says of a TensorFlow library (``toolchain/doctor.Report``)."""

    path: str
    size: int
    verdict: str


def markdown(doc: Document, command: List[str], facts: Dict[str, str], libraries: Sequence[Library],
             exit_status: Optional[int], summary: Optional[List[str]] = None) -> str:
    """The report; ``facts``: the versions and the machine (``toolchain/hostfacts.versions``, gathered by the
    caller), ``libraries``: the doctor's word on each TF library; ``summary``: the "What happened" lines when
    the caller knows better (a core)."""
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
                "numerics": "NaN/Inf made by op `%s`" % render.op_label(e.op or Op()),
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


def core_summary(doc: Document) -> List[str]:
    """The "What happened" lines of a core's report: the triage, the hang verdict where it applies, what could
    not be read."""
    event = doc.events[0]
    lines = []
    if event.signal:
        lines.append("the process died of %s%s (core dumped)" % (
            event.signal, " sent by pid %d" % event.sent_by if event.sent_by is not None else ""))
    else:
        lines.append("no signal in the core (written by gcore?)")
    lines += [p.text for p in core_phrases(doc, code="`") if p.said is not Said.SIGNAL]
    if event.triage:
        lines.append("hang verdict: %s" % event.triage.verdict)
    lines += ["warning: %s" % w for w in event.warnings]
    return lines
