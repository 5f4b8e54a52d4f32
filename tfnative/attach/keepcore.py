"""``--core FILE``: the process's core, written by gdb at a fatal signal, before the process dies of it.

gdb's ``gcore`` writes the stopped process's memory (as ``coredump_filter``
says), a note per thread with its registers and the signal, and the mapped
files: what the kernel's own core would hold, and what ``tfnative core``
reads.  It needs no symbols, only gdb's GNU/Linux ABI, which the loop may
have set aside while the process ran (``gdb/symbols.py``'s release).

The core goes to a private temporary directory first and is then copied to
FILE by the output rules of ``files.py`` (a symlink written through, a FIFO
written in place).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Optional, TextIO

from ..errors import GdbDied, GdbError, TfnativeError, shown
from ..files import open_output
from ..gdb.mi import Gdb
from ..gdb.symbols import SymbolLoader

GCORE_TIMEOUT = 600.0


def write_core(gdb: Gdb, loader: Optional[SymbolLoader], path: str, err: TextIO,
               thread: Optional[str] = None) -> Optional[str]:
    """Write the stopped target's core to ``path``; the path, or None (with a warning on ``err``) if gdb failed.

    ``thread``: gdb's number of the thread that took the signal; selected first, it is the core's first
    thread and its signal the core's (gdb writes the selected thread first when it has a signal).
    """
    if loader is not None:
        loader.reacquire_abi()
    if thread is not None:
        try:
            gdb.command("-thread-select %d" % int(thread))
        except (GdbError, ValueError):
            pass
    tmp = tempfile.mkdtemp(prefix="tfnative-core-")
    try:
        staged = os.path.join(tmp, "core")
        try:
            gdb.console_command("gcore %s" % staged, timeout=GCORE_TIMEOUT)
        except GdbError as exc:
            err.write("tfnative: warning: gdb could not write the core: %s\n" % exc)
            return None
        if not os.path.exists(staged):
            err.write("tfnative: warning: gdb wrote no core\n")
            return None
        try:
            with open(staged, "rb") as src, open_output(path) as out:
                shutil.copyfileobj(src, out, 1 << 20)
        except OSError as exc:
            err.write("tfnative: warning: cannot write the core to %s: %s\n" % (shown(path), exc.strerror or exc))
            return None
        except TfnativeError as exc:  # open_output's own line: "cannot write PATH: why"
            err.write("tfnative: warning: %s\n" % shown(str(exc)))
            return None
        return path
    except GdbDied:
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
