"""What a core gives: its stacks by the one policy (``snapshot/policy.py``), what it says of its signal, TF's
fatal line (``CoreCapture``).

A core's signal is either the process's own crash (a fault: ``SIGSEGV`` with an address; or raised by the
process itself: ``abort()`` after a ``Check failed``), or was sent from outside (``kill -ABRT``/``-QUIT`` on a
hung job, the habit for getting a core of a hang: ``sent_by``), or there is none (a core written by
``gcore``).  Which triage applies is analysis's (``analysis/event.core_document``); ``tfnative core`` prints
the document (``cli/core.py``), ``report --core`` turns it into a Markdown report (``output/bugreport.py``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, TextIO, Tuple

from ..core import signals
from ..core.model import Capture
from ..core.tensorflow import tflog
from ..core.threads import Threads
from ..errors import HasDebugInfo, TfnativeError, Unsupported
from ..gdb.options import GdbOptions
from ..progress import progress
from ..snapshot import pipeline
from ..snapshot.policy import take_stacks, why
from . import withgdb
from .reader import Notes
from .source import CoreSource


@dataclass
class CoreOptions:
    """What ``tfnative core`` (or ``report --core``) was asked for, built once by the CLI."""

    path: str
    executable: Optional[str] = None
    sysroot: Optional[str] = None  # --sysroot DIR: a core from another machine
    all_threads: bool = False
    native_all: bool = False
    full: bool = False
    json_path: Optional[str] = None
    with_gdb: bool = False
    variables: bool = False  # --locals
    gdb: GdbOptions = field(default_factory=GdbOptions)


@dataclass
class CoreCapture:
    """A core as read: its capture, the process's command line and pid, what the core says of its signal
    (``said``: ``signal``, ``signal_code``, ``fault_address``, and ``sent_by`` where another process sent it) and,
    at an abort, TensorFlow's fatal log line."""

    capture: Capture
    argv: List[str]
    pid: Optional[int]
    said: Dict[str, Any]
    log: Optional[str] = None


def sent_by(notes: Notes) -> Optional[int]:
    """The pid of the process that sent the core's signal (``kill``), None when the process raised it or
    it is a fault; a thread of the process itself (``abort()``'s ``tgkill``) is not "from outside"."""
    if notes.sender_pid is None or notes.sender_pid <= 0:
        return None
    own = {notes.pid} | {t.tid for t in notes.threads}
    return None if notes.sender_pid in own else notes.sender_pid


def signal_said(notes: Notes) -> Dict[str, Any]:
    """What the core's notes say of its signal: ``signal`` (its name; None for no signal), ``signal_code``,
    ``fault_address`` and, where another process sent it, ``sent_by``: an event of kind "core"'s own fields."""
    signo = notes.signal or notes.threads[0].cursig
    said: Dict[str, Any] = {"signal": signals.signal_name(signo) if signo else None,
                            "signal_code": notes.signal_code,
                            "fault_address": ("0x%x" % notes.fault_address
                                              if notes.fault_address is not None else None)}
    sender = sent_by(notes)
    if sender is not None:
        said["sent_by"] = sender
    return said


def read_core(opts: CoreOptions, err: TextIO = sys.stderr) -> Tuple[CoreSource, CoreCapture]:
    """The core's source (open: the caller closes it) and what it gives (``CoreCapture``).
    Through gdb (``withgdb.py``) with ``--with-gdb``, or where a library on a stack has DWARF; ``--locals``:
    each Python frame's arguments and locals."""
    source = CoreSource(opts.path, opts.executable, opts.sysroot)
    source.variables = opts.variables
    which = Threads.ALL if opts.all_threads else Threads.PYTHON
    try:
        def fast(which: Threads) -> Capture:
            try:
                return source.stacks(which, pipeline.stacks)
            except HasDebugInfo:
                raise
            except Unsupported as exc:  # gdb reads no more of a core than its notes and segments give
                problems = source.core.notes.problems
                raise TfnativeError("%s: cannot unwind: %s%s" % (
                    opts.path, exc, " (the core is damaged: %s)" % problems[0] if problems else "")) from None

        def through_gdb(which: Threads) -> Capture:
            with progress("gdb reads %s" % opts.path):
                result = source.finish(withgdb.stacks_with_gdb(source, which, opts.gdb, err), which)
            pipeline.add_memory_facts(source.memory, source.libraries(),
                                      {t.tid: t.regs for t in source.core.notes.threads}, result)
            return result

        def fallback(exc: BaseException) -> None:
            err.write("tfnative: reading the core through gdb: %s\n" % why(exc))

        result = take_stacks(which, fast, through_gdb, fallback, with_gdb=opts.with_gdb)
        notes = source.core.notes
        said = signal_said(notes)
        return source, CoreCapture(result, source.argv(), notes.pid, said,
                                   fatal_log(source, said["signal"], result.selected_tid))
    except BaseException:
        source.close()
        raise


def fatal_log(source: CoreSource, signal: Optional[str], tid: Optional[int]) -> Optional[str]:
    """At an abort, TensorFlow's own fatal log line (``Check failed: ...``), read from the core's memory
    around the aborting thread's (``tid``'s) stack pointer (as ``attach`` reads it from the live process)."""
    if signal != "SIGABRT":
        return None
    notes = source.core.notes
    thread = next((t for t in notes.threads if t.tid == tid), notes.threads[0] if notes.threads else None)
    sp = thread.regs.get("rsp") if thread is not None else None
    return tflog.fatal_line(source.core.read, sp) if sp else None
