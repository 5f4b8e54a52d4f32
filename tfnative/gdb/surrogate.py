"""Surrogate symbol files: let gdb unwind through a huge library without reading its symbols.

gdb's minimal symbols of ``libtensorflow_cc.so.2`` cost it most of a ``gdb -p``.
A *surrogate* is a small ELF file that gdb can load instead, with
``add-symbol-file SURROGATE -o LOAD_BASE``:

* ``.eh_frame`` and ``.eh_frame_hdr``: the original bytes at the original
  vaddrs (their pointers are pc-relative), so gdb's CFI unwinder walks through
  the library exactly as with the real file;
* the executable sections (``.text``, ``.init``, ``.fini``, ``.plt``) as
  ``SHT_NOBITS`` headers with the original vaddrs and sizes: gdb maps pcs to
  the objfile, and reads code from the live process, never from this file;
* an empty ``.symtab``: every frame in the library shows as ``??`` in gdb,
  and ``ElfIndex.symbolize`` names it (breakpoints in such a library are
  address breakpoints from the same index, see ``gdb/symbols.py``).

Surrogates are cached under ``cache_dir()/surrogate``, keyed by the library's
identity (real path, size, mtime, build-id); writes are atomic.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from typing import Iterable, List, NamedTuple, Optional, Tuple

from ..core.binary.elf import SHT_NOBITS, ElfError, ElfFile
from ..core.binary.mapfile import map_file
from ..files import atomic_write, cache_dir

__all__ = ["SURROGATE_VERSION", "build_surrogate", "gdb_regex_escape", "surrogate_path"]

SURROGATE_VERSION = 2

SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
ET_DYN = 3
CFI_SECTIONS = (".eh_frame_hdr", ".eh_frame", ".debug_frame")


def _identity(path: str) -> Tuple[str, int, int]:
    st = os.stat(path)
    return os.path.realpath(path), st.st_size, st.st_mtime_ns


def surrogate_path(path: str, build_id: Optional[str] = None) -> str:
    """Where the surrogate of ``path`` is cached (it may not exist yet)."""
    real, size, mtime = _identity(path)
    h = hashlib.sha1()
    h.update(repr((SURROGATE_VERSION, real, size, mtime, build_id)).encode())
    base = os.path.basename(real).replace(".so", "")
    return os.path.join(cache_dir(), "surrogate", f"{base}-{h.hexdigest()[:20]}.debug")


def build_surrogate(path: str) -> str:
    """Path of a surrogate ELF for ``path`` (built if needed): its CFI at the original addresses, no symbols.

    Raises ``ElfError`` for a file that is not a 64-bit little-endian ELF or
    has no ``.eh_frame``.
    """
    with map_file(path) as mm:
        elf = ElfFile(mm, path)
        build_id = elf.build_id()
        out = surrogate_path(path, build_id)
        if os.path.exists(out):
            return out
        if not elf.is64 or elf.endian != "<":
            raise ElfError(f"{path}: surrogates are built for 64-bit little-endian ELF only")
        if elf.section(".eh_frame") is None and elf.section(".debug_frame") is None:
            raise ElfError(f"{path}: no .eh_frame: a surrogate could not unwind through it")
        atomic_write(out, _image(elf, mm))
    return out


class _Kept(NamedTuple):
    """A section the surrogate keeps: its header's fields, and where its bytes are in the library (None: no
    bytes, ``SHT_NOBITS``)."""

    name: str
    type: int
    flags: int
    addr: int
    data: Optional[Tuple[int, int]]  # (offset, size) in the library
    size: int
    addralign: int


def _kept(elf: ElfFile) -> List[_Kept]:
    """The library's sections the surrogate keeps: its CFI with its bytes, its code as ``SHT_NOBITS``."""
    keep = []
    for s in elf.sections:
        if s.name in CFI_SECTIONS and s.type != SHT_NOBITS and s.size:
            keep.append(_Kept(s.name, SHT_PROGBITS, s.flags, s.addr, (s.offset, s.size), s.size, s.addralign))
        elif s.flags & SHF_EXECINSTR and s.flags & SHF_ALLOC and s.size:
            keep.append(_Kept(s.name, SHT_NOBITS, s.flags, s.addr, None, s.size, s.addralign))
    return keep


def _string_table(names: List[str]) -> Tuple[bytes, List[int]]:
    """The section-name string table of ``names`` and each name's offset in it."""
    shstrtab = bytearray(b"\0")
    name_off = []
    for n in names:
        name_off.append(len(shstrtab))
        shstrtab += n.encode() + b"\0"
    return bytes(shstrtab), name_off


def _place(keep: List[_Kept], tail: List[Tuple[bytes, int]]) -> Tuple[List[Tuple[int, int]], List[object], int]:
    """The file layout after the ELF header (section data 8-aligned, then the section headers): (offset, size)
    of each kept section then of each ``tail`` (data, alignment), the blobs in order (bytes, or an (offset,
    size) of the library), and the section headers' offset."""
    pos = 64
    placed = []  # (offset, size) in the new file for each section
    blobs: List[object] = []
    for k in keep:
        if k.data is None:
            placed.append((pos, k.size))
            continue
        pad = (-pos) % max(k.addralign, 1)
        blobs.append(b"\0" * pad)
        pos += pad
        placed.append((pos, k.size))
        blobs.append(k.data)
        pos += k.size
    for data, align in tail:
        pad = (-pos) % align
        blobs.append(b"\0" * pad)
        pos += pad
        placed.append((pos, len(data)))
        blobs.append(data)
        pos += len(data)
    pad = (-pos) % 8
    blobs.append(b"\0" * pad)
    pos += pad
    return placed, blobs, pos


def _image(elf: ElfFile, mm: mmap.mmap) -> Iterable[bytes]:
    """The bytes of the surrogate, in order."""
    keep = _kept(elf)
    # section indices: 0 NULL, 1.. kept, then .symtab (the null symbol only), .strtab, .shstrtab
    symtab = b"\0" * 24
    strtab = b"\0"
    names = [k.name for k in keep] + [".symtab", ".strtab", ".shstrtab"]
    shstrtab, name_off = _string_table(names)
    placed, blobs, shoff = _place(keep, [(symtab, 8), (strtab, 1), (shstrtab, 1)])
    nsec = len(names) + 1
    strtab_i, shstrtab_i = len(keep) + 2, len(keep) + 3

    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", ET_DYN, elf.e_machine, 1, 0, 0, shoff, 0, 64, 56, 0, 64, nsec,
                               shstrtab_i)
    shdrs = [b"\0" * 64]
    for i, k in enumerate(keep):
        off, size = placed[i]
        shdrs.append(struct.pack("<IIQQQQIIQQ", name_off[i], k.type, k.flags, k.addr, off, size, 0, 0,
                                 k.addralign, 0))
    tail = [
        (".symtab", SHT_SYMTAB, 0, strtab_i, 1, 8, 24),
        (".strtab", SHT_STRTAB, 0, 0, 0, 1, 0),
        (".shstrtab", SHT_STRTAB, 0, 0, 0, 1, 0),
    ]
    for j, (_n, typ, flags, link, info, align, entsize) in enumerate(tail):
        i = len(keep) + j
        off, size = placed[i]
        shdrs.append(struct.pack("<IIQQQQIIQQ", name_off[i], typ, flags, 0, off, size, link, info, align, entsize))

    yield ehdr
    for b in blobs:
        if isinstance(b, tuple):
            off, size = b
            yield mm[off: off + size]
        else:
            assert isinstance(b, bytes)
            yield b
    yield b"".join(shdrs)


_BRE_SPECIAL = set(".[]*^$\\")


def gdb_regex_escape(text: str) -> str:
    """Escape ``text`` for gdb's ``sharedlibrary REGEX`` (a POSIX basic regular expression).

    Python's ``re.escape`` is wrong there: in GNU BRE ``\\+`` and ``\\?`` are
    operators.  Use as ``sharedlibrary ^ESCAPED$`` with the name gdb reports
    (MI ``=library-loaded`` target-name), not /proc/PID/maps' canonical path.
    """
    return "".join("\\" + c if c in _BRE_SPECIAL else c for c in text)
