"""Whether a library's DWARF describes its own code, and whether its ``.gnu_debuglink`` is worth following.

A ``.debug_info`` section alone does not make a debug build.  TensorFlow's
wheels 2.16 to 2.20 link a few objects of the toolchain's static C++ runtime
(``libstdc++_nonshared``, ``libgcc``) with their DWARF into
``libtensorflow_cc.so.2``: 22-30 compile units whose ranges were mostly
discarded with the code (they start at address 0), describing some 5 kB of
300 MB of code, and a ``.gnu_debuglink`` that names ``crti.o`` (the links of
two crt objects, concatenated).  gdb gives no file:line for TensorFlow's own
code there, yet reads all its symbols in full when told it is a debug build.

What this module reads, from the file only (never from a version number):

* the address ranges of each compile unit (its first DIE's ``DW_AT_low_pc`` /
  ``DW_AT_high_pc`` / ``DW_AT_ranges``, through ``.debug_ranges`` or
  ``.debug_rnglists``), clipped to the file's executable sections: a range
  that lies outside them (code the linker dropped) describes nothing;
* from those, the share of the code they describe (``Cover.share``) and
  whether a given address is described (``Cover.describes``);
* the ``.gnu_debuglink``: one name plus a CRC, naming a debug file (an object
  file such as ``crti.o`` is not one), and where gdb would find it.

``describes_code`` is the one judgement the fast path, the snapshot path and
``tfnative doctor`` share: at least ``MIN_SHARE`` of the code, or
``MIN_BYTES`` of it, is described.  Every read is bounded (units, ranges,
bytes decompressed); DWARF that cannot be read (compressed beyond the bound,
an unknown form) counts as describing the code, which keeps gdb's symbols as
before.  Results are cached per file (path, size, mtime, inode).
"""

from __future__ import annotations

import bisect
import mmap
import struct
import zlib
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

from ..record import Record
from . import debugfiles
from .debugsections import DebugSections
from .dwarf import (
    AT_ADDR_BASE,
    AT_GNU_ADDR_BASE,
    AT_GNU_RANGES_BASE,
    AT_HIGH_PC,
    AT_LOW_PC,
    AT_NAME,
    AT_RANGES,
    AT_RNGLISTS_BASE,
    AT_STR_OFFSETS_BASE,
    FORM_ADDR,
    FORM_ADDRX,
    FORM_ADDRX_N,
    FORM_GNU_ADDR_INDEX,
    FORM_RNGLISTX,
    TAG_COMPILE_UNIT,
    TAG_PARTIAL_UNIT,
    TAG_SKELETON_UNIT,
    UT_COMPILE,
    UT_PARTIAL,
    UT_SKELETON,
    Abbrevs,
    Unreadable,
    first_die,
    string_of,
    unit_headers,
)
from .elf import SHT_NOBITS, ElfError, ElfFile
from .filecache import FileCache
from .leb128 import uleb128
from .mapfile import map_file

MIN_SHARE = 0.01  # described share of the executable bytes that makes DWARF "the library's own"
MIN_BYTES = 1 << 20  # or this many bytes described, whatever the share
MAX_UNITS = 1_000_000  # compile units read per file
MAX_RANGES = 4_000_000  # address ranges read per file, all units together
SHF_EXECINSTR = 0x4
OBJECT_SUFFIXES = (".o", ".obj", ".a", ".lo", ".la")
_WANTED = (AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES, AT_ADDR_BASE, AT_RNGLISTS_BASE, AT_GNU_RANGES_BASE,
           AT_GNU_ADDR_BASE, AT_STR_OFFSETS_BASE)
# Source directories of the compilers' own runtime libraries: units from there, linked in from a static
# archive (libstdc++_nonshared.a, libgcc.a), are not the library's own code.
RUNTIME_DIRS = ("libstdc++-v3", "libgcc", "libatomic", "libgomp", "libquadmath", "libsanitizer", "libitm",
                "libssp", "libvtv", "compiler-rt", "libcxx", "libcxxabi", "libunwind", "csu")


@dataclass(repr=False, eq=False)
class Cover(Record):
    """What one file's DWARF and debuglink say about its code (see the module's docstring)."""

    path: str
    elf: bool = True  # False: the file could not be read as ELF (nothing else is known)
    code_bytes: int = 0  # bytes of the executable sections
    described_bytes: int = 0  # of those, inside some compile unit's ranges
    own_bytes: int = 0  # of those, inside the ranges of a unit not from a compiler's runtime (``RUNTIME_DIRS``)
    runtime_units: int = 0  # units from a compiler's runtime library
    units: int = 0  # compile units with a first DIE read
    has_dwarf: bool = False  # a non-empty .debug_info in the file itself
    readable: bool = True  # False: DWARF present but not read (then it counts as describing the code)
    why_unreadable: str = ""
    ranges: List[Tuple[int, int]] = field(default_factory=list)  # merged, sorted, clipped (file vaddrs)
    debuglink: Optional[str] = None  # the name, as the section holds it
    debuglink_plausible: bool = False
    debuglink_note: str = ""  # why the name is not a debug file's
    debugdata: bool = False  # .gnu_debugdata (MiniDebugInfo: symbols only, xz)
    build_id: Optional[str] = None

    @property
    def share(self) -> float:
        return self.described_bytes / self.code_bytes if self.code_bytes else 0.0

    @property
    def describes_code(self) -> bool:
        """Whether the file's own DWARF describes its code: gdb gives file:line for it.

        Yes when a unit that is not from a compiler's runtime describes some
        of the code (a debug build, or one file built with ``-g``), or when
        the units describe ``MIN_SHARE`` or ``MIN_BYTES`` of it whatever they
        are (the runtime library itself, built with debug info).
        """
        if not self.has_dwarf:
            return False
        if not self.readable:
            return True
        return self.own_bytes > 0 or self.described_bytes >= MIN_BYTES or \
            (self.described_bytes > 0 and self.share >= MIN_SHARE)

    def describes(self, vaddr: int) -> bool:
        """Whether the file's own DWARF covers the code at ``vaddr`` (a file virtual address)."""
        if not self.describes_code:
            return False
        if not self.readable:
            return True
        i = bisect.bisect_right(self.ranges, (vaddr, 1 << 64)) - 1
        return i >= 0 and self.ranges[i][0] <= vaddr < self.ranges[i][1]

    def debug_file(self) -> Optional[str]:
        """The separate debug file gdb would read for this file (build-id first, then the debuglink), or None."""
        return find_debug_file(self.path, self.debuglink if self.debuglink_plausible else None, self.build_id)

    def summary(self) -> str:
        """One line on the judgement, for notes and warnings."""
        if not self.has_dwarf:
            return "no DWARF"
        if not self.readable:
            return "DWARF not read (%s): taken as describing the code" % self.why_unreadable
        return ("%d compile units (%d of a compiler's runtime) describe %d of %d bytes of code (%.4f%%)"
                % (self.units, self.runtime_units, self.described_bytes, self.code_bytes, 100.0 * self.share))


# ---------------------------------------------------------------- the debuglink


def parse_debuglink(data: bytes) -> Tuple[Optional[str], bool, str]:
    """(name, plausible, note) of a ``.gnu_debuglink`` section's bytes.

    The section holds one NUL-terminated file name, padding to 4 bytes and a
    4-byte CRC.  A section that holds more than that (links of several
    objects pasted together), a name with a directory, unprintable bytes, or
    naming an object file or archive (``crti.o``) names no debug file.
    """
    name_b = data.split(b"\0", 1)[0]
    name = name_b.decode("utf-8", "replace")
    if not name_b:
        return None, False, "empty .gnu_debuglink"
    if not all(0x20 < c < 0x7F for c in name_b) or "/" in name:
        return name, False, ".gnu_debuglink holds no file name"
    if name.lower().endswith(OBJECT_SUFFIXES):
        return name, False, ".gnu_debuglink names an object file (%s), not a debug file" % name
    if len(data) != ((len(name_b) + 1 + 3) & ~3) + 4:
        return name, False, ".gnu_debuglink holds more than one link (%d bytes)" % len(data)
    return name, True, ""


def find_debug_file(path: str, link: Optional[str], build_id: Optional[str]) -> Optional[str]:
    """Where gdb would find the separate debug file of ``path`` (``debugfiles``: the one search rule)."""
    return debugfiles.find_debug_file(path, build_id, link)

def _units(info: memoryview, abbrevs: Abbrevs,
           e: str) -> Iterator[Tuple[int, int, int, Dict[int, Tuple[int, int]]]]:
    """(version, address size, offset size, {attribute: (form, value)}) of each unit's first DIE."""
    n = len(info)
    for count, h in enumerate(unit_headers(info, e), 1):
        if count > MAX_UNITS:
            raise Unreadable("more than %d compile units" % MAX_UNITS)
        if h.end > n:
            raise Unreadable(".debug_info is cut short")
        if h.unit_type in (UT_COMPILE, UT_PARTIAL, UT_SKELETON):
            code, pos = uleb128(info, h.die)
            ab = abbrevs.find(h.abbrev_offset, code) if code else None
            if ab is not None and ab.tag in (TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT, TAG_SKELETON_UNIT):
                yield h.version, h.address_size, h.offset_size, first_die(info, pos, h, ab.attrs, e, _WANTED)


class _Ranges:
    """Turns a unit's first-DIE attributes into address ranges."""

    def __init__(self, secs: DebugSections, e: str) -> None:
        self.secs = secs
        self.e = e
        self._data: Dict[str, Optional[memoryview]] = {}
        self.count = 0

    def sec(self, name: str) -> Optional[memoryview]:
        if name not in self._data:
            self._data[name] = self.secs.data(name)
        return self._data[name]

    def name(self, vals: Dict[int, Tuple[int, int]], osz: int, info: memoryview) -> Optional[str]:
        """The unit's ``DW_AT_name``, or None where it cannot be read."""
        return string_of(vals.get(AT_NAME), vals, info, self.sec, osz, self.e)


    def _add(self, out: List[Tuple[int, int]], lo: int, hi: int) -> None:
        self.count += 1
        if self.count > MAX_RANGES:
            raise Unreadable("more than %d address ranges" % MAX_RANGES)
        if hi > lo:
            out.append((lo, hi))

    def _addrx(self, index: int, base: Optional[int], addr_size: int, osz: int) -> int:
        data = self.sec(".debug_addr")
        if data is None:
            raise Unreadable("an indexed address without .debug_addr")
        at = (base if base is not None else (8 if osz == 4 else 16)) + index * addr_size
        if at + addr_size > len(data):
            raise Unreadable("an address index out of .debug_addr")
        return int.from_bytes(bytes(data[at:at + addr_size]), "little" if self.e == "<" else "big")

    def of_unit(self, version: int, addr_size: int, osz: int,
                vals: Dict[int, Tuple[int, int]]) -> List[Tuple[int, int]]:
        out: List[Tuple[int, int]] = []
        addr_base = (vals.get(AT_ADDR_BASE) or vals.get(AT_GNU_ADDR_BASE) or (0, None))[1]

        def address(fv: Tuple[int, int]) -> int:
            form, val = fv
            if form in (FORM_ADDRX, FORM_GNU_ADDR_INDEX) or form in FORM_ADDRX_N:
                return self._addrx(val, addr_base, addr_size, osz)
            return val

        low = address(vals[AT_LOW_PC]) if AT_LOW_PC in vals else 0
        if AT_RANGES in vals:
            form, val = vals[AT_RANGES]
            if version >= 5:
                rbase = (vals.get(AT_RNGLISTS_BASE) or (0, None))[1]
                self._rnglist(out, form, val, rbase, low, addr_size, osz, addr_base)
            else:
                gnu_base = (vals.get(AT_GNU_RANGES_BASE) or (0, 0))[1] or 0
                self._ranges_v4(out, val + gnu_base, low, addr_size)
        elif AT_LOW_PC in vals and AT_HIGH_PC in vals:
            form, val = vals[AT_HIGH_PC]
            is_address = form in (FORM_ADDR, FORM_ADDRX, FORM_GNU_ADDR_INDEX) or form in FORM_ADDRX_N
            hi = address(vals[AT_HIGH_PC]) if is_address else low + val  # a constant: the length (DWARF 4+)
            self._add(out, low, hi)
        return out

    def _ranges_v4(self, out: List[Tuple[int, int]], off: int, base: int, addr_size: int) -> None:
        data = self.sec(".debug_ranges")
        if data is None:
            raise Unreadable("DW_AT_ranges without .debug_ranges")
        fmt = self.e + ("Q" if addr_size == 8 else "I")
        top = (1 << (8 * addr_size)) - 1
        pos = off
        while pos + 2 * addr_size <= len(data):
            lo, hi = struct.unpack_from(fmt + fmt[-1], data, pos)
            pos += 2 * addr_size
            if lo == 0 and hi == 0:
                return
            if lo == top:
                base = hi
                continue
            self._add(out, base + lo, base + hi)
        raise Unreadable("a range list runs past .debug_ranges")

    def _rnglist(self, out: List[Tuple[int, int]], form: int, val: int, rbase: Optional[int], base: int,
                 addr_size: int, osz: int, addr_base: Optional[int]) -> None:
        data = self.sec(".debug_rnglists")
        if data is None:
            raise Unreadable("DW_AT_ranges without .debug_rnglists")
        if form == FORM_RNGLISTX:
            start = rbase if rbase is not None else (12 if osz == 4 else 20)
            at = start + val * osz
            if at + osz > len(data):
                raise Unreadable("a range list index out of .debug_rnglists")
            off = start + struct.unpack_from(self.e + ("Q" if osz == 8 else "I"), data, at)[0]
        else:
            off = val
        fmt = self.e + ("Q" if addr_size == 8 else "I")
        pos = off
        n = len(data)
        while pos < n:
            kind = data[pos]
            pos += 1
            if kind == 0:  # DW_RLE_end_of_list
                return
            if kind == 1:  # base_addressx
                i, pos = uleb128(data, pos)
                base = self._addrx(i, addr_base, addr_size, osz)
            elif kind == 2:  # startx_endx
                i, pos = uleb128(data, pos)
                j, pos = uleb128(data, pos)
                self._add(out, self._addrx(i, addr_base, addr_size, osz), self._addrx(j, addr_base, addr_size, osz))
            elif kind == 3:  # startx_length
                i, pos = uleb128(data, pos)
                ln, pos = uleb128(data, pos)
                lo = self._addrx(i, addr_base, addr_size, osz)
                self._add(out, lo, lo + ln)
            elif kind == 4:  # offset_pair
                a, pos = uleb128(data, pos)
                b, pos = uleb128(data, pos)
                self._add(out, base + a, base + b)
            elif kind == 5:  # base_address
                base = struct.unpack_from(fmt, data, pos)[0]
                pos += addr_size
            elif kind == 6:  # start_end
                lo, hi = struct.unpack_from(fmt + fmt[-1], data, pos)
                pos += 2 * addr_size
                self._add(out, lo, hi)
            elif kind == 7:  # start_length
                lo = struct.unpack_from(fmt, data, pos)[0]
                pos += addr_size
                ln, pos = uleb128(data, pos)
                self._add(out, lo, lo + ln)
            else:
                raise Unreadable("range list entry kind %d" % kind)
        raise Unreadable("a range list runs past .debug_rnglists")


def is_runtime_unit(name: Optional[str]) -> bool:
    """Whether a compile unit's source file belongs to a compiler's runtime library (``RUNTIME_DIRS``)."""
    if not name:
        return False
    parts = name.replace("\\", "/").split("/")[:-1]
    return any(p in RUNTIME_DIRS for p in parts)


def _merge(ranges: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    out: List[Tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _clip(ranges: List[Tuple[int, int]], code: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    """The parts of ``ranges`` (merged) inside ``code`` (merged): what DWARF says of code the file has."""
    out = []
    i = 0
    for lo, hi in ranges:
        while i < len(code) and code[i][1] <= lo:
            i += 1
        j = i
        while j < len(code) and code[j][0] < hi:
            a, b = max(lo, code[j][0]), min(hi, code[j][1])
            if b > a:
                out.append((a, b))
            j += 1
    return out


def read(path: str) -> Cover:
    """The judgement for one file, uncached (see ``cover``).  Raises OSError, ElfError."""
    cov = Cover(path)
    mm = map_file(path)
    try:
        _read_mapped(cov, mm, path)
    finally:
        try:
            mm.close()
        except BufferError:  # a view of it is still alive (an exception's frame): it goes with the view
            pass
    return cov


def _read_mapped(cov: Cover, mm: mmap.mmap, path: str) -> None:
    elf = ElfFile(mm, path)
    secs = DebugSections(elf, mm)
    cov.build_id = elf.build_id()
    cov.debugdata = secs.present(".gnu_debugdata")
    link = secs.by_name.get(".gnu_debuglink")
    if link is not None and link.type != SHT_NOBITS and 0 < link.size <= 4096 \
            and link.offset + link.size <= len(mm):
        cov.debuglink, cov.debuglink_plausible, cov.debuglink_note = parse_debuglink(
            bytes(mm[link.offset:link.offset + link.size]))
    # a separate debug file keeps the code's section headers (SHT_NOBITS): their addresses count
    code = _merge([(s.addr, s.addr + s.size) for s in elf.sections if s.flags & SHF_EXECINSTR and s.size])
    cov.code_bytes = sum(hi - lo for lo, hi in code)
    cov.has_dwarf = secs.present(".debug_info")
    if not cov.has_dwarf:
        return
    try:
        info = secs.data(".debug_info")
        abbrevs = secs.data(".debug_abbrev")
        if info is None or abbrevs is None:
            raise Unreadable(".debug_info without .debug_abbrev")
        ranges = _Ranges(secs, elf.endian)
        found: List[Tuple[int, int]] = []
        own: List[Tuple[int, int]] = []
        for version, addr_size, osz, vals in _units(info, Abbrevs(abbrevs), elf.endian):
            cov.units += 1
            unit = ranges.of_unit(version, addr_size, osz, vals)
            found += unit
            if is_runtime_unit(ranges.name(vals, osz, info)):
                cov.runtime_units += 1
            else:
                own += unit
        cov.ranges = _clip(_merge(found), code)
        cov.described_bytes = sum(hi - lo for lo, hi in cov.ranges)
        cov.own_bytes = sum(hi - lo for lo, hi in _clip(_merge(own), code))
    except (Unreadable, struct.error, IndexError, ValueError, zlib.error) as exc:
        cov.readable = False
        cov.why_unreadable = str(exc) or type(exc).__name__
        cov.ranges = []


_COVERS: FileCache[Cover] = FileCache(512)


def cover(path: str) -> Cover:
    """``read(path)``, once per file (``filecache``); a file that cannot be read has no DWARF."""
    def read_or_none() -> Cover:
        try:
            return read(path)
        except (OSError, ElfError, ValueError, struct.error):
            return Cover(path, elf=False)

    return _COVERS.get(path, read_or_none, lambda: Cover(path, elf=False))


def gdb_gives_lines(path: str) -> bool:
    """Whether gdb, given this file's symbols, shows file:line for its code.

    Its own DWARF describes its code, or a separate debug file that gdb
    would find (by build-id, or by a ``.gnu_debuglink`` that names a debug
    file) does.  A debuglink that names no debug file, or one that is not
    found, does not count.
    """
    cov = cover(path)
    if cov.describes_code:
        return True
    other = cov.debug_file()
    return other is not None and cover(other).describes_code
