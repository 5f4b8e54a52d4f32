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

Addresses are the file's own virtual addresses (``st_value``); add
``loadbase.load_base()`` to get run-time addresses.
"""

from __future__ import annotations

import array
import bisect
import hashlib
import json
import mmap
import os
import re
import struct
import sys
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from ...files import atomic_write, cache_dir
from .cxxnames import demangle, mangled_runs, parse_cxx_name, split_demangled, strip_templates, without_spaces
from .elf import SHT_DYNSYM, SHT_NOBITS, SHT_STRTAB, SHT_SYMTAB, STT_FUNC, STT_GNU_IFUNC, ElfFile, Section
from .mapfile import FileUnusable, map_file

CACHE_VERSION = 1
_MAGIC = b"TFNIDX1\n"

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
        runs = mangled_runs(scopes, split="<" not in location.split("(")[0])
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
        want = without_spaces(location if params is None else location[: location.index("(")])
        want_params = without_spaces(params) if params is not None else None
        no_templates = "<" not in location.split("(")[0]
        out = []
        for (i, _), d in zip(names, dem):
            split = split_demangled(d)
            if split is None:
                continue
            qual, dparams = split
            qn = without_spaces(qual)
            if no_templates:
                qn = strip_templates(qn)
            if not (qn == want or qn.endswith("::" + want)):
                continue
            if want_params is not None and without_spaces(dparams) != want_params:
                continue
            out.append(i)
        return out



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
