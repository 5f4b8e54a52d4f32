"""``tfnative doctor``: what debug info does a shared object carry, and what can gdb do with it?

Fast by construction: it reads the ELF section headers, the build-id note, the
``.gnu_debuglink`` section, and for DWARF only the unit headers and the first DIE
of each compile unit (``DW_TAG_compile_unit`` / ``DW_TAG_skeleton_unit``: its
name, compilation directory, producer, ``.dwo`` name) plus that unit's abbreviation
table.  No line table, no DIE tree, no symbol table is parsed, so the cost does
not grow with the amount of DWARF (timings: docs/benchmarks.md, "Build presets").
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import zlib
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..core import debugsections, dwarf, dwarfcover, frameclass, libfacts, procfs
from ..core.elf import SHT_NOBITS, ElfError, ElfFile, Section
from ..core.leb128 import uleb128 as _uleb
from ..errors import TfnativeError

MAX_DECOMPRESS = 1 << 30  # decompress .debug_info up to 1 GiB to walk its units
MAX_ABBREV_SCANS = 400  # unit abbreviation tables scanned for local-variable entries
MAX_DWO_PROBES = 20

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

    The headers are ``core/elf.py``'s ``ElfFile``'s, the sections' bytes ``core/debugsections.py``'s
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

    The unit headers, abbreviations and DIE attributes are ``core/dwarf.py``'s readers; a unit whose
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


# ---------------------------------------------------------------- the report


@dataclass
class Report:
    path: str
    size: int
    build_id: Optional[str]
    symtab: bool
    symtab_symbols: int
    dynsym_symbols: int
    dwarf_units: int = 0
    dwarf_tensorflow_units: int = 0
    dwarf_versions: List[int] = field(default_factory=list)
    dwarf64: bool = False
    dwarf_files: List[str] = field(default_factory=list)
    dwarf_size: int = 0
    compressed: Optional[str] = None
    line_tables: bool = False
    locals_units: Optional[int] = None
    producers: List[str] = field(default_factory=list)
    split_units: int = 0
    dwo_found: int = 0
    dwo_missing: List[str] = field(default_factory=list)
    dwp: Optional[str] = None
    debuglink: Optional[str] = None
    debuglink_found: Optional[str] = None
    debuglink_plausible: bool = False  # the section names a debug file (not ``crti.o``, not several links)
    code_bytes: int = 0  # bytes of executable sections
    dwarf_code_bytes: int = 0  # of those, described by some compile unit's address ranges
    dwarf_code_share: float = 0.0
    dwarf_runtime_units: int = 0  # units from a compiler's runtime library (libstdc++, libgcc), linked in
    dwarf_own_code: bool = False  # the DWARF describes the library's own code (``core/dwarfcover.py``)
    index: Optional[str] = None
    can_break_functions: bool = False
    can_see_lines: bool = False
    can_see_locals: bool = False
    next_preset: Optional[str] = None
    verdict: str = ""
    notes: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def find_debuglink(path: str, name: str, build_id: Optional[str]) -> Optional[str]:
    """Where gdb would find the separate debug file (same order as gdb's default search)."""
    return dwarfcover.find_debug_file(path, name, build_id)


def _substitute(path: str, subs: List[Tuple[str, str]]) -> List[str]:
    out = []
    for frm, to in subs:
        if path == frm or path.startswith(frm.rstrip("/") + "/"):
            out.append(to + path[len(frm.rstrip("/")):])
    return out


def _dwo_candidates(unit: Unit, obj_dir: str, subs: List[Tuple[str, str]]) -> List[str]:
    name = unit.dwo_name or ""
    if os.path.isabs(name):
        full = [name]
    else:
        full = [os.path.join(unit.comp_dir or "", name)] if unit.comp_dir else []
        full.append(name)
    cands = []
    for f in full:
        cands += _substitute(f, subs)
        if not f.startswith("/proc/self/cwd"):
            cands.append(f)
    cands.append(os.path.join(obj_dir, os.path.basename(name)))
    return cands


_GFLAG = re.compile(r"(?:^|\s)(-g(?:0|1|2|3|line-tables-only|line-directives-only)?)(?=\s|$)")


def _last_g(producer: Optional[str]) -> Optional[str]:
    if not producer:
        return None
    flags = _GFLAG.findall(producer)
    return flags[-1] if flags else None


def _is_tensorflow(name: str) -> bool:
    return name.startswith("tensorflow/") or "/tensorflow/" in name


def inspect(path: str, source_dirs: Optional[List[str]] = None, _follow: bool = True) -> Report:
    """Everything ``tfnative doctor`` says about one ELF file."""
    from .bazelpaths import substitutions

    subs = substitutions(list(source_dirs or []))
    with Elf(path) as elf:
        rep = Report(path=path, size=elf.size, build_id=elf.build_id(), symtab=elf.has(".symtab"),
                     symtab_symbols=elf.symbols(".symtab"), dynsym_symbols=elf.symbols(".dynsym"))
        cov = dwarfcover.cover(path)
        if cov.debuglink is not None or cov.debuglink_note:  # the section dwarfcover read (one reader)
            rep.debuglink = cov.debuglink or ""
            rep.debuglink_plausible = cov.debuglink_plausible
            if cov.debuglink_plausible:
                rep.debuglink_found = find_debuglink(path, rep.debuglink, rep.build_id)
            else:
                rep.notes.append("%s: ignored (gdb finds no debug file by it)" % cov.debuglink_note)
        _cover(rep, cov)
        if elf.has(".gdb_index"):
            rep.index = ".gdb_index"
        elif elf.has(".debug_names"):
            rep.index = ".debug_names"
        rep.dwarf_size = sum(elf.uncompressed_size(s.name) for s in elf.sections.values()
                             if s.name.startswith((".debug_", ".zdebug_")))
        rep.compressed = elf.compression(".debug_info")
        rep.line_tables = bool(elf.sections.get(".debug_line") or elf.sections.get(".zdebug_line"))
        if elf.sections.get(".debug_info") or elf.sections.get(".zdebug_info"):
            if elf.data(".debug_info") is None:
                if rep.compressed:
                    rep.notes.append(".debug_info is %s-compressed (%d bytes uncompressed): units not counted"
                                     % (rep.compressed, elf.uncompressed_size(".debug_info")))
                else:
                    rep.notes.append(".debug_info not read (%s): units not counted"
                                     % elf.why_unread.get(".debug_info", "empty"))
            _read_units(rep, DwarfReader(elf), path, subs)
    if rep.debuglink_found and _follow:
        try:
            other = inspect(rep.debuglink_found, source_dirs, _follow=False)
        except TfnativeError:
            other = None
        if other is not None and other.dwarf_units > rep.dwarf_units:
            for k in ("dwarf_units", "dwarf_tensorflow_units", "dwarf_versions", "dwarf64", "dwarf_files",
                      "compressed", "line_tables", "locals_units", "producers", "split_units", "dwo_found",
                      "dwo_missing", "index", "dwarf_code_bytes", "dwarf_code_share", "dwarf_own_code",
                      "dwarf_runtime_units"):
                setattr(rep, k, getattr(other, k))
            rep.notes.append("DWARF read from the separate debug file %s" % rep.debuglink_found)
    _verdict(rep)
    return rep


def _cover(rep: Report, cov: dwarfcover.Cover) -> None:
    """How much of the code the DWARF describes: a few units of the C++ runtime are no debug build."""
    rep.code_bytes = cov.code_bytes
    rep.dwarf_code_bytes = cov.described_bytes
    rep.dwarf_code_share = round(cov.share, 6)
    rep.dwarf_own_code = cov.describes_code
    rep.dwarf_runtime_units = cov.runtime_units
    if cov.has_dwarf and not cov.readable:
        rep.notes.append("the units' address ranges were not read (%s): taken as describing the code"
                         % cov.why_unreadable)


def _read_units(rep: Report, reader: DwarfReader, path: str, subs: List[Tuple[str, str]]) -> None:
    versions = set()
    producers: Dict[str, int] = {}
    locals_units = 0
    scanned = 0
    split: List[Unit] = []
    for u in reader.units():
        rep.dwarf_units += 1
        versions.add(u.version)
        rep.dwarf64 = rep.dwarf64 or u.offset_size == 8
        name = u.name or u.dwo_name or "?"  # a skeleton unit's name is in its .dwo
        rep.dwarf_files.append(name)
        if _is_tensorflow(name):
            rep.dwarf_tensorflow_units += 1
        g = _last_g(u.producer)
        if u.producer:
            key = u.producer.split(" -", 1)[0] + (" " + g if g else "")
            producers[key] = producers.get(key, 0) + 1
        if u.dwo_name or u.unit_type == DW_UT_skeleton:
            split.append(u)
        elif u.locals is not None:
            scanned += 1
            locals_units += bool(u.locals)
    if reader.unreadable:
        rep.notes.append("the first entry of %d of the %d compile units was not read (%s): their names are "
                         "not shown" % (reader.unreadable, rep.dwarf_units, reader.why_unreadable))
    rep.dwarf_versions = sorted(versions)
    rep.producers = ["%s (%d units)" % (k, n) for k, n in sorted(producers.items())]
    if split:
        rep.split_units = len(split)
        _check_split(rep, split, path, subs)
    elif scanned:
        # the scanned share, scaled to every unit
        rep.locals_units = round(locals_units * rep.dwarf_units / scanned)


def _check_split(rep: Report, split: List[Unit], path: str, subs: List[Tuple[str, str]]) -> None:
    obj_dir = os.path.dirname(os.path.abspath(path))
    for cand in (path + ".dwp", os.path.join(obj_dir, os.path.basename(os.path.realpath(path)) + ".dwp")):
        if os.path.isfile(cand):
            rep.dwp = cand
            break
    locals_units = 0
    probed = 0
    names = {f: i for i, f in enumerate(rep.dwarf_files)}
    for u in split:
        found = None
        for c in _dwo_candidates(u, obj_dir, subs):
            if os.path.isfile(c):
                found = c
                break
        if found is not None and not u.name:
            try:
                with Elf(found) as dwo:
                    for du in DwarfReader(dwo, ".dwo").units(scan_locals=0):
                        if du.name and u.dwo_name in names:
                            rep.dwarf_files[names[u.dwo_name]] = du.name
                            if _is_tensorflow(du.name):
                                rep.dwarf_tensorflow_units += 1
                        break
            except TfnativeError:
                pass
        if found is None:
            if rep.dwp is None:
                rep.dwo_missing.append(u.dwo_name or "?")
            continue
        rep.dwo_found += 1
        if probed < MAX_DWO_PROBES:
            probed += 1
            try:
                with Elf(found) as dwo:
                    for du in DwarfReader(dwo, ".dwo").units():
                        locals_units += bool(du.locals)
                        break
            except TfnativeError:
                pass
    if rep.dwp is not None:
        # a .dwp shares one .debug_abbrev.dwo (units find theirs through .debug_cu_index): look at all of it
        try:
            with Elf(rep.dwp) as dwp:
                abbrev = dwp.data(".debug_abbrev.dwo")
                tags = dwarf.Abbrevs(abbrev).all_tags_with(DW_AT_location) if abbrev is not None else set()
            has = DW_TAG_formal_parameter in tags or DW_TAG_variable in tags
            rep.locals_units = len(split) if has else 0
        except TfnativeError:
            pass
    elif probed:
        rep.locals_units = round(locals_units * len(split) / probed)


def _verdict(rep: Report) -> None:
    """The report's verdict: what gdb can do with the file, and the next step (``next_preset``)."""
    rep.can_break_functions = rep.symtab_symbols > 0 or rep.dynsym_symbols > 0
    has_units = rep.dwarf_units > 0 and rep.dwarf_own_code
    split_ok = rep.split_units == 0 or rep.dwp is not None or not rep.dwo_missing
    rep.can_see_lines = has_units and rep.line_tables and split_ok
    rep.can_see_locals = rep.can_see_lines and bool(rep.locals_units)
    parts = _abilities(rep, has_units, split_ok)
    rep.next_preset, nxt = _next_step(rep, has_units, split_ok)
    rep.verdict = "you can %s. Next: %s." % ("; ".join(parts), nxt)


def _abilities(rep: Report, has_units: bool, split_ok: bool) -> List[str]:
    """What gdb can do with the file: break on which functions, see which lines and locals."""
    parts = []
    if rep.symtab:
        parts.append("break on any function (%d symbols in .symtab)" % rep.symtab_symbols)
    elif rep.dynsym_symbols:
        parts.append("break only on exported functions (%d in .dynsym; no .symtab: internal functions "
                     "and static ones show as ??)" % rep.dynsym_symbols)
    else:
        parts.append("no symbols at all: frames show as ??")
    if rep.can_see_lines:
        where = "in %d of its %d compile units" % (rep.locals_units or 0, rep.dwarf_units)
        if rep.can_see_locals and rep.locals_units and rep.locals_units >= rep.dwarf_units:
            parts.append("see file:line and break on FILE:LINE, see locals and arguments")
        elif rep.can_see_locals:
            parts.append("see file:line and break on FILE:LINE in %d files; locals only %s"
                         % (rep.dwarf_units, where))
        else:
            parts.append("see file:line and break on FILE:LINE (%d files) but no locals (line tables only)"
                         % rep.dwarf_units)
    elif has_units and not split_ok:
        parts.append("the DWARF is split and %d of %d .dwo files are missing: no lines or locals for those "
                     "units (pass --source-dir WORKSPACE, or build and ship the .dwp)"
                     % (len(rep.dwo_missing), rep.split_units))
    elif rep.dwarf_units:
        parts.append("no file:line, no locals: its %d DWARF units (%d from a compiler's runtime library) describe "
                     "%.3f%% of its code, none of its own" % (rep.dwarf_units, rep.dwarf_runtime_units,
                                                               100 * rep.dwarf_code_share))
    else:
        parts.append("no DWARF: no file:line, no locals")
    return parts


def _next_step(rep: Report, has_units: bool, split_ok: bool) -> Tuple[Optional[str], str]:
    """(the build preset that gets the file further or None, what to do): what gets you further."""
    preset: Optional[str]
    if rep.debuglink and rep.debuglink_plausible and not rep.debuglink_found:
        preset = None
        nxt = ("install the separate debug file %s (the distribution's -dbgsym/-dbg package, or debuginfod)"
               % rep.debuglink)
    elif not rep.symtab:
        preset = "tfn_lines"
        nxt = "rebuild with --config=tfn_lines (or at least --strip=never to keep .symtab)"
    elif not has_units:
        preset = "tfn_lines"
        nxt = ("rebuild with --config=tfn_lines for file:line everywhere, or --config=tfn_targeted "
               "(tfnative bazelrc tfn_targeted --files REGEX) for locals in the files you care about")
    elif not split_ok:
        preset = "tfn_split"
        nxt = "keep the build tree, or 'bazel build TARGET.dwp' and put the .dwp next to the library"
    elif not rep.can_see_locals:
        preset = "tfn_targeted"
        nxt = "add --config=tfn_targeted with --files REGEX for the files whose locals you need"
    elif rep.index is None and rep.dwarf_size > 256 * 1024 * 1024:
        preset = "tfn_index"
        nxt = ("add --config=tfn_index: %d MB of DWARF without an index takes gdb minutes to load"
               % (rep.dwarf_size >> 20))
    elif rep.locals_units is not None and rep.locals_units < rep.dwarf_units:
        preset = "tfn_targeted"
        nxt = "widen the --files regexes of tfn_targeted (or tfn_symbols) to see locals elsewhere"
    else:
        preset = None
        nxt = "nothing to add"
    return preset, nxt


# ---------------------------------------------------------------- text output


def _mb(n: int) -> str:
    return "%.1f MB" % (n / 1e6) if n >= 1e6 else "%.1f kB" % (n / 1e3)


def render(rep: Report, max_files: int = 8) -> str:
    lines = [rep.path]
    lines.append("  size        %s, build-id %s" % (_mb(rep.size), rep.build_id or "none"))
    lines.append("  symbols     .symtab: %s, .dynsym: %d"
                 % ("%d" % rep.symtab_symbols if rep.symtab else "absent", rep.dynsym_symbols))
    if rep.dwarf_units:
        extra = []
        if rep.dwarf64:
            extra.append("DWARF64")
        if rep.compressed:
            extra.append("compressed: %s" % rep.compressed)
        if rep.split_units:
            extra.append("split: %d skeleton units" % rep.split_units)
        lines.append("  DWARF       %d compile units (%d under tensorflow/), version %s, %s of debug sections%s"
                     % (rep.dwarf_units, rep.dwarf_tensorflow_units,
                        "/".join(str(v) for v in rep.dwarf_versions), _mb(rep.dwarf_size),
                        (", " + ", ".join(extra)) if extra else ""))
        shown = rep.dwarf_files[:max_files]
        more = len(rep.dwarf_files) - len(shown)
        lines.append("  units       %s%s" % (", ".join(shown), " (+%d more)" % more if more else ""))
        if rep.locals_units is not None:
            lines.append("  locals      %d of %d units describe variables%s"
                         % (rep.locals_units, rep.dwarf_units,
                            "" if rep.locals_units >= rep.dwarf_units else " (the rest: line tables only)"))
        for p in rep.producers[:3]:
            lines.append("  producer    %s" % p)
        if rep.split_units:
            if rep.dwp:
                lines.append("  .dwp        %s" % rep.dwp)
            lines.append("  .dwo        %d found, %d missing%s" % (
                rep.dwo_found, len(rep.dwo_missing),
                (" (e.g. %s)" % rep.dwo_missing[0]) if rep.dwo_missing else ""))
    else:
        lines.append("  DWARF       none%s" % (" (only %s of debug sections)" % _mb(rep.dwarf_size)
                                               if rep.dwarf_size else ""))
    if rep.dwarf_units and rep.code_bytes:
        lines.append("  covers      %s of %s of code (%.3f%%)%s"
                     % (_mb(rep.dwarf_code_bytes), _mb(rep.code_bytes), 100 * rep.dwarf_code_share,
                        "" if rep.dwarf_own_code else
                        ": not the library's own code (%d of %d units from a compiler's runtime library)"
                        % (rep.dwarf_runtime_units, rep.dwarf_units)))
    if rep.debuglink:
        lines.append("  debuglink   %s -> %s" % (rep.debuglink, rep.debuglink_found or (
            "NOT FOUND" if rep.debuglink_plausible else "ignored (names no debug file)")))
    lines.append("  index       %s" % (rep.index or "none (gdb indexes the DWARF itself at load time)"))
    for n in rep.notes:
        lines.append("  note        %s" % n)
    lines.append("  verdict     %s" % rep.verdict)
    return "\n".join(lines)


# ---------------------------------------------------------------- a process's own libraries


def process_libraries(pid: int) -> List[Tuple[str, str]]:
    """(the path process ``pid`` maps it at, the path to read it by) of each library of the user's it maps:
    op libraries and the others ``frameclass.library_class`` classes ``user`` (the rule every stack uses),
    in map order.  A process in another mount namespace (a container) is read through ``/proc/PID/root``.
    Raises TfnativeError when there is no such process or its map cannot be read."""
    try:
        rows = procfs.maps(pid)
    except FileNotFoundError:
        raise TfnativeError("no process %d" % pid) from None
    except OSError as exc:
        raise TfnativeError("cannot read the memory map of process %d: %s" % (pid, exc.strerror or exc)) from None
    paths: List[str] = []
    for _lo, _hi, _perms, off, _dev, inode, name in rows:
        if off == 0 and inode and name.startswith("/") and not name.endswith(" (deleted)") and name not in paths:
            paths.append(name)
    prefixes = frameclass.interpreter_prefixes(paths)
    out = []
    for path in paths:
        readable = path if os.path.exists(path) else "/proc/%d/root%s" % (pid, path)
        cls = frameclass.library_class(path, partial(libfacts.links_tensorflow, readable), prefixes)
        if cls == "user":
            out.append((path, readable))
    return out


def process_report(pid: int, source_dirs: Optional[List[str]] = None) -> Dict[str, Any]:
    """``doctor --pid PID``: the user's libraries the process maps, each with what it carries (``inspect``'s
    report) and how it was built, and the rebuild that gives one without debug info file:line."""
    libs = []
    for path, readable in process_libraries(pid):
        facts = libfacts.facts(readable)
        try:
            report: Optional[Report] = inspect(readable, source_dirs)
        except TfnativeError:
            report = None
        libs.append({"path": path, "op_library": facts.links_tensorflow,
                     "built_by": "bazel" if facts.bazel else facts.compiler,
                     "rebuild": None if facts.lines or not facts.readable else libfacts.rebuild_advice(facts),
                     "report": report.to_json() if report is not None else None})
    return {"pid": pid, "libraries": libs}


def render_process(doc: Dict[str, Any]) -> str:
    """``process_report``'s answer as text: one block a library, the op libraries first marked."""
    libs = doc["libraries"]
    if not libs:
        return ("process %d maps no library of your own (no op library, nothing outside the system's and "
                "installed packages' directories)" % doc["pid"])
    lines = ["process %d maps %d librar%s of your own:" % (doc["pid"], len(libs), "y" if len(libs) == 1 else "ies")]
    for lib in libs:
        kind = "op library (links TensorFlow)" if lib["op_library"] else "library"
        built = " built by %s" % lib["built_by"] if lib["built_by"] else ""
        lines.append("")
        lines.append("%s, %s%s" % (lib["path"], kind, built))
        rep = lib["report"]
        if rep is not None:
            dwarf = ("DWARF: file:line%s" % (" and locals" if rep["can_see_locals"] else "")
                     if rep["can_see_lines"] else "no DWARF: no file:line, no locals")
            lines.append("  carries     %s; .symtab: %s; build-id %s; debug file: %s" % (
                dwarf, "%d symbols" % rep["symtab_symbols"] if rep["symtab"] else "absent",
                rep["build_id"] or "none", rep["debuglink_found"] or "none"))
        if lib["rebuild"]:
            lines.append("  rebuild     %s" % lib["rebuild"])
    return "\n".join(lines)
