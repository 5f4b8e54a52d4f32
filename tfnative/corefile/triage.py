"""What a core says happened: its event of kind "core", the signal's origin, and which triage applies.

A core's signal is either the process's own crash (a fault: ``SIGSEGV``
with an address; or raised by the process itself: ``abort()`` after a
``Check failed``), or was sent from outside (``kill -ABRT``/``-QUIT`` on a
hung job, the habit for getting a core of a hang), or there is none (a core
written by ``gcore``).  The fatal-signal triage (``analysis.event.document_triage``:
the signal, the op, the nearest user frame, the tf.function) applies to every
core with a signal; the hang verdict (``analysis/verdict.py``) only where the signal
came from outside or there is none, since a crash is no hang.  A core holds
no kernel state and no samples, so the verdict says nothing about either.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..analysis.event import analyze
from ..core import signals
from ..core.model import Capture, Document
from ..output import report
from ..output.verdicttext import verdict_lines
from .reader import Notes


def signal_name(signo: Optional[int]) -> Optional[str]:
    """``SIGSEGV`` for 11; None for no signal."""
    if not signo:
        return None
    return signals.signal_name(signo)


def sent_by(notes: Notes) -> Optional[int]:
    """The pid of the process that sent the core's signal (``kill``), None when the process raised it or
    it is a fault; a thread of the process itself (``abort()``'s ``tgkill``) is not "from outside"."""
    if notes.sender_pid is None or notes.sender_pid <= 0:
        return None
    own = {notes.pid} | {t.tid for t in notes.threads}
    return None if notes.sender_pid in own else notes.sender_pid


def core_event(notes: Notes, argv: List[str], result: Capture, native_all: bool) -> Document:
    """The document of a core: one event of kind "core" (``signal``, ``signal_code``, ``fault_address``,
    ``sent_by`` where another process sent it, ``triage``: the hang verdict where it applies) and the exit
    (``{"signal": NAME}``: the process died of it; None without a signal)."""
    signo = notes.signal or notes.threads[0].cursig
    extra: Dict[str, Any] = {"signal": signal_name(signo), "signal_code": notes.signal_code,
                             "fault_address": ("0x%x" % notes.fault_address
                                               if notes.fault_address is not None else None)}
    sender = sent_by(notes)
    if sender is not None:
        extra["sent_by"] = sender
    event = analyze("core", result, native_all=native_all, hang=not signo or sender is not None, **extra)
    doc = Document(argv=argv, pid=notes.pid, events=[event])
    if signo:
        doc.exit, doc.has_exit = {"signal": event.signal}, True
    return doc


def core_phrases(doc: Document, code: str = "") -> List[str]:
    """The fatal-signal triage of a core's document as short phrases (nothing about breakpoints: a core has
    none)."""
    event = doc.events[0]
    if not event.signal:
        return []
    t = report.crash_summary(doc)
    parts = report.summary_phrases(t, code)
    if not t.breakpoints:
        parts = parts[1:]  # "no breakpoint hit": true of every core, so nothing to say
    if event.sent_by is not None:
        parts = [p + (" (sent by pid %d)" % event.sent_by if p == "fatal %s" % event.signal else "")
                 for p in parts]
    return parts


def triage_lines(doc: Document) -> List[str]:
    """The lines ``tfnative core`` writes on stderr: ``triage: ...`` and, where it applies, ``verdict: ...``."""
    lines = []
    parts = core_phrases(doc)
    if parts:
        lines.append("triage: " + "; ".join(parts))
    hang = doc.events[0].triage
    if hang is not None:
        lines.extend(verdict_lines(hang, doc.events[0].pid))
    return lines
