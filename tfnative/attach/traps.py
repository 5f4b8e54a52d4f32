"""Take gdb's breakpoint traps out of a process when gdb could not (it was killed while they were in).

gdb writes an ``int3`` (0xCC) over the first byte of each breakpoint's
instruction and puts the byte back when it removes the breakpoint or
detaches.  Killed first, it leaves them in, and the process dies of SIGTRAP
when it next reaches one.  Code mapped from a file holds, unchanged, the
file's bytes: at an address where the process now has 0xCC and its file has
another byte, that byte is put back through ``/proc/PID/mem`` (which the
kernel lets a tracer-privileged process write, even into read-only code).
Best effort: a thread that reaches a trap before it is restored still dies.
"""

from __future__ import annotations

import os
from typing import Iterable

from ..core import procfs

INT3 = 0xCC


def restore(pid: int, addresses: Iterable[int]) -> int:
    """Put back the file's byte at each address where ``pid`` has an ``int3`` instead; how many were restored."""
    try:
        rows = [m for m in procfs.maps(pid) if m.path.startswith("/") and "x" in m.perms]
    except OSError:
        return 0
    restored = 0
    try:
        mem = os.open("/proc/%d/mem" % pid, os.O_RDWR)
    except OSError:
        return 0
    try:
        for address in sorted(set(addresses)):
            row = next((m for m in rows if m.start <= address < m.end), None)
            if row is None:
                continue
            try:
                with open(row.path, "rb") as f:
                    f.seek(row.offset + address - row.start)
                    original = f.read(1)
                current = os.pread(mem, 1, address)
            except OSError:
                continue
            if len(original) == 1 and current == bytes([INT3]) and original[0] != INT3:
                try:
                    os.pwrite(mem, original, address)
                    restored += 1
                except OSError:
                    continue
    finally:
        os.close(mem)
    return restored
