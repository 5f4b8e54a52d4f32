"""The DWARF reader: unit headers of ``.debug_info`` (``unit_headers``), abbreviation tables (``Abbrevs``), a unit's
first DIE (``first_die``) and the strings its attributes name (``string_of``); ``Unreadable`` for DWARF it cannot
read within its bounds.  Every read is bounded by its section's end."""

from __future__ import annotations

import struct
from typing import Callable, Container, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

from .leb128 import sleb128, uleb128

# DWARF 5, section 7
TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT, TAG_SKELETON_UNIT = 0x11, 0x3C, 0x4A
AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES, AT_STR_OFFSETS_BASE = 0x03, 0x11, 0x12, 0x55, 0x72
AT_ADDR_BASE, AT_RNGLISTS_BASE, AT_GNU_RANGES_BASE, AT_GNU_ADDR_BASE = 0x73, 0x74, 0x2132, 0x2133
FORM_STRING, FORM_STRP, FORM_LINE_STRP = 0x08, 0x0E, 0x1F
FORM_INDIRECT, FORM_IMPLICIT_CONST = 0x16, 0x21
FORM_STRX = {0x1A, 0x25, 0x26, 0x27, 0x28, 0x1F02}
UT_COMPILE, UT_PARTIAL, UT_SKELETON, UT_SPLIT_COMPILE, UT_TYPE, UT_SPLIT_TYPE = 1, 3, 4, 5, 2, 6
FORM_ADDR, FORM_ADDRX, FORM_GNU_ADDR_INDEX = 0x01, 0x1B, 0x1F01
FORM_ADDRX_N = {0x29: 1, 0x2A: 2, 0x2B: 3, 0x2C: 4}
FORM_RNGLISTX = 0x23
FIXED = {0x05: 2, 0x06: 4, 0x07: 8, 0x0B: 1, 0x0C: 1, 0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8, 0x19: 0,
          0x1C: 4, 0x1E: 16, 0x20: 8, 0x21: 0, 0x24: 8, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4, 0x29: 1,
          0x2A: 2, 0x2B: 3, 0x2C: 4}
ULEB_FORMS = {0x0F, 0x15, 0x1A, 0x1B, 0x22, 0x23, 0x1F01, 0x1F02}
OFFSET_FORMS = {0x0E, 0x17, 0x1D, 0x1F, 0x1F20, 0x1F21}


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
            if unit_type in (UT_SKELETON, UT_SPLIT_COMPILE):
                pos += 8
            elif unit_type in (UT_TYPE, UT_SPLIT_TYPE):
                pos += 8 + osz
        elif 2 <= version <= 4:
            unit_type = UT_COMPILE
            table = struct.unpack_from(ofmt, info, pos)[0]
            pos += osz
            addr_size = info[pos]
            pos += 1
        else:
            raise Unreadable("DWARF version %d" % version)
        yield UnitHeader(start, version, unit_type, osz, table, addr_size, pos, unit_end)
        pos = unit_end


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
                if form == FORM_IMPLICIT_CONST:
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
    if form == FORM_STRING:
        return inline_string(info, val)
    if form == FORM_STRP:
        return cstr(section(".debug_str" + suffix), val)
    if form == FORM_LINE_STRP:
        return cstr(section(".debug_line_str"), val)
    if form in FORM_STRX:
        offs = section(".debug_str_offsets" + suffix)
        base = (vals.get(AT_STR_OFFSETS_BASE) or (0, None))[1]
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
        while form == FORM_INDIRECT:
            form, pos = uleb128(d, pos)
        val = 0
        if form == FORM_STRING:
            raw = bytes(d[pos:min(end, pos + 4096)])
            stop = raw.find(b"\0")
            if stop < 0:
                raise Unreadable("an unterminated string")
            val = pos
            pos += stop + 1
        elif form in OFFSET_FORMS or (form == 0x10 and version >= 3):
            val = struct.unpack_from(e + ("Q" if osz == 8 else "I"), d, pos)[0]
            pos += osz
        elif form in (0x01, 0x10):
            val = int.from_bytes(bytes(d[pos:pos + addr_size]), "little" if e == "<" else "big")
            pos += addr_size
        elif form in ULEB_FORMS:
            val, pos = uleb128(d, pos)
        elif form == 0x0D:
            val, pos = sleb128(d, pos)
        elif form == FORM_IMPLICIT_CONST:
            val = const
        elif form in FIXED:
            k = FIXED[form]
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
