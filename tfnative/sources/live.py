"""A live pid as a snapshot source: ``/proc/PID/mem``, ``/proc/PID/maps``, its vDSO, registers given.

The threads' registers come from whoever holds them stopped: ptrace
(``ptrace.Frozen``, ``snapshot.take``) or gdb at a stop
(``snapshot.of_stopped``); they are set in ``registers``.  The mapped files
are read once per source (``libraries``: before the threads are held),
``/proc/PID/maps`` once for the code no file backs and for stack bounds.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from ..core import procfs
from ..core.threads import namespace_tids
from .base import ThreadRegs
from .modules import Library, Mappings, anonymous_code, file_root, of_pid, vdso_of
from .procmem import Memory


class LiveSource:
    """The process ``pid``, stopped by the caller; opening its memory raises ``OSError``."""

    partial_stacks = False  # gdb unwinds what CFI alone cannot: the caller falls back to it
    nonblocking = False  # held while read (``snapshot.take_nonblocking`` sets it: read as it runs)

    def __init__(self, pid: int, registers: Optional[List[ThreadRegs]] = None) -> None:
        self.pid = pid
        self.memory = Memory(pid, cache=True)
        self.registers: List[ThreadRegs] = registers or []
        self._libs: Optional[List[Library]] = None
        self._rows: Optional[List[procfs.Mapping]] = None
        self._mapping: Optional[Mappings] = None

    @property
    def executable(self) -> Optional[str]:
        try:
            return file_root(self.pid) + os.path.realpath("/proc/%d/exe" % self.pid)
        except OSError:
            return None

    def libraries(self) -> List[Library]:
        if self._libs is None:
            rows = self._maps()
            self._libs = of_pid(self.pid, rows or None)  # /proc/PID/maps read once
        return self._libs

    def _maps(self) -> List[procfs.Mapping]:
        if self._rows is None:
            try:
                self._rows = procfs.maps(self.pid)
            except OSError:
                self._rows = []
        return self._rows

    def extra_code(self) -> List[Library]:
        return vdso_of(self.pid, self.memory) + anonymous_code(self._maps())

    def mapping_of(self, addr: int) -> Optional[Tuple[int, int]]:
        return self.mappings()(addr)

    def mappings(self) -> Mappings:
        """The mappings, sorted (made once, from the ``/proc/PID/maps`` read first)."""
        if self._mapping is None:
            self._mapping = Mappings(self._maps())
        return self._mapping

    def threads(self) -> List[ThreadRegs]:
        return self.registers

    def namespace_tids(self) -> Dict[int, int]:
        return namespace_tids(self.pid)

    def close(self) -> None:
        self.memory.close()
