"""How to run gdb, as the command line asked (``--gdb``, ``--debuginfod``, ``--gdb-log``, ``--full-symbols``).

A module of its own, light to import: every command's options carry one, and only the commands that
start gdb import the rest of ``tfnative/gdb``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core.record import Record


@dataclass(repr=False, eq=False)
class GdbOptions(Record):
    """How to run gdb (``--gdb``, ``--debuginfod``, ``--gdb-log``, ``--full-symbols``): built once by the CLI."""

    gdb_path: Optional[str] = None
    debuginfod: bool = False
    log: Optional[str] = None
    full_symbols: bool = False

    @classmethod
    def of(cls, gdb_path: Optional[str] = None, log: Optional[str] = None) -> GdbOptions:
        """The options of a command that takes only ``--gdb`` and ``--gdb-log``."""
        return cls(gdb_path=gdb_path, log=log)
