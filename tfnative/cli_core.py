"""``tfnative core``: the mixed stacks of a crashed process from its core dump (one event of kind "core")."""

from __future__ import annotations

import signal as signal_mod
import sys
from typing import Any, Dict, Optional, TextIO

import click

from . import report, snapshot
from .cliutil import run_command
from .coresource import CoreSource
from .errors import TfnativeError


def _signal_name(signo: Optional[int]) -> Optional[str]:
    if not signo:
        return None
    try:
        return signal_mod.Signals(signo).name
    except ValueError:
        return "SIG%d" % signo


def run_core(path: str, executable: Optional[str], sysroot: Optional[str], all_threads: bool, native_all: bool,
             full: bool, json_path: Optional[str], out: TextIO) -> int:
    """Print the core's event on ``out`` (and write schema v1 JSON to ``json_path``); 0 when done."""
    source = CoreSource(path, executable, sysroot)
    try:
        try:
            result = source.stacks("all" if all_threads else "python")
        except snapshot.Unsupported as exc:
            raise TfnativeError("%s: cannot unwind: %s" % (path, exc)) from None
        notes = source.core.notes
        extra: Dict[str, Any] = {"signal": _signal_name(notes.signal or notes.threads[0].cursig),
                                 "signal_code": notes.signal_code,
                                 "fault_address": ("0x%x" % notes.fault_address
                                                   if notes.fault_address is not None else None)}
        event = report.make_event("core", result, native_all=native_all, **extra)
        doc = report.Document(argv=source.argv(), pid=notes.pid)
        doc.events.append(event)
        report.Printer(out, native_all=native_all, full=full).event(event)
        if json_path:
            doc.write(json_path, with_exit=False)
        return 0
    finally:
        source.close()


@click.command("core")
@click.argument("core_path", metavar="CORE")
@click.argument("executable", required=False)
@click.option("--sysroot", metavar="DIR", help="Prefix every mapped path with DIR (a core from another machine).")
@click.option("--all-threads", "-a", is_flag=True, help="Also threads that run no Python.")
@click.option("--native-all", is_flag=True, help="Keep interpreter glue frames.")
@click.option("--full", is_flag=True, help="Do not fold runs of TensorFlow-internal frames in the text report.")
@click.option("--json", "json_path", metavar="FILE", help="Write the report as JSON (schema v1) to FILE.")
def core_cmd(core_path: str, executable: Optional[str], sysroot: Optional[str], all_threads: bool,
             native_all: bool, full: bool, json_path: Optional[str]) -> None:
    """Print the mixed stacks of a crashed process from its CORE dump (.zst, .lz4, .xz too)."""
    run_command(lambda: run_core(core_path, executable, sysroot, all_threads, native_all, full, json_path, sys.stdout))


def register(main: click.Group) -> None:
    """Add ``tfnative core`` to the command group."""
    main.add_command(core_cmd)
