"""What ``tfnative doctor`` reads of one shared object, and only that: its section headers and their sizes, the
build-id, the ``.gnu_debuglink`` (``Elf``), and for DWARF the unit headers and each unit's first DIE (name,
compilation directory, producer, ``.dwo`` name) with its abbreviation table (``DwarfReader``, ``Unit``).  No line
table, no DIE tree, no symbol table is parsed, so the cost does not grow with the amount of DWARF."""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Dict, Iterator, Optional

from ..core.binary import debugsections, dwarf
from ..core.binary.elf import SHT_NOBITS, ElfError, ElfFile, Section
from ..core.binary.leb128 import uleb128 as _uleb
from ..errors import TfnativeError

MAX_DECOMPRESS = 1 << 30  # decompress .debug_info up to 1 GiB to walk its units
MAX_ABBREV_SCANS = 400  # unit abbreviation tables scanned for local-variable entries

# DWARF constants (DWARF 5, section 7)
DW_TAG_formal_parameter = 0x05
DW_TAG_compile_unit = 0x11
DW_TAG_variable = 0x34
DW_TAG_partial_unit = 0x3C
DW_TAG_skeleton_unit = 0x4A
DW_AT_location = 0x02
DW_AT_name = 0x03
DW_AT_language = 0x13
DW_AT_comp_dir = 0x1B
DW_AT_producer = 0x25
DW_AT_str_offsets_base = 0x72
DW_AT_dwo_name = 0x76
DW_AT_GNU_dwo_name = 0x2130
DW_UT_compile, DW_UT_type, DW_UT_partial, DW_UT_skeleton, DW_UT_split_compile, DW_UT_split_type = 1, 2, 3, 4, 5, 6
WANTED_ATTRS = (DW_AT_name, DW_AT_comp_dir, DW_AT_producer, DW_AT_str_offsets_base, DW_AT_dwo_name,
                DW_AT_GNU_dwo_name)


# ---------------------------------------------------------------- ELF sections


class Elf:
    """Section headers of an ELF file, and their (lazily mapped, decompressed) contents.

    The headers are ``core/binary/elf.py``'s ``ElfFile``'s, the sections' bytes ``core/binary/debugsections.py``'s
    ``DebugSections``'; this class opens the file and says what doctor asks of it.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._f = open(path, "rb")
        except OSError as exc:
            raise TfnativeError("cannot read %s: %s" % (path, exc.strerror or exc))
        self.size = os.fstat(self._f.fileno()).st_size
        try:
            self._m = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
            elf = ElfFile(self._m, path)
        except (ValueError, ElfError, struct.error) as exc:  # empty file, not ELF, cut short
            self.close()
            msg = str(exc) if isinstance(exc, ElfError) else "%s: not an ELF file (%s)" % (path, exc)
            raise TfnativeError(msg) from None
        self.elf = elf
        self.is64 = elf.is64
        self.end = elf.endian
        self.e_type, self.machine = elf.e_type, elf.e_machine
        self.secs = debugsections.DebugSections(elf, self._m, MAX_DECOMPRESS)
        self.sections: Dict[str, Section] = self.secs.by_name
        self.why_unread: Dict[str, str] = {}  # section name -> why ``data`` gave None for it

    def close(self) -> None:
        m = getattr(self, "_m", None)
        secs = getattr(self, "secs", None)
        if secs is not None:
            secs.release()
        if m is not None:
            try:
                m.close()
            except BufferError:  # a memoryview of it is still alive: the map goes with the last one
                pass
        self._f.close()

    def __enter__(self) -> Elf:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def has(self, name: str) -> bool:
        return self.secs.present(name)

    def compression(self, name: str) -> Optional[str]:
        return self.secs.compression(name)

    def uncompressed_size(self, name: str) -> int:
        s = self.sections.get(name)
        if s is not None and s.type == SHT_NOBITS:  # a stripped debug file's .text: no bytes in the file
            return 0
        try:
            return self.secs.uncompressed_size(name)
        except (dwarf.Unreadable, struct.error):
            return 0

    def data(self, name: str) -> Optional[memoryview]:
        """A section's bytes (decompressed); None when absent, or unreadable (``why_unread`` says why)."""
        try:
            return self.secs.data(name)
        except (dwarf.Unreadable, struct.error, zlib.error) as exc:
            self.why_unread[name] = str(exc)
            return None

    def symbols(self, name: str) -> int:
        s = self.sections.get(name)
        if s is None or not s.size or s.type == SHT_NOBITS:
            return 0
        entsize = s.entsize or (24 if self.is64 else 16)
        return max(0, s.size // entsize - 1)  # entry 0 is the null symbol

    def build_id(self) -> Optional[str]:
        return self.elf.build_id()


# ---------------------------------------------------------------- DWARF unit headers


@dataclass
class Unit:
    offset: int
    version: int
    unit_type: int
    offset_size: int
    name: Optional[str] = None
    comp_dir: Optional[str] = None
    producer: Optional[str] = None
    dwo_name: Optional[str] = None
    locals: Optional[bool] = None


class DwarfReader:
    """The compile units of ``.debug_info`` (or ``.debug_info.dwo``) and their first DIE's names.

    The unit headers, abbreviations and DIE attributes are ``core/binary/dwarf.py``'s readers; a unit whose
    first DIE cannot be read (an unknown form, cut short) is counted without its names (``unreadable``).
    """

    def __init__(self, elf: Elf, suffix: str = "") -> None:
        self.elf = elf
        self.suffix = suffix
        self.info = elf.data(".debug_info" + suffix)
        abbrev = elf.data(".debug_abbrev" + suffix)
        self.abbrevs = dwarf.Abbrevs(abbrev) if abbrev is not None else None
        self.unreadable = 0  # units whose first DIE was not read
        self.why_unreadable = ""
        self._sections: Dict[str, Optional[memoryview]] = {}

    def _section(self, name: str) -> Optional[memoryview]:
        if name not in self._sections:
            self._sections[name] = self.elf.data(name)
        return self._sections[name]

    def units(self, scan_locals: int = MAX_ABBREV_SCANS) -> Iterator[Unit]:
        d = self.info
        if d is None or self.abbrevs is None:
            return
        scanned = 0
        try:
            for h in dwarf.unit_headers(d, self.elf.end):
                if h.unit_type in (DW_UT_compile, DW_UT_partial, DW_UT_skeleton, DW_UT_split_compile):
                    unit = Unit(h.start, h.version, h.unit_type, h.offset_size)
                    try:
                        self._first_die(unit, d, h)
                    except (dwarf.Unreadable, IndexError, struct.error) as exc:
                        self.unreadable += 1
                        self.why_unreadable = self.why_unreadable or str(exc) or type(exc).__name__
                    if scanned < scan_locals:
                        try:
                            tags = self.abbrevs.tags_with(h.abbrev_offset, DW_AT_location)
                            unit.locals = DW_TAG_formal_parameter in tags or DW_TAG_variable in tags
                            scanned += 1
                        except (IndexError, struct.error):
                            pass
                    yield unit
        except (dwarf.Unreadable, IndexError, struct.error):
            return  # a reserved length or an unknown version: the units before it are all that can be read

    def _first_die(self, unit: Unit, d: memoryview, h: dwarf.UnitHeader) -> None:
        assert self.abbrevs is not None
        code, pos = _uleb(d, h.die)
        ab = self.abbrevs.find(h.abbrev_offset, code) if code else None
        if ab is None or ab.tag not in (DW_TAG_compile_unit, DW_TAG_skeleton_unit, DW_TAG_partial_unit):
            return
        # a unit cut short by the section's end: its DIE is read as far as the section goes
        vals = dwarf.first_die(d, pos, h._replace(end=min(h.end, len(d))), ab.attrs, self.elf.end,
                                    WANTED_ATTRS)
        osz, e, sfx = unit.offset_size, self.elf.end, self.suffix
        unit.name = dwarf.string_of(vals.get(DW_AT_name), vals, d, self._section, osz, e, sfx)
        unit.comp_dir = dwarf.string_of(vals.get(DW_AT_comp_dir), vals, d, self._section, osz, e, sfx)
        unit.producer = dwarf.string_of(vals.get(DW_AT_producer), vals, d, self._section, osz, e, sfx)
        unit.dwo_name = dwarf.string_of(vals.get(DW_AT_dwo_name) or vals.get(DW_AT_GNU_dwo_name), vals, d,
                                             self._section, osz, e, sfx)
