"""``tfnative core``: the mixed stacks of a crashed process from its core dump (one event of kind "core")."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Optional, TextIO, Tuple

import click

from ..errors import TfnativeError
from ..files import is_stdout, write_output
from .util import run_command

if TYPE_CHECKING:  # the readers load when core runs (``tfnative --version`` pays for none of them)
    from ..corefile.source import CoreSource
    from ..output import report


def read_core(path: str, executable: Optional[str], sysroot: Optional[str], all_threads: bool,
              native_all: bool, with_gdb: bool = False, gdb_path: Optional[str] = None,
              gdb_log: Optional[str] = None, err: TextIO = sys.stderr,
              variables: bool = False) -> Tuple[CoreSource, report.Document]:
    """The core's source (open: the caller closes it) and its document: one event of kind "core", the
    process's end (the signal it died of) and, where the signal came from outside, the hang verdict.
    Through gdb (``coregdb.py``) with ``with_gdb``, or where a library on a stack has DWARF; ``variables``
    (``--locals``): each Python frame's arguments and locals."""
    from ..corefile.source import CoreSource
    from ..corefile.triage import core_event
    from ..snapshot import pipeline as snapshot

    source = CoreSource(path, executable, sysroot)
    source.variables = variables
    which = "all" if all_threads else "python"
    try:
        try:
            if with_gdb:
                raise snapshot.HasDebugInfo("--with-gdb")
            result = source.stacks(which, snapshot.stacks)
        except snapshot.HasDebugInfo as exc:
            from ..corefile import withgdb as coregdb  # gdb's machinery: only where it is used

            if not with_gdb:
                err.write("tfnative: reading the core through gdb: %s\n" % exc)
            result = source.finish(coregdb.stacks_with_gdb(source, which, coregdb.gdb_options(gdb_path, gdb_log),
                                                           err), which)
            snapshot.add_memory_facts(source.memory, source.libraries(),
                                      {t.tid: t.regs for t in source.core.notes.threads}, result)
        except snapshot.Unsupported as exc:
            raise TfnativeError("%s: cannot unwind: %s" % (path, exc)) from None
        doc = core_event(source.core.notes, source.argv(), result, native_all)
        _add_fatal_log(doc, source)
        return source, doc
    except BaseException:
        source.close()
        raise


def _add_fatal_log(doc: report.Document, source: CoreSource) -> None:
    """At an abort, TensorFlow's own fatal log line (``Check failed: ...``), read from the core's memory
    around the aborting thread's stack pointer (as ``attach`` reads it from the live process)."""
    from ..core import tflog

    event = doc.events[0]
    if event.signal != "SIGABRT" or event.log:
        return
    notes = source.core.notes
    thread = next((t for t in notes.threads if t.tid == event.thread), notes.threads[0] if notes.threads else None)
    sp = thread.regs.get("rsp") if thread is not None else None
    if sp:
        event.log = tflog.fatal_line(source.core.read, sp)


def run_core(path: str, executable: Optional[str], sysroot: Optional[str], all_threads: bool, native_all: bool,
             full: bool, json_path: Optional[str], out: TextIO, err: TextIO = sys.stderr, with_gdb: bool = False,
             gdb_path: Optional[str] = None, gdb_log: Optional[str] = None, variables: bool = False) -> int:
    """Print the core's event on ``out``, the triage on ``err`` (and schema v1 JSON to ``json_path``); 0."""
    from ..corefile.triage import triage_lines
    from ..output import report

    source, doc = read_core(path, executable, sysroot, all_threads, native_all, with_gdb, gdb_path, gdb_log, err,
                            variables)
    source.close()
    # --json -: the document is standard output, the text goes to standard error (as for stack)
    report.Printer(err if is_stdout(json_path) else out, native_all=native_all, full=full).event(doc.events[0])
    for line in triage_lines(doc):
        report.write_note(err, line)
    if json_path:
        report.write(doc, json_path)
    return 0


def run_core_report(path: str, executable: Optional[str], sysroot: Optional[str], output: str) -> int:
    """``tfnative report --core``: the Markdown bug report of a core, written to ``output``; 0."""
    from ..corefile import report as corereport  # the doctor's ELF readers: not on core's path

    source, doc = read_core(path, executable, sysroot, all_threads=False, native_all=False)
    try:
        text = corereport.markdown(source, doc, path)
    finally:
        source.close()
    write_output(output, text.encode())
    return 0


@click.command("core")
@click.argument("core_path", metavar="CORE")
@click.argument("executable", required=False)
@click.option("--sysroot", metavar="DIR", help="Prefix every mapped path with DIR (a core from another machine).")
@click.option("--all-threads", "-a", is_flag=True, help="Also threads that run no Python.")
@click.option("--native-all", is_flag=True, help="Keep interpreter glue frames.")
@click.option("--full", is_flag=True, help="Do not fold runs of TensorFlow-internal frames in the text report.")
@click.option("--json", "json_path", metavar="FILE", help="Write the report as JSON (schema v1) to FILE.")
@click.option("--with-gdb", is_flag=True,
              help="Read the core through gdb (slower): source lines and inlined frames where a library has "
                   "DWARF. Also done by itself where a library on a stack has DWARF.")
@click.option("--gdb", "gdb_path", metavar="PATH", help="gdb executable (default: gdb on PATH).")
@click.option("--gdb-log", metavar="FILE", help="Append the raw MI conversation to FILE.")
@click.option("--locals", "variables", is_flag=True,
              help="Show each Python frame's arguments and locals (short reprs read from the core).")
def core_cmd(core_path: str, executable: Optional[str], sysroot: Optional[str], all_threads: bool,
             native_all: bool, full: bool, json_path: Optional[str], with_gdb: bool, gdb_path: Optional[str],
             gdb_log: Optional[str], variables: bool) -> None:
    """Print the mixed stacks of a crashed process from its CORE dump (.zst, .lz4, .xz too)."""
    run_command(lambda: run_core(core_path, executable, sysroot, all_threads, native_all, full, json_path, sys.stdout,
                                 with_gdb=with_gdb or bool(gdb_path or gdb_log), gdb_path=gdb_path, gdb_log=gdb_log,
                                 variables=variables))


def register(main: click.Group) -> None:
    """Add ``tfnative core`` to the command group."""
    main.add_command(core_cmd)
