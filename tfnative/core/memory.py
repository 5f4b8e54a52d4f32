"""Target memory as every reader sees it: the ``Memory`` and ``UnwindMemory`` protocols, the bounds of user space.

A source (a ptrace-held pid, gdb at a stop, a core file) gives the readers of
``tfnative.core`` one object with ``read(address, size) -> bytes``; a read
that cannot be satisfied, or any address at or above ``USER_SPACE_END``,
raises ``MemoryError``.  The snapshot path (``tfnative/snapshot/pipeline.py``)
also asks a source's memory how many reads came from the running process
after it was let go (``UnwindMemory.late_reads``).  Each implementation
subclasses its protocol, so that the type checker holds it to it:
``tfnative.sources.procmem.Memory`` (``/proc/PID/mem``) and
``tfnative.corefile.reader.Core`` (a core's segments) are ``UnwindMemory``;
``tfnative_gdb.capture.GdbMemory`` (gdb's inferior) is ``Memory``.  Every
reader bounds its walks itself.
"""

from typing import Protocol

# The end of x86-64 Linux user space as processes get it (4-level paging; the kernel maps higher only
# when asked with a hint above it): every reader of target memory takes no address at or above it.
USER_SPACE_END = 1 << 47


def aligned_pointer(value: int) -> bool:
    """Whether ``value`` can be a pointer to a C++ object in a process's user space: 8-aligned, past the zero
    page, below ``USER_SPACE_END``.  TensorFlow's readers check every word they follow with it."""
    return value % 8 == 0 and 0x1000 <= value < USER_SPACE_END


class Memory(Protocol):
    """What a source gives the readers: bytes at an address of the target."""

    def read(self, addr: int, size: int) -> bytes: ...


class UnwindMemory(Memory, Protocol):
    """A source's memory as the snapshot path reads it (``sources/base.py``'s ``Source.memory``).

    ``late_reads``: how many reads were served from the running process after the hold that copied it let the
    process go (``procmem.Memory``): the snapshot path marks what such reads gave (``after_release``).  It
    stays 0 where nothing runs on while the memory is read (a core, a process gdb holds).
    """

    late_reads: int
