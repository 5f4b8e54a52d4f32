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
from typing import Callable, Container, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

from . import debugfiles
from .elf import ElfError, ElfFile, Section
from .filecache import FileCache
from .leb128 import sleb128, uleb128
from .mapfile import map_file

MIN_SHARE = 0.01  # described share of the executable bytes that makes DWARF "the library's own"
MIN_BYTES = 1 << 20  # or this many bytes described, whatever the share
MAX_UNITS = 1_000_000  # compile units read per file
MAX_RANGES = 4_000_000  # address ranges read per file, all units together
MAX_DECOMPRESS = 256 << 20  # a compressed debug section is inflated up to this size
SHF_EXECINSTR = 0x4
SHF_COMPRESSED = 0x800
ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD = 1, 2
SHT_NOBITS = 8
OBJECT_SUFFIXES = (".o", ".obj", ".a", ".lo", ".la")

# DWARF 5, section 7
_TAG_COMPILE_UNIT, _TAG_PARTIAL_UNIT, _TAG_SKELETON_UNIT = 0x11, 0x3C, 0x4A
_AT_NAME, _AT_LOW_PC, _AT_HIGH_PC, _AT_RANGES, _AT_STR_OFFSETS_BASE = 0x03, 0x11, 0x12, 0x55, 0x72
_AT_ADDR_BASE, _AT_RNGLISTS_BASE, _AT_GNU_RANGES_BASE, _AT_GNU_ADDR_BASE = 0x73, 0x74, 0x2132, 0x2133
_WANTED = (_AT_NAME, _AT_LOW_PC, _AT_HIGH_PC, _AT_RANGES, _AT_ADDR_BASE, _AT_RNGLISTS_BASE, _AT_GNU_RANGES_BASE,
           _AT_GNU_ADDR_BASE, _AT_STR_OFFSETS_BASE)
_FORM_STRING, _FORM_STRP, _FORM_LINE_STRP = 0x08, 0x0E, 0x1F
_FORM_INDIRECT, _FORM_IMPLICIT_CONST = 0x16, 0x21
_FORM_STRX = {0x1A, 0x25, 0x26, 0x27, 0x28, 0x1F02}
# Source directories of the compilers' own runtime libraries: units from there, linked in from a static
# archive (libstdc++_nonshared.a, libgcc.a), are not the library's own code.
RUNTIME_DIRS = ("libstdc++-v3", "libgcc", "libatomic", "libgomp", "libquadmath", "libsanitizer", "libitm",
                "libssp", "libvtv", "compiler-rt", "libcxx", "libcxxabi", "libunwind", "csu")
_UT_COMPILE, _UT_PARTIAL, _UT_SKELETON, _UT_SPLIT_COMPILE, _UT_TYPE, _UT_SPLIT_TYPE = 1, 3, 4, 5, 2, 6
_FORM_ADDR, _FORM_ADDRX, _FORM_GNU_ADDR_INDEX = 0x01, 0x1B, 0x1F01
_FORM_ADDRX_N = {0x29: 1, 0x2A: 2, 0x2B: 3, 0x2C: 4}
_FORM_RNGLISTX = 0x23
_FIXED = {0x05: 2, 0x06: 4, 0x07: 8, 0x0B: 1, 0x0C: 1, 0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8, 0x19: 0,
          0x1C: 4, 0x1E: 16, 0x20: 8, 0x21: 0, 0x24: 8, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4, 0x29: 1,
          0x2A: 2, 0x2B: 3, 0x2C: 4}
_ULEB_FORMS = {0x0F, 0x15, 0x1A, 0x1B, 0x22, 0x23, 0x1F01, 0x1F02}
_OFFSET_FORMS = {0x0E, 0x17, 0x1D, 0x1F, 0x1F20, 0x1F21}


class Unreadable(Exception):
    """DWARF this module cannot read within its bounds."""


class UnitHeader(NamedTuple):
    """One unit header of ``.debug_info`` (DWARF 2 to 5)."""

    start: int  # the header's offset
    version: int
    unit_type: int  # DW_UT_*; DWARF 2-4 compile units are DW_UT_compile
    offset_size: int  # 4 (DWARF32) or 8 (DWARF64)
    abbrev_offset: int
    address_size: int
    die: int  # the offset of the unit's first DIE
    end: int  # the offset just past the unit (may lie past the section's end: a cut-short section)


def unit_headers(info: memoryview, e: str) -> Iterator[UnitHeader]:
    """The unit headers of a ``.debug_info`` section in byte order ``e`` (``"<"`` or ``">"``), in order.

    Raises ``Unreadable`` at a reserved unit length or a DWARF version other than 2 to 5; the units
    before it have been given.  Each unit is passed over whole, so the walk is bounded by the
    section's size.
    """
    pos = 0
    n = len(info)
    while pos + 11 <= n:
        start = pos
        length = struct.unpack_from(e + "I", info, pos)[0]
        pos += 4
        osz = 4
        if length == 0xFFFFFFFF:
            length = struct.unpack_from(e + "Q", info, pos)[0]
            pos += 8
            osz = 8
        elif length >= 0xFFFFFFF0:
            raise Unreadable("a reserved unit length")
        unit_end = pos + length
        version = struct.unpack_from(e + "H", info, pos)[0]
        pos += 2
        ofmt = e + ("Q" if osz == 8 else "I")
        if version >= 5:
            unit_type, addr_size = info[pos], info[pos + 1]
            pos += 2
            table = struct.unpack_from(ofmt, info, pos)[0]
            pos += osz
            if unit_type in (_UT_SKELETON, _UT_SPLIT_COMPILE):
                pos += 8
            elif unit_type in (_UT_TYPE, _UT_SPLIT_TYPE):
                pos += 8 + osz
        elif 2 <= version <= 4:
            unit_type = _UT_COMPILE
            table = struct.unpack_from(ofmt, info, pos)[0]
            pos += osz
            addr_size = info[pos]
            pos += 1
        else:
            raise Unreadable("DWARF version %d" % version)
        yield UnitHeader(start, version, unit_type, osz, table, addr_size, pos, unit_end)
        pos = unit_end


@dataclass
class Cover:
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


# ---------------------------------------------------------------- sections


class DebugSections:
    """The sections of one mapped ELF file by name, inflated where compressed: the one section-data reader.

    ``SHF_COMPRESSED`` (zlib) sections and the legacy ``.zdebug_*`` ones (``ZLIB`` + size) are inflated up
    to ``limit`` bytes; ``tfnative doctor`` reads them through it too.
    """

    def __init__(self, elf: ElfFile, mm: mmap.mmap, limit: int = MAX_DECOMPRESS) -> None:
        self.elf = elf
        self.mm = mm
        self.limit = limit
        self.by_name: Dict[str, Section] = {}
        for s in elf.sections:
            self.by_name.setdefault(s.name, s)
        self._inflated: Dict[str, memoryview] = {}

    def present(self, name: str) -> bool:
        s = self.by_name.get(name)
        return s is not None and s.size > 0 and s.type != SHT_NOBITS

    def release(self) -> None:
        """Drops the inflated sections (before the mapping is closed)."""
        self._inflated.clear()

    def _zdebug(self, name: str) -> Optional[Section]:
        """The legacy ``.zdebug_*`` section of a ``.debug_*`` name, when there is no such ``.debug_*`` one."""
        if name in self.by_name or not name.startswith(".debug_"):
            return None
        return self.by_name.get(".z" + name[1:])

    def compression(self, name: str) -> Optional[str]:
        """How the section is compressed (``"zlib"``, ``"zstd"``, ``"zlib (.zdebug, legacy)"``), None if not."""
        if self._zdebug(name) is not None:
            return "zlib (.zdebug, legacy)"
        s = self.by_name.get(name)
        if s is None or not s.flags & SHF_COMPRESSED or s.type == SHT_NOBITS or s.size < 4:
            return None
        ch_type = struct.unpack_from(self.elf.endian + "I", self.mm, s.offset)[0]
        return {ELFCOMPRESS_ZLIB: "zlib", ELFCOMPRESS_ZSTD: "zstd"}.get(ch_type, "type %d" % ch_type)

    def uncompressed_size(self, name: str) -> int:
        """The section's size once inflated (its size where it is not compressed; 0 if absent)."""
        zs = self._zdebug(name)
        if zs is not None:
            zsize: int = struct.unpack_from(">Q", self.mm, zs.offset + 4)[0] if zs.size >= 12 else 0
            return zsize
        s = self.by_name.get(name)
        if s is None:
            return 0
        if s.flags & SHF_COMPRESSED and s.type != SHT_NOBITS:
            return self._chdr(name, s)[1]
        return s.size

    def _chdr(self, name: str, s: Section) -> Tuple[int, int, int]:
        """(type, inflated size, header size) of a ``SHF_COMPRESSED`` section's compression header."""
        hdr = 24 if self.elf.is64 else 12
        if s.size < hdr or s.offset + hdr > len(self.mm):
            raise Unreadable("%s is cut short" % name)
        if self.elf.is64:
            ch_type, _res, ch_size = struct.unpack_from(self.elf.endian + "IIQ", self.mm, s.offset)
        else:
            ch_type, ch_size = struct.unpack_from(self.elf.endian + "II", self.mm, s.offset)
        return ch_type, ch_size, hdr

    def data(self, name: str) -> Optional[memoryview]:
        """The section's bytes, inflated if compressed; None if absent; Unreadable beyond the bounds."""
        if name in self._inflated:
            return self._inflated[name]
        zs = self._zdebug(name)
        s = zs if zs is not None else self.by_name.get(name)
        if s is None or s.type == SHT_NOBITS or s.size == 0:
            return None
        if s.offset + s.size > len(self.mm):
            raise Unreadable("%s is cut short" % name)
        raw = memoryview(self.mm)[s.offset:s.offset + s.size]
        if zs is not None:
            if s.size < 12 or bytes(raw[:4]) != b"ZLIB":
                raise Unreadable("%s has no ZLIB header" % zs.name)
            ch_type, ch_size, hdr = ELFCOMPRESS_ZLIB, self.uncompressed_size(name), 12
        elif not s.flags & SHF_COMPRESSED:
            return raw
        else:
            ch_type, ch_size, hdr = self._chdr(name, s)
        if ch_type != ELFCOMPRESS_ZLIB:
            raise Unreadable("%s is compressed with type %d" % (name, ch_type))
        if ch_size > self.limit:
            raise Unreadable("%s inflates to %d bytes" % (name, ch_size))
        out = memoryview(zlib.decompressobj().decompress(raw[hdr:], self.limit))
        self._inflated[name] = out
        return out


# ---------------------------------------------------------------- compile units


class Abbrev(NamedTuple):
    """One abbreviation: the DIE's tag and its (attribute, form, implicit_const) list."""

    tag: int
    attrs: List[Tuple[int, int, int]]


class Abbrevs:
    """The abbreviation tables of one ``.debug_abbrev``: the one abbreviation reader.

    A table is read entry by entry as far as the code asked for, and resumed from there; every read is
    bounded by the section's end (a number cut short raises ``IndexError``).
    """

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self._entries: Dict[int, Dict[int, Abbrev]] = {}
        self._resume: Dict[int, int] = {}  # where the reading of each table stopped
        self._ends: Dict[int, int] = {}  # the offset past each table read whole
        self._tags: Dict[Tuple[int, int], Set[int]] = {}

    def find(self, table: int, code: int) -> Optional[Abbrev]:
        """Abbreviation ``code`` of the table at offset ``table``; None if the table has none."""
        entries = self._entries.setdefault(table, {})
        if code in entries:
            return entries[code]
        if table in self._ends:
            return None
        d = self.data
        n = len(d)
        pos = self._resume.get(table, table)
        while pos < n:
            c, pos = uleb128(d, pos)
            if c == 0:
                break
            tag, pos = uleb128(d, pos)
            pos += 1  # has_children
            attrs: List[Tuple[int, int, int]] = []
            while pos < n:
                at, pos = uleb128(d, pos)
                form, pos = uleb128(d, pos)
                const = 0
                if form == _FORM_IMPLICIT_CONST:
                    const, pos = sleb128(d, pos)
                if at == 0 and form == 0:
                    break
                attrs.append((at, form, const))
            entries[c] = Abbrev(tag, attrs)
            if c == code:
                self._resume[table] = pos
                return entries[c]
        self._ends[table] = max(pos, table + 1)
        return None

    def end(self, table: int) -> int:
        """The offset just past the table at ``table`` (read whole)."""
        self.find(table, -1)
        return self._ends[table]

    def tags_with(self, table: int, attr: int) -> Set[int]:
        """The tags of the table's abbreviations that have attribute ``attr``."""
        key = (table, attr)
        if key not in self._tags:
            self.find(table, -1)  # reads to the end of the table
            self._tags[key] = {a.tag for a in self._entries.get(table, {}).values()
                               if any(at == attr for at, _f, _c in a.attrs)}
        return self._tags[key]

    def all_tags_with(self, attr: int) -> Set[int]:
        """The tags with attribute ``attr`` in every table of the section, end to end."""
        tags: Set[int] = set()
        pos = 0
        n = len(self.data)
        while pos < n:
            tags |= self.tags_with(pos, attr)
            pos = self.end(pos)  # past the table: the next one's offset (always further on)
        return tags


def inline_string(d: memoryview, off: int, end: Optional[int] = None) -> str:
    """The ``DW_FORM_string`` at ``off`` (what ``first_die`` gives as its value), up to 4096 bytes."""
    raw = bytes(d[off:min(len(d) if end is None else end, off + 4096)])
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def cstr(d: Optional[memoryview], off: int) -> Optional[str]:
    """The NUL-terminated string at ``off`` of a string section (up to 4096 bytes), None past its end."""
    if d is None or off >= len(d):
        return None
    return inline_string(d, off)


def string_of(fv: Optional[Tuple[int, int]], vals: Dict[int, Tuple[int, int]], info: memoryview,
              section: Callable[[str], Optional[memoryview]], osz: int, e: str, suffix: str = "") -> Optional[str]:
    """The string a first-DIE attribute ``fv`` (form, value from ``first_die``) of a unit with attributes ``vals``
    names, or None where it cannot be read: inline, in ``.debug_str``/``.debug_line_str``, or through
    ``.debug_str_offsets`` (``section(name)`` gives a section's bytes; ``suffix``: ``".dwo"`` in a split unit)."""
    if fv is None:
        return None
    form, val = fv
    if form == _FORM_STRING:
        return inline_string(info, val)
    if form == _FORM_STRP:
        return cstr(section(".debug_str" + suffix), val)
    if form == _FORM_LINE_STRP:
        return cstr(section(".debug_line_str"), val)
    if form in _FORM_STRX:
        offs = section(".debug_str_offsets" + suffix)
        base = (vals.get(_AT_STR_OFFSETS_BASE) or (0, None))[1]
        at = (base if base is not None else (8 if osz == 4 else 16)) + val * osz
        if offs is None or at + osz > len(offs):
            return None
        return cstr(section(".debug_str" + suffix), struct.unpack_from(e + ("Q" if osz == 8 else "I"), offs, at)[0])
    if form in (0x1D, 0x1F21):  # DW_FORM_strp_sup, DW_FORM_GNU_strp_alt
        return "<string in the supplementary (dwz) file>"
    return None


def first_die(d: memoryview, pos: int, h: UnitHeader, attrs: List[Tuple[int, int, int]], e: str,
              wanted: Container[int]) -> Dict[int, Tuple[int, int]]:
    """The ``wanted`` attributes (form, value) of unit ``h``'s first DIE at ``pos``, its abbreviation ``attrs``:
    the one DIE attribute reader.

    An inline string's value is its offset in ``d`` (``inline_string``); an address is read as a number.
    Raises ``Unreadable`` for a form it does not know, an unterminated string or a DIE that runs past its
    unit, and ``IndexError``/``struct.error`` past the section's end.
    """
    end, addr_size, osz, version = h.end, h.address_size, h.offset_size, h.version
    vals: Dict[int, Tuple[int, int]] = {}
    for at, form, const in attrs:
        if pos > end:
            raise Unreadable("a unit's first DIE runs past the unit")
        while form == _FORM_INDIRECT:
            form, pos = uleb128(d, pos)
        val = 0
        if form == _FORM_STRING:
            raw = bytes(d[pos:min(end, pos + 4096)])
            stop = raw.find(b"\0")
            if stop < 0:
                raise Unreadable("an unterminated string")
            val = pos
            pos += stop + 1
        elif form in _OFFSET_FORMS or (form == 0x10 and version >= 3):
            val = struct.unpack_from(e + ("Q" if osz == 8 else "I"), d, pos)[0]
            pos += osz
        elif form in (0x01, 0x10):
            val = int.from_bytes(bytes(d[pos:pos + addr_size]), "little" if e == "<" else "big")
            pos += addr_size
        elif form in _ULEB_FORMS:
            val, pos = uleb128(d, pos)
        elif form == 0x0D:
            val, pos = sleb128(d, pos)
        elif form == _FORM_IMPLICIT_CONST:
            val = const
        elif form in _FIXED:
            k = _FIXED[form]
            val = int.from_bytes(bytes(d[pos:pos + k]), "little" if e == "<" else "big")
            pos += k
        elif form in (0x03, 0x04, 0x09, 0x0A, 0x18):  # blocks
            if form == 0x03:
                k = struct.unpack_from(e + "H", d, pos)[0]
                pos += 2
            elif form == 0x04:
                k = struct.unpack_from(e + "I", d, pos)[0]
                pos += 4
            elif form == 0x0A:
                k = d[pos]
                pos += 1
            else:
                k, pos = uleb128(d, pos)
            pos += k
        else:
            raise Unreadable("DWARF form 0x%x" % form)
        if at in wanted:
            vals[at] = (form, val)
    return vals


def _units(info: memoryview, abbrevs: Abbrevs,
           e: str) -> Iterator[Tuple[int, int, int, Dict[int, Tuple[int, int]]]]:
    """(version, address size, offset size, {attribute: (form, value)}) of each unit's first DIE."""
    n = len(info)
    for count, h in enumerate(unit_headers(info, e), 1):
        if count > MAX_UNITS:
            raise Unreadable("more than %d compile units" % MAX_UNITS)
        if h.end > n:
            raise Unreadable(".debug_info is cut short")
        if h.unit_type in (_UT_COMPILE, _UT_PARTIAL, _UT_SKELETON):
            code, pos = uleb128(info, h.die)
            ab = abbrevs.find(h.abbrev_offset, code) if code else None
            if ab is not None and ab.tag in (_TAG_COMPILE_UNIT, _TAG_PARTIAL_UNIT, _TAG_SKELETON_UNIT):
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
        return string_of(vals.get(_AT_NAME), vals, info, self.sec, osz, self.e)


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
        addr_base = (vals.get(_AT_ADDR_BASE) or vals.get(_AT_GNU_ADDR_BASE) or (0, None))[1]

        def address(fv: Tuple[int, int]) -> int:
            form, val = fv
            if form in (_FORM_ADDRX, _FORM_GNU_ADDR_INDEX) or form in _FORM_ADDRX_N:
                return self._addrx(val, addr_base, addr_size, osz)
            return val

        low = address(vals[_AT_LOW_PC]) if _AT_LOW_PC in vals else 0
        if _AT_RANGES in vals:
            form, val = vals[_AT_RANGES]
            if version >= 5:
                rbase = (vals.get(_AT_RNGLISTS_BASE) or (0, None))[1]
                self._rnglist(out, form, val, rbase, low, addr_size, osz, addr_base)
            else:
                gnu_base = (vals.get(_AT_GNU_RANGES_BASE) or (0, 0))[1] or 0
                self._ranges_v4(out, val + gnu_base, low, addr_size)
        elif _AT_LOW_PC in vals and _AT_HIGH_PC in vals:
            form, val = vals[_AT_HIGH_PC]
            is_address = form in (_FORM_ADDR, _FORM_ADDRX, _FORM_GNU_ADDR_INDEX) or form in _FORM_ADDRX_N
            hi = address(vals[_AT_HIGH_PC]) if is_address else low + val  # a constant: the length (DWARF 4+)
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
        if form == _FORM_RNGLISTX:
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
