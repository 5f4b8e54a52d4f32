"""``tfnative doctor``: what debug info does a shared object carry, and what can gdb do with it?

Fast by construction: it reads the ELF section headers, the build-id note, the
``.gnu_debuglink`` section, and for DWARF only the unit headers and the first DIE
of each compile unit (``DW_TAG_compile_unit`` / ``DW_TAG_skeleton_unit``: its
name, compilation directory, producer, ``.dwo`` name) plus that unit's abbreviation
table.  No line table, no DIE tree, no symbol table is parsed, so the cost does
not grow with the amount of DWARF (timings: docs/benchmarks.md, "Build presets").  Those reads are
``debugread.py``'s; this module judges what they found (``inspect``, ``Report``) and writes it (``render``).
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..core.binary import dwarf, dwarfcover
from ..errors import TfnativeError
from .debugread import DW_AT_location, DW_TAG_formal_parameter, DW_TAG_variable, DW_UT_skeleton, DwarfReader, Elf, Unit

MAX_DWO_PROBES = 20


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
    dwarf_own_code: bool = False  # the DWARF describes the library's own code (``core/binary/dwarfcover.py``)
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
