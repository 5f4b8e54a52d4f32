"""The names TensorFlow gave its threads, read from its thread-name registry in the target's memory.

TensorFlow starts its pools' threads through ``tsl::Env::StartThread``; the thread records the name it was
given (``tf_Compute`` for the inter-op pool, ``tf_graph_runner``, a tf.data pool's) in a map from
``std::thread::id`` to name (``GetThreadNameRegistry()::thread_name_registry``, a function-local static
pointer to a ``std::map`` in ``libtensorflow_framework``).  TensorFlow 2.16 to 2.20 do not give those names
to the OS threads (every thread shows the process's name), but the registry holds them: it says which pool
an idle worker belongs to where no frame does.

Nothing here is taken from a table of versions: the registry's symbol is found in the library's symbol
table by what it is called, and the map is read as libstdc++ lays out a ``std::map`` (a red-black tree
whose header points back at itself) only where every check of that layout holds; a registry of another
shape (newer TensorFlow keeps an ``absl::flat_hash_map``) gives no names.  ``std::thread::id`` is the
thread's ``pthread_t``, which on x86-64 glibc is its thread pointer (``fs_base``).  Every walk is bounded.
"""

import mmap
import os
import struct
from typing import Callable, Dict, Iterable, List, Optional, Protocol, Tuple

from ..binary.elf import SHT_DYNSYM, SHT_SYMTAB, ElfError, ElfFile
from ..binary.mapfile import map_file

Reader = Callable[[int, int], bytes]

MAX_THREADS = 4096  # registry entries read at most
MAX_NAME = 256
_SYMBOL_PARTS = (b"GetThreadNameRegistry", b"thread_name_registry")


def registry_symbols(path: str) -> Dict[str, int]:
    """File addresses of the thread-name registry's pointer(s) in ``path`` (``{}``: none): the symbols whose
    (mangled) names hold both ``GetThreadNameRegistry`` and ``thread_name_registry`` (not the guard
    variable ``_ZGV...``).  The names are found in the string tables, then their symbols by the string's
    offset (a byte search, not a walk over the library's million symbols)."""
    found: Dict[str, int] = {}
    with map_file(path) as mm:
        elf = ElfFile(mm, path)
        if not elf.is64:
            return found
        entsize = struct.calcsize(elf.sym_fmt)
        for sym in elf.sections:
            if sym.type not in (SHT_SYMTAB, SHT_DYNSYM) or not 0 < sym.link < len(elf.sections):
                continue
            strtab = elf.sections[sym.link]
            for name, off in _names_in(mm, strtab.offset, strtab.offset + strtab.size):
                needle = struct.pack(elf.endian + "I", off)
                pos = mm.find(needle, sym.offset, sym.offset + sym.size)
                while pos >= 0:
                    if (pos - sym.offset) % entsize == 0:
                        _n, _info, _other, shndx, value, _size = struct.unpack_from(elf.sym_fmt, mm, pos)
                        if shndx != 0 and name not in found:
                            found[name] = value
                        break
                    pos = mm.find(needle, pos + 1, sym.offset + sym.size)
    return found


def _names_in(mm: mmap.mmap, lo: int, hi: int) -> List[Tuple[str, int]]:
    """(name, offset in the string table) of the registry's symbol names in the string table at [lo, hi)."""
    out: List[Tuple[str, int]] = []
    pos = mm.find(_SYMBOL_PARTS[0], lo, hi)
    while pos >= 0 and len(out) < 16:
        start = mm.rfind(b"\0", lo, pos) + 1
        end = mm.find(b"\0", pos, hi)
        end = end if end >= 0 else hi
        name = mm[start:end]
        if name.startswith(b"_ZZ") and _SYMBOL_PARTS[1] in name:
            out.append((name.decode("ascii", "replace"), start - lo))
        pos = mm.find(_SYMBOL_PARTS[0], end, hi)
    return out


def _u64(read: Reader, addr: int) -> int:
    value: int = struct.unpack("<Q", read(addr, 8))[0]
    return value


def read_registry(read: Reader, pointer_addr: int) -> Dict[int, str]:
    """``{pthread_t: name}`` from the registry whose pointer is at ``pointer_addr`` (a run-time address);
    ``{}`` where it is unset, unreadable, or not a ``std::map`` as libstdc++ lays it out.

    libstdc++'s ``std::map``: the comparator (8 bytes with padding), then the header node (color, parent =
    the root, left = the leftmost node, right = the rightmost node) and the node count; each node: color,
    parent, left, right, then the value (``std::thread::id``, then ``std::string``: data pointer, length,
    16-byte inline buffer)."""
    try:
        tree = _u64(read, pointer_addr)
        if not tree:
            return {}
        header = tree + 8
        _color, root, leftmost, rightmost, count = struct.unpack("<IxxxxQQQQ", read(header, 40))
        if count > MAX_THREADS:
            return {}
        if count == 0:
            return {}
        if _u64(read, root + 8) != header:  # the root's parent is the header
            return {}
        out: Dict[int, str] = {}
        stack: List[int] = []
        node = root
        visited = 0
        first = None
        while stack or node:  # in-order, bounded by the count
            while node:
                if len(stack) > 64:  # a red-black tree of MAX_THREADS nodes is far shallower
                    return {}
                stack.append(node)
                node = _u64(read, node + 16)
            node = stack.pop()
            visited += 1
            if visited > count:
                return {}
            if first is None:
                first = node
            key, data, length = struct.unpack("<QQQ", read(node + 32, 24))
            if length > MAX_NAME:
                return {}
            raw = read(data, length) if length else b""
            if not all(32 <= b < 127 for b in raw):
                return {}
            out[key] = raw.decode("ascii")
            last = node
            node = _u64(read, node + 24)
        if visited != count or first != leftmost or last != rightmost:
            return {}
        return out
    except (MemoryError, OSError, struct.error, ValueError):
        return {}


def registered_names(read: Reader, addresses: List[int], pthreads: Dict[int, Optional[int]]) -> Dict[int, str]:
    """``{tid: name}`` for the threads (``pthreads``: tid -> ``pthread_t``, i.e. ``fs_base``) that the
    registry at any of ``addresses`` (run-time addresses of the registry's pointer) names."""
    by_pthread: Dict[int, str] = {}
    for addr in addresses:
        by_pthread.update(read_registry(read, addr))
    return {tid: by_pthread[p] for tid, p in pthreads.items() if p is not None and p in by_pthread}


class Target(Protocol):
    """What finding and reading the registry needs of a process, however it is held (ptrace's memory in the
    pipeline, ``gdb.Inferior``'s in gdb's capture): its memory, its mapped files, a file's load bias, and the
    run-time address of a symbol where a debugger knows it."""

    def read(self, addr: int, size: int) -> bytes:
        """``size`` bytes at ``addr``; raises OSError (or MemoryError) where they cannot be read."""
        ...

    def files(self) -> Iterable[str]:
        """The paths of the files mapped into the process (or loaded by the debugger)."""
        ...

    def bias(self, path: str) -> Optional[int]:
        """The load bias of the mapped file ``path`` (None: not known)."""
        ...

    def symbol_address(self, name: str) -> Optional[int]:
        """The run-time address of the symbol ``name`` (None: not known; the file's address plus its bias
        is taken then)."""
        ...


def thread_names(target: Target, pthreads: Dict[int, Optional[int]],
                 symbols: Callable[[str], Dict[str, int]] = registry_symbols) -> Dict[int, str]:
    """tid -> the name TensorFlow's thread-name registry gives the thread (``pthreads``: tid -> ``pthread_t``,
    i.e. ``fs_base``), from the registry of each ``libtensorflow_framework`` the process maps; ``{}`` where
    none is found.  ``symbols`` finds the registry's pointer(s) in a file (``registry_symbols``, or a cached
    copy of it)."""
    addresses: List[int] = []
    for path in target.files():
        if not os.path.basename(path).startswith("libtensorflow_framework"):
            continue
        try:
            names = symbols(path)
        except (OSError, ValueError, ElfError):
            continue
        for name, vaddr in names.items():
            addr = target.symbol_address(name)
            if not addr:
                bias = target.bias(path)
                addr = vaddr + bias if bias is not None else None
            if addr and addr not in addresses:
                addresses.append(addr)
    return registered_names(target.read, addresses, pthreads) if addresses else {}
