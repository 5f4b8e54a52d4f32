"""``watch --on-hang core``: a core file of every process of a hung job, which then runs on.

There is no core writer of tfnative's own (``attach/keepcore.py`` has gdb's ``gcore`` write the core of a
process a session already holds); here each process is attached by a gdb of its own in batch mode
(``gdb -batch -p PID -ex "gcore FILE"``), which writes the core and detaches.  Each gdb is bounded by
``GCORE_TIMEOUT`` and ended if it overruns; the process is left running (``ptrace.ensure_not_stopped``).
"""

from __future__ import annotations

import os
import subprocess
from typing import List, Optional, Sequence, TextIO

from ..errors import TfnativeError
from ..gdb.mi import find_gdb
from ..sources import ptrace

GCORE_TIMEOUT = 600.0


def write_cores(pids: Sequence[int], directory: str, number: int, gdb_path: Optional[str], err: TextIO) -> List[str]:
    """``DIRECTORY/core-N.PID`` of each pid (``number``: the report's); the paths written.  A process gdb could
    not dump is said on ``err``."""
    try:
        gdb = find_gdb(gdb_path)
    except TfnativeError as exc:
        err.write("tfnative: watch: no core written: %s\n" % exc)
        return []
    written = []
    for pid in pids:
        path = os.path.join(directory, "core-%d.%d" % (number, pid))
        try:
            subprocess.run([gdb, "-nx", "-batch", "-p", str(pid), "-ex", "gcore %s" % path],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=GCORE_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:  # run() killed gdb: the kernel let the process go
            err.write("tfnative: watch: gdb did not write the core of %d within %.0f s\n" % (pid, GCORE_TIMEOUT))
        except OSError as exc:
            err.write("tfnative: watch: cannot run gdb: %s\n" % (exc.strerror or exc))
            break
        finally:
            ptrace.ensure_not_stopped(pid)
        if os.path.exists(path) and os.path.getsize(path) > 0:
            written.append(path)
        else:
            err.write("tfnative: watch: no core of process %d\n" % pid)
    err.flush()
    return written
