"""What every snapshot source gives the one snapshot path (``tfnative/snapshot/pipeline.py``): the ``Source`` protocol.

A source is a stopped process seen one way (a live pid whose registers
ptrace or gdb gave, a core file): its memory, the files it maps as modules
(``modules.py``), its threads' registers, its executable, the code no file
backs, the mapping around an address, and the thread ids inside its PID
namespace.  The snapshot path reads these and never asks which kind of
source it has.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Protocol, Tuple

from ..core.memory import UnwindMemory
from .modules import Library

# (tid, name, registers by gdb's names) of a stopped thread
ThreadRegs = Tuple[int, str, Dict[str, int]]


class Source(Protocol):
    """A stopped process as the snapshot path reads it.

    ``pid``: the process id the capture names; ``memory``: its memory
    (``read`` raises ``MemoryError`` where the source lacks bytes);
    ``executable``: the executable's path on this host (None: unknown, the
    libraries keep the names of their files); ``partial_stacks``: a thread
    whose native unwinding stops early is still shown, cut, when its Python
    frames were found (False: the snapshot raises ``Unsupported`` and the
    caller asks gdb); ``nonblocking``: the process runs while it is read
    (``stack --no-pause``): its threads' registers are only rsp and rip,
    and a native unwind that stops where they end is shown cut.
    """

    pid: int
    partial_stacks: bool
    nonblocking: bool

    @property
    def memory(self) -> UnwindMemory: ...

    @property
    def executable(self) -> Optional[str]: ...

    def libraries(self) -> List[Library]:
        """The mapped files with executable code, as modules (named by the loader's list later)."""
        ...

    def extra_code(self) -> List[Library]:
        """Code that is no file's: the vDSO, executable anonymous mappings (JIT code)."""
        ...

    def mapping_of(self, addr: int) -> Optional[Tuple[int, int]]:
        """The (start, end) of the mapping holding ``addr`` (None: none): bounds a stack."""
        ...

    def threads(self) -> List[ThreadRegs]:
        """(tid, name, registers) of each stopped thread, in the order they are shown."""
        ...

    def namespace_tids(self) -> Dict[int, int]:
        """Host tid -> tid inside the process's PID namespace ({}: the same namespace, or unknown)."""
        ...
