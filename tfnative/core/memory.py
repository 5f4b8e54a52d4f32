"""Target memory as every reader sees it: the ``Memory`` protocol and the bounds of user space.

A source (a ptrace-held pid, gdb at a stop, a core file) gives the readers of
``tfnative.core`` one object with ``read(address, size) -> bytes``; a read
that cannot be satisfied, or any address at or above ``USER_SPACE_END``,
raises ``MemoryError``.  The sources: ``tfnative.sources.ptrace.Memory``
(``/proc/PID/mem``), ``tfnative.corefile.reader.Core`` (a core's segments)
and ``tfnative_gdb.capture.GdbMemory`` (gdb's inferior).  Every reader
bounds its walks itself.
"""

from typing import Protocol

# The end of x86-64 Linux user space as processes get it (4-level paging; the kernel maps higher only
# when asked with a hint above it): every reader of target memory takes no address at or above it.
USER_SPACE_END = 1 << 47


class Memory(Protocol):
    """What a source gives the readers: bytes at an address of the target."""

    def read(self, addr: int, size: int) -> bytes: ...
