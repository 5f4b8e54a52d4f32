"""``tfnative core``: the mixed stacks of a crashed process from its core dump (one event of kind "core")."""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING, Any, List, Optional, TextIO, Tuple

import click

from ..files import is_stdout, write_output
from .util import repro_minimize, repro_options, repro_path, run_command, view_options

if TYPE_CHECKING:  # the readers load when core runs (``tfnative --version`` pays for none of them)
    from ..core.model import Document
    from ..corefile.capture import CoreOptions
    from ..corefile.source import CoreSource


def core_document(opts: CoreOptions, err: TextIO = sys.stderr, keep_open: bool = False
                  ) -> Tuple[CoreSource, Document]:
    """The core's source and its document: what the core gives (``corefile/capture.read_core``) made into one
    event of kind "core", the process's end (the signal it died of), its triage and, where the signal came from
    outside, the hang verdict (``analysis/event.core_document``).  The source is closed once the capture is
    taken, before it is analysed, unless ``keep_open`` (the caller reads more of it, then closes it)."""
    from ..analysis.event import core_document as analysed
    from ..corefile.capture import read_core

    source, taken = read_core(opts, err)
    if not keep_open:
        source.close()
    try:
        return source, analysed(taken.capture, taken.argv, taken.pid, taken.said, opts.native_all, taken.log)
    except BaseException:
        source.close()
        raise


def run_core(opts: CoreOptions, out: TextIO, err: TextIO = sys.stderr, repro: Optional[str] = None,
             repro_check: bool = True, minimize: Optional[Tuple[int, float]] = None) -> int:
    """Print the core's event on ``out``, the triage on ``err`` (and schema v1 JSON to ``--json``); 0.
    ``repro``: write the crash's reproducer there (``attach/repro.py``), run by the core's Python;
    ``minimize``: then shrink it within those bounds (tries, seconds)."""
    from ..output import report

    if repro is not None:
        from ..core.tensorflow.kernelinputs import read_whole_tensors

        read_whole_tensors()  # the inputs' values, for the reproducer's data file
    _source, doc = core_document(opts, err)
    how = None
    if repro is None:  # whether a script could be had, and how: decided before anything is printed
        from ..attach.repro import hint

        words: List[str] = [opts.path] + ([opts.executable] if opts.executable else []) + (
            ["--sysroot", opts.sysroot] if opts.sysroot else [])
        how = hint(doc, "tfnative core %s" % " ".join(shlex.quote(w) for w in words))
    # --json -: the document is standard output, the text goes to standard error (as for stack)
    report.Printer(err if is_stdout(opts.json_path) else out, native_all=opts.native_all,
                   full=opts.full).event(doc.events[0])
    if repro is not None:
        from ..attach import repro as reproducer
        from ..attach.reprominimize import Bounds

        reproducer.make(doc, repro, reproducer.python_of(doc, opts.executable), repro_check, err,
                        None if minimize is None else Bounds(*minimize))
    elif how is not None:
        err.write(how + "\n")
    for line in report.core_triage_lines(doc):  # the triage comes last
        report.write_note(err, line)
    if opts.json_path:
        report.write(doc, opts.json_path)
    return 0


def run_core_report(path: str, executable: Optional[str], sysroot: Optional[str], output: str) -> int:
    """``tfnative report --core``: the Markdown bug report of a core, written to ``output``; 0."""
    from ..corefile import reportfacts  # the doctor's ELF readers: not on core's path
    from ..corefile.capture import CoreOptions
    from ..output import bugreport

    source, doc = core_document(CoreOptions(path, executable, sysroot), keep_open=True)
    try:
        text = bugreport.markdown(doc, source.argv(), reportfacts.facts(source, doc, path),
                                  reportfacts.library_verdicts(source), None, summary=bugreport.core_summary(doc))
    finally:
        source.close()
    write_output(output, text.encode())
    return 0


@click.command("core")
@click.argument("core_path", metavar="CORE")
@click.argument("executable", required=False)
@click.option("--sysroot", metavar="DIR", help="Prefix every mapped path with DIR (a core from another machine).")
@view_options()
@click.option("--json", "json_path", metavar="FILE", help="Write the report as JSON (schema v1) to FILE.")
@click.option("--with-gdb", is_flag=True,
              help="Read the core through gdb (slower): source lines and inlined frames where a library has "
                   "DWARF. Also done by itself where a library on a stack has DWARF.")
@click.option("--gdb", "gdb_path", metavar="PATH", help="gdb executable (default: gdb on PATH).")
@click.option("--gdb-log", metavar="FILE", help="Append the raw MI conversation to FILE.")
@click.option("--locals", "variables", is_flag=True,
              help="Show each Python frame's arguments and locals (short reprs read from the core), and those "
                   "of your own kernel's frames where its library has DWARF (through gdb).")
@repro_options
def core_cmd(core_path: str, executable: Optional[str], sysroot: Optional[str], all_threads: bool,
             native_all: bool, full: bool, json_path: Optional[str], with_gdb: bool, gdb_path: Optional[str],
             gdb_log: Optional[str], variables: bool, **repro: Any) -> None:
    """Print the mixed stacks of a crashed process from its CORE dump (.zst, .lz4, .xz too)."""
    def go() -> int:
        from ..corefile.capture import CoreOptions
        from ..gdb.options import GdbOptions

        opts = CoreOptions(core_path, executable, sysroot, all_threads=all_threads, native_all=native_all,
                           full=full, json_path=json_path, with_gdb=with_gdb or bool(gdb_path or gdb_log),
                           variables=variables, gdb=GdbOptions.of(gdb_path, gdb_log))
        path, check = repro_path(repro["repro"]), not repro["no_repro_check"]
        minimize = repro_minimize(repro["repro_minimize"], repro["repro_minimize_tries"],
                                  repro["repro_minimize_seconds"], path, check)
        return run_core(opts, sys.stdout, repro=path, repro_check=check, minimize=minimize)

    run_command(go)

