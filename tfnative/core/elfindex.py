"""A fast, cached index of the function symbols of an ELF file.

gdb's minimal symbols of ``libtensorflow_cc.so.2`` cost it most of a
``gdb -p`` (docs/design.md, "Fast attach on stock TensorFlow").  This module reads the same ``.symtab``
(or ``.dynsym`` when the file is stripped) with ``mmap`` +
``struct.iter_unpack``, keeps only the function symbols, sorted by address,
and caches the result (three flat arrays) so that a later run only maps it.  Names are not copied into the cache:
they are read on demand from the library's own string table (mmapped), which
is why a cache entry is validated against the file's size, mtime and build-id.

Public API::

    idx = ElfIndex.open(path)
    idx.build_id                  # "93ac61..." or None (TensorFlow's wheels have none)
    idx.symbolize(vaddr)          # ("_ZN10tensorflow...", offset) or None
    idx.find("TF_NewSession")     # [("TF_NewSession", 0x...)]
    idx.find("tensorflow::ThreadPoolDevice::Compute")
    demangle(["_ZN..."])          # one c++filt process for the names not seen before
    load_base(pid, path)          # where the library is loaded in process pid

Addresses are the file's own virtual addresses (``st_value``); add
``load_base()`` to get run-time addresses.
"""

from __future__ import annotations

import array
import bisect
import hashlib
import json
import mmap
import os
import re
import shutil
import struct
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Dict, Generator, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..files import atomic_write, cache_dir
from . import procfs
from .mapfile import FileUnusable, map_file

__all__ = [
    "CACHE_VERSION",
    "ElfError",
    "ElfIndex",
    "Leb128Error",
    "FileUnusable",
    "Section",
    "cache_dir",
    "data_symbols",
    "demangle",
    "load_base",
    "read_build_id",
    "sleb128",
    "uleb128",
]

CACHE_VERSION = 1
_MAGIC = b"TFNIDX1\n"

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


# ----------------------------------------------------------------------------------------------------
# ELF headers


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


MAX_LEB128_BYTES = 16  # a LEB128 number longer than this is not one (a 64-bit value takes 10; padding a few)


class Leb128Error(IndexError):
    """A LEB128 number cut short by its buffer's end, longer than ``MAX_LEB128_BYTES``, or wider than 64 bits.

    An ``IndexError``: every reader already treats running past its data as that.
    """


def uleb128(buf: Union[bytes, memoryview, mmap.mmap], pos: int) -> Tuple[int, int]:
    """The unsigned LEB128 number at ``pos`` (DWARF, CFI) and the position after it: the one LEB128 reader.

    Raises ``Leb128Error`` for a number that runs past ``buf``, is longer than ``MAX_LEB128_BYTES``
    or does not fit in 64 bits.
    """
    try:
        b = buf[pos]
    except IndexError:
        raise Leb128Error("a LEB128 number runs past the end of its data") from None
    if b < 0x80:  # most numbers are one byte
        return b, pos + 1
    return _leb128(buf, pos, False)


def sleb128(buf: Union[bytes, memoryview, mmap.mmap], pos: int) -> Tuple[int, int]:
    """The signed LEB128 number at ``pos`` and the position after it (errors as ``uleb128``)."""
    try:
        b = buf[pos]
    except IndexError:
        raise Leb128Error("a LEB128 number runs past the end of its data") from None
    if b < 0x80:
        return (b - 0x80 if b & 0x40 else b), pos + 1
    return _leb128(buf, pos, True)


def _leb128(buf: Union[bytes, memoryview, mmap.mmap], pos: int, signed: bool) -> Tuple[int, int]:
    """A LEB128 number of more than one byte at ``pos`` (``uleb128``, ``sleb128``)."""
    start = pos
    result = shift = 0
    b = 0x80
    try:
        while b >= 0x80 and pos < start + MAX_LEB128_BYTES:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
    except IndexError:
        raise Leb128Error("a LEB128 number runs past the end of its data") from None
    if b >= 0x80:
        raise Leb128Error("a LEB128 number longer than %d bytes at %d" % (MAX_LEB128_BYTES, start))
    if signed and b & 0x40:
        result -= 1 << shift
    if not (-(1 << 63) <= result < (1 << 63) if signed else result < (1 << 64)):
        raise Leb128Error("a LEB128 number wider than 64 bits at %d" % start)
    return result, pos


def read_build_id(path: str) -> Optional[str]:
    """The GNU build-id of ``path`` as hex, or None."""
    with map_file(path) as mm:
        return ElfFile(mm, path).build_id()


# ----------------------------------------------------------------------------------------------------
# The index


class StringTable(NamedTuple):
    """Where the names of an index's symbols are: a string table's file offset and size."""

    offset: int
    size: int


class SymbolArrays(NamedTuple):
    """An index's function symbols as flat arrays, in address order."""

    # array.array where the index was built now; views of the cache entry's mapping where it was loaded
    addrs: Sequence[int]  # 'Q', sorted
    sizes: Sequence[int]  # 'Q'
    names: Sequence[int]  # 'I': offsets into the string table
    by_name: Sequence[int]  # 'I': symbol indices sorted by name offset


class ElfIndex:
    """Function symbols of one ELF file, sorted by address (see the module docstring)."""

    def __init__(self, path: str, build_id: Optional[str], table: str, strings: StringTable,
                 symbols: SymbolArrays, mm: mmap.mmap, from_cache: bool) -> None:
        self.path = path
        self.build_id = build_id
        self.table = table  # ".symtab" or ".dynsym"
        self._str0 = strings.offset
        self._strsz = strings.size
        self._addrs = symbols.addrs  # 'Q', sorted
        self._sizes = symbols.sizes  # 'Q'
        self._names = symbols.names  # 'I': offsets into the string table
        self._by_name = symbols.by_name  # 'I': symbol indices sorted by name offset
        self._mm = mm
        self.from_cache = from_cache

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str, use_cache: bool = True) -> ElfIndex:
        """Index ``path``, from the cache when a valid entry exists (else build and store one)."""
        path = os.path.abspath(path)
        mm = map_file(path)
        try:
            st = os.stat(path)
        except OSError:
            mm.close()
            raise
        try:
            elf = ElfFile(mm, path)
            build_id = elf.build_id()
            entry = _cache_path(path, build_id, elf)
            if use_cache:
                got = _load_cache(entry, st, build_id, mm, path)
                if got is not None:
                    return got
            idx = build_index(elf, build_id, mm, path)
            if use_cache:
                try:
                    _store_cache(entry, idx, st)
                except OSError as exc:
                    sys.stderr.write(f"tfnative: warning: cannot write symbol cache {entry}: {exc}\n")
            return idx
        except BaseException:
            mm.close()
            raise

    def close(self) -> None:
        try:
            self._mm.close()
        except (BufferError, ValueError):
            pass

    def __enter__(self) -> ElfIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._addrs)

    # -- queries -----------------------------------------------------------------------------------

    def name_at(self, i: int) -> str:
        """Mangled name of symbol number ``i`` (in address order)."""
        off = self._str0 + self._names[i]
        end = self._mm.find(b"\0", off, self._str0 + self._strsz)
        return self._mm[off:end].decode("utf-8", "replace")

    def symbols_at(self, vaddr: int) -> List[Tuple[str, int]]:
        """(mangled name, size) of every function symbol starting exactly at ``vaddr``."""
        lo = bisect.bisect_left(self._addrs, vaddr)
        hi = bisect.bisect_right(self._addrs, vaddr, lo=lo)
        return [(self.name_at(k), self._sizes[k]) for k in range(lo, hi)]

    def _group(self, i: int) -> Tuple[int, int]:
        """[lo, hi) of the symbols at the address of symbol ``i``."""
        addrs = self._addrs
        a = addrs[i]
        return bisect.bisect_left(addrs, a), bisect.bisect_right(addrs, a)

    def _best(self, idxs: List[int]) -> int:
        return max(idxs, key=self.name_at) if len(idxs) > 1 else idxs[0]

    def symbolize(self, vaddr: int) -> Optional[Tuple[str, int]]:
        """(mangled name, offset) of the function containing ``vaddr`` (a file vaddr), or None.

        Like gdb's minimal symbol lookup: take the symbols at the greatest
        address <= ``vaddr``; a sized one is used only when ``vaddr`` is inside
        it; among several the lexicographically greatest name wins.  Size-0
        symbols are the fallback (nearest preceding), unless the sized symbol
        just before them contains ``vaddr``.
        """
        addrs, sizes = self._addrs, self._sizes
        i = bisect.bisect_right(addrs, vaddr) - 1
        if i < 0:
            return None
        lo, hi = self._group(i)
        a = addrs[i]
        sized = [k for k in range(lo, hi) if sizes[k] and vaddr < a + sizes[k]]
        if sized:
            k = self._best(sized)
            return self.name_at(k), vaddr - a
        zero = [k for k in range(lo, hi) if not sizes[k]]
        if not zero:
            return None  # past the end of the function: gdb says ?? too
        if lo > 0:  # a zero-sized label inside a sized function: the function wins
            plo, phi = self._group(lo - 1)
            pa = addrs[lo - 1]
            prev = [k for k in range(plo, phi) if sizes[k] and vaddr < pa + sizes[k]]
            if prev:
                k = self._best(prev)
                return self.name_at(k), vaddr - pa
        k = self._best(zero)
        return self.name_at(k), vaddr - a

    def _symbols_named_at(self, lo: int, hi: int) -> List[int]:
        """Indices of the symbols whose name offset is in [lo, hi] (string table offsets)."""
        key = self._names.__getitem__
        a = bisect.bisect_left(self._by_name, lo, key=key)
        b = bisect.bisect_right(self._by_name, hi, lo=a, key=key)
        return list(self._by_name[a:b])

    def _exact(self, name: str) -> List[int]:
        needle = name.encode() + b"\0"
        mm, start, end = self._mm, self._str0, self._str0 + self._strsz
        out: List[int] = []
        p = mm.find(needle, start, end)
        while p >= 0:
            out.extend(self._symbols_named_at(p - start, p - start))
            p = mm.find(needle, p + 1, end)
        return out

    def _containing(self, token: bytes) -> List[int]:
        """Symbols whose name contains ``token`` (string-table substring search)."""
        mm, start, end = self._mm, self._str0, self._str0 + self._strsz
        out: List[int] = []
        seen = set()
        p = mm.find(token, start, end)
        while p >= 0:
            s = mm.rfind(b"\0", start, p) + 1
            if s <= 0:
                s = start
            for i in self._symbols_named_at(s - start, p - start):
                if i not in seen:
                    seen.add(i)
                    out.append(i)
            e = mm.find(b"\0", p, end)
            p = mm.find(token, (e if e >= 0 else p) + 1, end)
        return out

    def find(self, location: str) -> List[Tuple[str, int]]:
        """(mangled name, vaddr) of the functions a breakpoint ``location`` names.

        ``location`` is a C name (``TF_NewSession``), a mangled name, or a C++
        name, qualified or not (gdb-style wild matching on scopes), with or
        without template arguments and parameter list
        (``tensorflow::ThreadPoolDevice::Compute(tensorflow::OpKernel*, tensorflow::OpKernelContext*)``).
        Sorted by address; one entry per address.
        """
        location = location.strip()
        if location.startswith("*") or not location:
            return []
        hits: List[int] = []
        if location.startswith("_Z") or re.fullmatch(r"[A-Za-z_.$][\w.$@]*", location):
            hits = self._exact(location)
        if not location.startswith("_Z"):
            hits.extend(self._find_cxx(location))
        return self._unique(hits)

    def _unique(self, hits: List[int]) -> List[Tuple[str, int]]:
        by_addr: Dict[int, str] = {}
        for i in hits:
            a = self._addrs[i]
            n = self.name_at(i)
            if a not in by_addr or n > by_addr[a]:
                by_addr[a] = n
        return [(by_addr[a], a) for a in sorted(by_addr)]

    def _find_cxx(self, location: str) -> List[int]:
        q = parse_cxx_name(location)
        if q is None:
            return []
        scopes, params = q
        # Without template arguments in the query, any scope may carry some in
        # the mangled name ("17BaseBatchMatMulOpIN5Eigen...E7Compute"): then
        # every <len><id> is a token of its own; else consecutive ones are one.
        runs = _mangled_runs(scopes, split="<" not in location.split("(")[0])
        if not runs:
            return []
        token = max(runs, key=len)
        cands = self._containing(token.encode())
        others = [r.encode() for r in runs if r is not token]
        names = [(i, self.name_at(i)) for i in cands]
        # "_ZT..." are thunks, vtables and typeinfo: not what a breakpoint on a function means
        names = [(i, n) for i, n in names
                 if n.startswith("_Z") and not n.startswith("_ZT") and all(o in n.encode() for o in others)]
        if not names:
            return []
        dem = demangle([n for _, n in names])
        want = _norm(location if params is None else location[: location.index("(")])
        want_params = _norm(params) if params is not None else None
        strip_templates = "<" not in location.split("(")[0]
        out = []
        for (i, _), d in zip(names, dem):
            split = split_demangled(d)
            if split is None:
                continue
            qual, dparams = split
            qn = _norm(qual)
            if strip_templates:
                qn = _strip_templates(qn)
            if not (qn == want or qn.endswith("::" + want)):
                continue
            if want_params is not None and _norm(dparams) != want_params:
                continue
            out.append(i)
        return out


# ----------------------------------------------------------------------------------------------------
# C++ names


def _norm(s: str) -> str:
    return re.sub(r"\s+", "", s)


def _strip_templates(s: str) -> str:
    out = []
    depth = 0
    i = 0
    while i < len(s):
        c = s[i]
        if s.startswith("operator", i):  # operator<, operator<<, operator-> ...
            m = re.match(r"operator(<<=|>>=|<<|>>|<=>|<=|>=|->\*|->|<|>|\(\)|\[\])?", s[i:])
            assert m is not None
            if depth == 0:
                out.append(m.group(0))
            i += len(m.group(0))
            continue
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out)


def _split_top(s: str, sep: str = "::") -> List[str]:
    """Split on ``sep`` outside <...> and (...)."""
    parts: List[str] = []
    cur: List[str] = []
    depth = i = 0
    while i < len(s):
        c = s[i]
        if c in "<(":
            depth += 1
        elif c in ">)" and depth:
            depth -= 1
        if depth == 0 and s.startswith(sep, i):
            parts.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def parse_cxx_name(location: str) -> Optional[Tuple[List[str], Optional[str]]]:
    """``a::b<T>::c(int)`` -> (["a", "b<T>", "c"], "int"); params None when there is no "(...)"."""
    s = location.strip()
    params: Optional[str] = None
    # the parameter list: the first "(" at template depth 0 that is not operator()
    depth = 0
    for i, c in enumerate(s):
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif c == "(" and depth == 0 and not s[:i].endswith("operator"):
            close = s.rfind(")")
            if close < i:
                return None
            params = s[i + 1:close]
            s = s[:i]
            break
    scopes = [p.strip() for p in _split_top(s)]
    if not scopes or any(not p for p in scopes):
        return None
    return scopes, params


def _mangled_runs(scopes: List[str], split: bool = False) -> List[str]:
    """Itanium ``<len><id>`` runs that the mangled name must contain ("10tensorflow16ThreadPoolDevice")."""
    runs: List[str] = []
    cur = ""
    for sc in scopes:
        m = re.fullmatch(r"([A-Za-z_]\w*)(<.*>)?", sc)
        if m is None or sc.startswith("operator") or sc.startswith("~"):
            if cur:
                runs.append(cur)
            cur = ""
            continue
        ident = m.group(1)
        if ident == "std" and not cur:  # std:: is "St", never "3std"
            cur = "St"
            continue
        cur += f"{len(ident)}{ident}"
        if m.group(2) or split:  # template args break the run
            runs.append(cur)
            cur = ""
    if cur:
        runs.append(cur)
    return [r for r in runs if r != "St"]


def split_demangled(d: str) -> Optional[Tuple[str, str]]:
    """``ret ns::f<...>(int, char) const`` -> ("ns::f<...>" or "ret ns::f<...>", "int, char")."""
    s = d.strip()
    # drop trailing qualifiers and ABI tags
    while True:
        m = re.search(r"(\s+(const|volatile|&&|&|noexcept)|\[abi:[^\]]*\])$", s)
        if not m:
            break
        s = s[: m.start()]
    if not s.endswith(")"):
        return None
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        c = s[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                qual = s[:i]
                if qual.endswith("operator"):  # "operator()(...)": keep looking
                    continue
                # a template function's demangled name starts with its return type
                parts = _split_top(qual, " ")
                if len(parts) > 1:
                    qual = parts[-1]
                return qual, s[i + 1:-1]
    return None


_CXXFILT: Optional[str] = None


_DEMANGLED: Dict[str, str] = {}


def demangle(names: Sequence[str]) -> List[str]:
    """Demangle C++ names (binutils' ``c++filt``, libiberty's demangler, as gdb uses).

    Names seen before come from a cache, C names (not ``_Z...``) come back as
    they are, and the rest go to one ``c++filt`` process for the whole batch.
    A name ``c++filt`` cannot demangle, or every name when it is missing,
    comes back unchanged.
    """
    global _CXXFILT
    names = list(names)
    todo = sorted({n for n in names if n not in _DEMANGLED and n.startswith("_Z") and "\n" not in n})
    if todo:
        if _CXXFILT is None:
            _CXXFILT = shutil.which("c++filt") or ""
        out: List[str] = []
        if _CXXFILT:
            try:
                proc = subprocess.run([_CXXFILT], input="\n".join(todo) + "\n", capture_output=True, text=True,
                                      timeout=120, check=True)
                out = proc.stdout.split("\n")
            except (OSError, subprocess.SubprocessError):
                out = []
        if len(out) < len(todo):
            out = todo  # no demangler: the names as they are, not cached, so a later call may still demangle
        else:
            _DEMANGLED.update(zip(todo, out))
    return [_DEMANGLED.get(n, n) for n in names]


def display_names(names: Sequence[str]) -> List[str]:
    """Demangled names as a reader knows them: glibc's versioned aliases lose their version.

    ``pthread_cond_wait@@GLIBC_2.3.2`` -> ``pthread_cond_wait``; a C++ name
    keeps any ``@`` inside its parameter list.
    """
    return [n.split("@", 1)[0] if "@" in n and "(" not in n else n for n in demangle(names)]


# ----------------------------------------------------------------------------------------------------
# building and caching


def build_index(elf: ElfFile, build_id: Optional[str], mm: mmap.mmap, path: str) -> ElfIndex:
    """The index of ``elf``'s function symbols (``.symtab``, else ``.dynsym``), built without the cache:
    ``mm`` is the mapping ``elf`` reads, ``path`` the name the index gives (also for an image in memory,
    such as the vDSO)."""
    symtab = None
    for want in (SHT_SYMTAB, SHT_DYNSYM):
        for s in elf.sections:
            if s.type == want and s.size and s.type != SHT_NOBITS:
                symtab = s
                break
        if symtab is not None:
            break
    if symtab is None or not (0 < symtab.link < len(elf.sections)):
        strtab = Section("", SHT_STRTAB, 0, 0, 0, 0, 0, 0, 0, 0)
        empty = SymbolArrays(array.array("Q"), array.array("Q"), array.array("I"), array.array("I"))
        return ElfIndex(path, build_id, "", StringTable(0, 0), empty, mm, False)
    strtab = elf.sections[symtab.link]
    entsize = struct.calcsize(elf.sym_fmt)
    n = symtab.size // entsize
    view = memoryview(mm)[symtab.offset: symtab.offset + n * entsize]
    rows: List[Tuple[int, int, int]] = []
    append = rows.append
    try:
        if elf.is64:
            for st_name, st_info, _o, st_shndx, st_value, st_size in struct.iter_unpack(elf.sym_fmt, view):
                t = st_info & 0xF
                if (t == STT_FUNC or t == STT_GNU_IFUNC) and st_shndx != 0 and st_name:
                    append((st_value, st_size, st_name))
        else:
            for st_name, st_value, st_size, st_info, _o, st_shndx in struct.iter_unpack(elf.sym_fmt, view):
                t = st_info & 0xF
                if (t == STT_FUNC or t == STT_GNU_IFUNC) and st_shndx != 0 and st_name:
                    append((st_value, st_size, st_name))
    finally:
        view.release()
    rows.sort()
    # drop exact duplicates (.symtab and .dynsym never mix here, but ICF/aliases do repeat)
    addrs = array.array("Q", [r[0] for r in rows])
    sizes = array.array("Q", [r[1] for r in rows])
    names = array.array("I", [r[2] for r in rows])
    by_name = array.array("I", sorted(range(len(rows)), key=names.__getitem__))
    table = ".symtab" if symtab.type == SHT_SYMTAB else ".dynsym"
    return ElfIndex(path, build_id, table, StringTable(strtab.offset, strtab.size),
                    SymbolArrays(addrs, sizes, names, by_name), mm, False)


def _cache_path(path: str, build_id: Optional[str], elf: ElfFile) -> str:
    if build_id:
        # The size too: a stripped library and its separate debug file share the build-id, and with one
        # entry for both each snapshot rebuilt the two indexes, each overwriting the other's.
        key = "bid-%s-%d" % (build_id, len(elf.mm))
    else:
        # TensorFlow's wheels have no build-id: key by the real path and the headers.
        h = hashlib.sha1(os.path.realpath(path).encode())
        h.update(elf.mm[: 64])
        h.update(elf.mm[elf.shoff: elf.shoff + elf.shnum * elf.shentsize])
        key = "path-" + h.hexdigest()
    return os.path.join(cache_dir(), "index", f"{key}.v{CACHE_VERSION}.idx")


def _store_cache(entry: str, idx: ElfIndex, st: os.stat_result) -> None:
    header = {
        "version": CACHE_VERSION, "path": idx.path, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
        "build_id": idx.build_id, "table": idx.table, "strtab_offset": idx._str0, "strtab_size": idx._strsz,
        "count": len(idx._addrs), "byteorder": sys.byteorder,
    }
    hb = json.dumps(header).encode() + b"\n"
    arrays = (idx._addrs, idx._sizes, idx._names, idx._by_name)  # arrays or memoryviews: both buffers
    atomic_write(entry, [_MAGIC, hb] + [bytes(memoryview(a)) for a in arrays])  # type: ignore[arg-type]


def _load_cache(entry: str, st: os.stat_result, build_id: Optional[str], mm: mmap.mmap,
                path: str) -> Optional[ElfIndex]:
    """The index stored at ``entry``, where it is whole and of this file as it is now.  The entry is mapped,
    not read: its arrays are views of the mapping, so a lookup touches only the pages its binary search
    lands on (TensorFlow's indexes are tens of MiB; a snapshot reads a few hundred of their pages)."""
    try:
        data = map_file(entry)
    except FileUnusable:
        return None
    try:
        if not data[:len(_MAGIC)] == _MAGIC:
            return None
        nl = data.find(b"\n", len(_MAGIC), len(_MAGIC) + 4096)
        if nl < 0:
            return None
        h = json.loads(data[len(_MAGIC): nl])
        if (h.get("version") != CACHE_VERSION or h.get("size") != st.st_size
                or h.get("mtime_ns") != st.st_mtime_ns
                or h.get("build_id") != build_id or h.get("byteorder") != sys.byteorder):
            return None
        n = int(h["count"])
        pos = nl + 1
        arrays: List[Sequence[int]] = []
        view = memoryview(data)
        for wide in (True, True, False, False):
            nbytes = n * (8 if wide else 4)
            if pos + nbytes > len(data):
                return None
            arrays.append(view[pos: pos + nbytes].cast("Q" if wide else "I"))
            pos += nbytes
        if pos != len(data):
            return None
        if h["strtab_offset"] + h["strtab_size"] > len(mm):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return ElfIndex(path, build_id, h["table"], StringTable(h["strtab_offset"], h["strtab_size"]),
                    SymbolArrays(arrays[0], arrays[1], arrays[2], arrays[3]), mm, True)


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


# ----------------------------------------------------------------------------------------------------
# run-time addresses


def load_base(pid: int, path: str) -> int:
    """Load bias of ``path`` in process ``pid``: run-time address = file vaddr + load_base.

    Found in ``/proc/PID/maps`` as the start of the private mapping at file
    offset 0 (matched by inode and device, else by real path) minus the first
    PT_LOAD's page-aligned vaddr.  This is the OFFSET of
    ``add-symbol-file FILE -o OFFSET``.  Shared mappings (someone's mmap of
    the file, ElfIndex's own included) are not the loader's and are skipped.
    Raises LookupError when the library is not mapped.
    """
    st = os.stat(path)
    real = os.path.realpath(path)
    start = None
    for lo, _hi, perms, off, dev, inode, name in procfs.maps(pid):
        if off != 0 or not perms.endswith("p"):
            continue
        major, minor = (int(x, 16) for x in dev.split(":"))
        same_file = inode == st.st_ino and inode != 0 and os.makedev(major, minor) == st.st_dev
        if same_file or (name and name == real):
            start = lo
            break
    if start is None:
        raise LookupError(f"{path} is not mapped in process {pid}")
    with map_file(path) as mm:
        first = ElfFile(mm, path).first_load_vaddr()
    return start - first


def mapped_libraries(pid: int) -> List[str]:
    """Paths of the files mapped at offset 0 in process ``pid`` (from /proc/PID/maps), in map order."""
    seen: List[str] = []
    for _lo, _hi, perms, off, _dev, inode, name in procfs.maps(pid):
        if off == 0 and perms.endswith("p") and inode and name.startswith("/") and name not in seen:
            seen.append(name)
    return seen
