"""A core's document: its stacks by the one policy (``snapshot/policy.py``), the process's end, TF's fatal line.

``tfnative core`` prints it (``cli/core.py``), ``report --core`` turns it into a
Markdown report (``report.py``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Optional, TextIO, Tuple

from ..analysis.event import finish
from ..core import tflog
from ..core.model import Capture, Document
from ..core.threads import Threads
from ..errors import HasDebugInfo, TfnativeError, Unsupported
from ..gdb.options import GdbOptions
from ..progress import progress
from ..snapshot import pipeline
from ..snapshot.policy import take_stacks, why
from . import withgdb
from .source import CoreSource
from .triage import core_event


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


def read_core(opts: CoreOptions, err: TextIO = sys.stderr) -> Tuple[CoreSource, Document]:
    """The core's source (open: the caller closes it) and its document: one event of kind "core", the
    process's end (the signal it died of) and, where the signal came from outside, the hang verdict.
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
        doc = core_event(source.core.notes, source.argv(), result, opts.native_all)
        _add_fatal_log(doc, source)
        finish(doc)  # the crash triage, once the document has all it says (the fatal log line too)
        return source, doc
    except BaseException:
        source.close()
        raise


def _add_fatal_log(doc: Document, source: CoreSource) -> None:
    """At an abort, TensorFlow's own fatal log line (``Check failed: ...``), read from the core's memory
    around the aborting thread's stack pointer (as ``attach`` reads it from the live process)."""
    event = doc.events[0]
    if event.signal != "SIGABRT" or event.log:
        return
    notes = source.core.notes
    thread = next((t for t in notes.threads if t.tid == event.thread), notes.threads[0] if notes.threads else None)
    sp = thread.regs.get("rsp") if thread is not None else None
    if sp:
        event.log = tflog.fatal_line(source.core.read, sp)
