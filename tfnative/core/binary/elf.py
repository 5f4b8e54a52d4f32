"""The ELF reader: the one parse of an ELF file's header, program headers, section headers and build-id note.

``elf_header``, ``program_headers``, ``first_load_vaddr`` and ``note_build_id`` read a buffer (a file, a first
page, a core's or the target's copy); ``ElfFile`` reads an mmapped file (32/64-bit, little or big endian).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Tuple, Union

from .mapfile import map_file

STT_FUNC = 2
STT_GNU_IFUNC = 10
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_NOTE = 7
SHT_NOBITS = 8
SHT_DYNSYM = 11
PT_LOAD = 1
NT_GNU_BUILD_ID = 3
PAGE = mmap.PAGESIZE


class ElfError(Exception):
    """The file is not an ELF file this module can read."""


class ElfTruncated(ElfError):
    """An ELF file cut short: its header tables run past its end."""


@dataclass(eq=False, repr=False)
class Section:
    """One section header, with its name resolved."""

    __slots__ = ("name", "type", "flags", "addr", "offset", "size", "link", "info", "addralign", "entsize")

    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int

    def __repr__(self) -> str:
        return f"Section({self.name}, addr=0x{self.addr:x}, size=0x{self.size:x})"



class ElfHeader(NamedTuple):
    """The fields of an ELF header this package reads."""

    is64: bool
    endian: str  # "<" or ">"
    e_type: int  # ET_EXEC 2, ET_DYN 3, ET_CORE 4
    e_machine: int
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int


class Segment(NamedTuple):
    """One program header (the 64-bit field order whatever the class)."""

    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    align: int


PT_NOTE = 4
PF_X = 1
_new_header = tuple.__new__  # ElfHeader without its keyword-taking __new__: the hold path reads one per file


def elf_header(buf: Union[bytes, memoryview, mmap.mmap], path: str) -> ElfHeader:
    """The ELF header at the start of ``buf`` (a file, a first page, a core's or the target's copy): the one parse.

    Raises ``ElfError`` when ``buf`` does not start with one of a class and byte order this package reads.
    """
    if len(buf) < 52 or buf[:4] != b"\x7fELF":
        raise ElfError(f"{path}: not an ELF file")
    ei_class, ei_data = buf[4], buf[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise ElfError(f"{path}: unsupported ELF class/data {ei_class}/{ei_data}")
    is64 = ei_class == 2
    e = "<" if ei_data == 1 else ">"
    if is64:
        if len(buf) < 64:
            raise ElfTruncated(f"{path}: truncated ELF header")
        (e_type, mach, _ver, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum, shentsize, shnum,
         shstrndx) = struct.unpack_from(e + "HHIQQQIHHHHHH", buf, 16)
    else:
        (e_type, mach, _ver, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum, shentsize, shnum,
         shstrndx) = struct.unpack_from(e + "HHIIIIIHHHHHH", buf, 16)
    return _new_header(ElfHeader, (is64, e, e_type, mach, phoff, phentsize, phnum, shoff, shentsize, shnum,
                                   shstrndx))


def _check_table(buf: Union[bytes, memoryview, mmap.mmap], hdr: ElfHeader, path: str) -> None:
    if hdr.phnum and hdr.phentsize < (56 if hdr.is64 else 32):
        raise ElfError(f"{path}: program headers of {hdr.phentsize} bytes")
    if hdr.phoff + hdr.phnum * hdr.phentsize > len(buf):
        raise ElfTruncated(f"{path}: truncated program header table")


def program_headers(buf: Union[bytes, memoryview, mmap.mmap], hdr: ElfHeader, path: str) -> List[Segment]:
    """The program headers of ``hdr`` in ``buf`` (which starts where the ELF header does): the one parse.

    Raises ``ElfTruncated`` when the table runs past ``buf`` (a first page too short: read more).
    """
    _check_table(buf, hdr, path)
    out = []
    if hdr.is64:  # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align
        fmt = hdr.endian + "IIQQQQQQ"
        for i in range(hdr.phnum):
            r = struct.unpack_from(fmt, buf, hdr.phoff + i * hdr.phentsize)
            out.append(Segment(r[0], r[1], r[2], r[3], r[5], r[6], r[7]))
    else:  # p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_flags, p_align
        fmt = hdr.endian + "IIIIIIII"
        for i in range(hdr.phnum):
            r = struct.unpack_from(fmt, buf, hdr.phoff + i * hdr.phentsize)
            out.append(Segment(r[0], r[6], r[1], r[2], r[4], r[5], r[7]))
    return out


def first_load_vaddr(buf: Union[bytes, memoryview, mmap.mmap], hdr: ElfHeader, path: str) -> int:
    """The page-aligned vaddr of the first ``PT_LOAD`` (0 for a shared library or a PIE; none: 0).

    What the loader maps at file offset 0: a mapping's start minus this is the file's load bias.  Reads
    the table as ``program_headers`` does (same checks) but only each entry's type up to the first
    ``PT_LOAD``: the ``stack`` hold path asks it of every mapped file, from the file's first page.
    """
    _check_table(buf, hdr, path)
    type_fmt, vaddr_fmt, vaddr_at = hdr.endian + "I", hdr.endian + ("Q" if hdr.is64 else "I"), (16 if hdr.is64 else 8)
    for i in range(hdr.phnum):
        off = hdr.phoff + i * hdr.phentsize
        if struct.unpack_from(type_fmt, buf, off)[0] == PT_LOAD:
            vaddr: int = struct.unpack_from(vaddr_fmt, buf, off + vaddr_at)[0]
            return vaddr & ~(PAGE - 1)
    return 0


def note_build_id(notes: Union[bytes, memoryview, mmap.mmap], endian: str) -> Optional[str]:
    """The GNU build-id (hex) in a run of ELF notes (a ``PT_NOTE`` or ``SHT_NOTE``'s bytes), or None."""
    off, end = 0, len(notes)
    while off + 12 <= end:
        namesz, descsz, ntype = struct.unpack_from(endian + "III", notes, off)
        name_start = off + 12
        desc_start = name_start + ((namesz + 3) & ~3)
        if ntype == NT_GNU_BUILD_ID and bytes(notes[name_start:name_start + namesz]) == b"GNU\0":
            if desc_start + descsz > end:
                return None
            return bytes(notes[desc_start:desc_start + descsz]).hex()
        off = desc_start + ((descsz + 3) & ~3)
    return None


class ElfFile:
    """Headers of an mmapped ELF file (32/64-bit, little or big endian): the one ELF reader.

    ``sections=False`` reads the program headers only (``segments``), which is
    all a process's memory map needs and skips most of the cost over the
    libraries a TensorFlow process maps.
    """

    def __init__(self, mm: mmap.mmap, path: str, sections: bool = True) -> None:
        self.mm = mm
        self.path = path
        try:
            self._parse(mm, path, sections)
        except struct.error:  # a header table that runs past the end: every bound below is checked first
            raise ElfTruncated(f"{path}: truncated ELF headers") from None

    def _parse(self, mm: mmap.mmap, path: str, sections: bool) -> None:
        hdr = elf_header(mm, path)
        self.header = hdr
        self.is64 = hdr.is64
        self.endian = e = hdr.endian
        if self.is64:
            self.shdr_fmt, self.phdr_fmt = e + "IIQQQQIIQQ", e + "IIQQQQQQ"
            self.sym_fmt = e + "IBBHQQ"
        else:
            self.shdr_fmt, self.phdr_fmt = e + "IIIIIIIIII", e + "IIIIIIII"
            self.sym_fmt = e + "IIIBBH"
        self.e_type = hdr.e_type
        self.e_machine = hdr.e_machine
        self.phoff, self.phentsize, self.phnum = hdr.phoff, hdr.phentsize, hdr.phnum
        shoff, shentsize, shnum, shstrndx = hdr.shoff, hdr.shentsize, hdr.shnum, hdr.shstrndx
        self.shoff, self.shentsize, self.shnum, self.shstrndx = shoff, shentsize, shnum, shstrndx
        self.sections: List[Section] = []
        self.segments: List[Segment] = program_headers(mm, hdr, path)
        if not sections:
            return
        if shoff and shnum == 0:  # more than 0xff00 sections: the count is in section 0
            shnum = self._raw_section(0)[5]
            self.shnum = shnum
        if shnum and shentsize < struct.calcsize(self.shdr_fmt):
            raise ElfError(f"{path}: section headers of {shentsize} bytes")
        if shoff + shnum * shentsize > len(mm):
            raise ElfTruncated(f"{path}: truncated section header table")
        raw = [self._raw_section(i) for i in range(shnum)]
        if shstrndx == 0xFFFF and raw:
            shstrndx = raw[0][6]
        names_off = raw[shstrndx][4] if 0 < shstrndx < len(raw) else 0
        for r in raw:
            name = self.cstr(names_off + r[0]).decode("utf-8", "replace") if names_off else ""
            self.sections.append(Section(name, *r[1:]))

    def _raw_section(self, i: int) -> Tuple[int, ...]:
        # name, type, flags, addr, offset, size, link, info, addralign, entsize
        return struct.unpack_from(self.shdr_fmt, self.mm, self.shoff + i * self.shentsize)

    def cstr(self, off: int) -> bytes:
        end = self.mm.find(b"\0", off)
        return self.mm[off:end if end >= 0 else len(self.mm)]

    def section(self, name: str) -> Optional[Section]:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def build_id(self) -> Optional[str]:
        for s in self.sections:
            if s.type == SHT_NOTE:
                found = note_build_id(self.mm[s.offset:s.offset + s.size], self.endian)
                if found is not None:
                    return found
        return None

    def first_load_vaddr(self) -> int:
        return first_load_vaddr(self.mm, self.header, self.path)


def read_build_id(path: str) -> Optional[str]:
    """The GNU build-id of ``path`` as hex, or None."""
    with map_file(path) as mm:
        return ElfFile(mm, path).build_id()
