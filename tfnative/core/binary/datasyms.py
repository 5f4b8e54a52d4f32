"""Named symbols of any type in a file (``_PyRuntime``, ``Py_Version``...): their file addresses, looked up in
``.dynsym``, then ``.symtab``, the answer kept per file as it is now; a data symbol's extent."""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
from contextlib import contextmanager
from typing import Dict, Generator, Iterator, Optional, Sequence, Tuple

from ...files import atomic_write, cache_dir
from .elf import SHT_DYNSYM, SHT_SYMTAB, ElfFile
from .mapfile import map_file
from .symindex import CACHE_VERSION


def data_symbols(path: str, names: Sequence[str]) -> Dict[str, int]:
    """File addresses of the named symbols of any type (``_PyRuntime``, ``Py_Version``...).

    Looks in ``.dynsym``, then ``.symtab``; a name missing from both is
    missing from the answer.  Meant for small files (an interpreter), since it
    reads every symbol.
    """
    entry = _symbols_entry(path, names)
    if entry is not None:
        try:
            with open(entry) as f:
                cached = json.load(f)
            if isinstance(cached, dict) and all(isinstance(v, int) for v in cached.values()):
                return {k: v for k, v in cached.items() if k in names}
        except (OSError, ValueError):
            pass
    found = _data_symbols(path, names)
    if entry is not None:
        try:
            atomic_write(entry, [json.dumps(found).encode()])
        except OSError:
            pass
    return found


def _symbols_entry(path: str, names: Sequence[str]) -> Optional[str]:
    """Where ``data_symbols``'s answer for this file as it is now (path, size, mtime, inode) is kept: a
    snapshot asks it of the interpreter and of libstdc++ each time, and reading all their symbols costs
    ~20 ms.  None where the file cannot be seen."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    h = hashlib.sha1(("%s\0%d\0%d\0%d\0%d\0" % (os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino,
                                                  st.st_dev)).encode())
    h.update("\0".join(sorted(names)).encode())
    return os.path.join(cache_dir(), "index", "syms-%s.v%d.json" % (h.hexdigest(), CACHE_VERSION))


def _defined_symbols(mm: mmap.mmap, elf: ElfFile) -> Generator[Tuple[bytes, int, int], None, None]:
    """``(name, value, size)`` of each defined, named symbol of a 64-bit file: ``.dynsym``'s, then ``.symtab``'s
    (a caller that has found what it wants stops early)."""
    entsize = struct.calcsize(elf.sym_fmt)
    for kind in (SHT_DYNSYM, SHT_SYMTAB):
        for s in elf.sections:
            if s.type != kind or not s.size or not 0 < s.link < len(elf.sections):
                continue
            stroff = elf.sections[s.link].offset
            view = memoryview(mm)[s.offset: s.offset + s.size // entsize * entsize]
            try:
                for st_name, _i, _o, st_shndx, st_value, st_size in struct.iter_unpack(elf.sym_fmt, view):
                    if st_shndx != 0 and st_name:
                        yield elf.cstr(stroff + st_name), st_value, st_size
            finally:
                view.release()


@contextmanager
def _symbols_of(path: str) -> Iterator[Iterator[Tuple[bytes, int, int]]]:
    """``_defined_symbols`` of the file at ``path`` (none where it is not 64-bit), the file mapped meanwhile."""
    with map_file(path) as mm:
        elf = ElfFile(mm, path)
        if not elf.is64:
            yield iter(())
            return
        symbols = _defined_symbols(mm, elf)
        try:
            yield symbols
        finally:
            symbols.close()


def _data_symbols(path: str, names: Sequence[str]) -> Dict[str, int]:
    wanted = {n.encode(): n for n in names}
    found: Dict[str, int] = {}
    with _symbols_of(path) as symbols:
        for raw, value, _size in symbols:
            name = wanted.get(raw)
            if name is not None and name not in found:
                found[name] = value
                if len(found) == len(wanted):
                    break
    return found


def data_symbol_extent(path: str, name: str) -> Optional[Tuple[int, int]]:
    """``(file address, size)`` of the data symbol ``name`` (``_PyRuntime``: where the interpreter's runtime
    state lies), from ``.dynsym``, then ``.symtab``; None where neither defines it with a size."""
    want = name.encode()
    with _symbols_of(path) as symbols:
        return next(((value, size) for raw, value, size in symbols if size and raw == want), None)
