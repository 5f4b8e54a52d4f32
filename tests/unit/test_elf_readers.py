"""The one ELF reader, LEB128 reader, DWARF reader and debug-file search rule of ``core/``, at their edges.

``tfnative doctor``, ``stack`` (``sources/modules.py``), the vDSO and the core checks all read through
them, so each edge is checked once here, on bytes chosen by the test or on files gcc builds here.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import struct
import subprocess

import pytest

from tfnative.core.binary import dwarf, dwarfcover
from tfnative.core.binary.debugfiles import find_debug_file
from tfnative.core.binary.elf import ElfFile, ElfTruncated, elf_header, first_load_vaddr, program_headers
from tfnative.core.binary.leb128 import MAX_LEB128_BYTES, Leb128Error, sleb128, uleb128
from tfnative.sources.modules import Library, _first_load_vaddr
from tfnative.toolchain import doctor

from ..utils import TFNATIVE
from .elfsynth import sleb, uleb

requires_gcc = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("objcopy") is None,
                                  reason="gcc and objcopy are needed to build the test files")

SRC = "static int twice(int x) { int y = x * 2; return y; }\nint helper(int v) { return twice(v) + 1; }\n"
MAIN = "int main(void) { return 0; }\n"

# ---------------------------------------------------------------- LEB128


@pytest.mark.parametrize("value", [0, 1, 63, 64, 127, 128, 624485, (1 << 32) - 1, (1 << 63), (1 << 64) - 1])
def test_uleb128_values(value):
    enc = uleb(value)
    assert uleb128(b"\xaa" + enc + b"\xbb", 1) == (value, 1 + len(enc))


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, -65, 127, -128, -123456, (1 << 63) - 1, -(1 << 63)])
def test_sleb128_values(value):
    enc = sleb(value)
    assert sleb128(b"\xaa" + enc, 1) == (value, 1 + len(enc))


def test_leb128_padding_is_read_up_to_the_bound():
    assert uleb128(b"\x85\x80\x80\x00", 0) == (5, 4)  # a padded 5, as linkers write for a fixed size
    assert sleb128(b"\xff\xff\x7f", 0) == (-1, 3)
    padded = b"\x80" * (MAX_LEB128_BYTES - 1) + b"\x00"
    assert uleb128(padded, 0) == (0, MAX_LEB128_BYTES)
    for reader in (uleb128, sleb128):
        with pytest.raises(Leb128Error, match="longer than"):
            reader(b"\x80" * MAX_LEB128_BYTES + b"\x00", 0)


def test_leb128_wider_than_64_bits_is_an_error():
    with pytest.raises(Leb128Error, match="64 bits"):
        uleb128(uleb(1 << 64), 0)
    with pytest.raises(Leb128Error, match="64 bits"):
        sleb128(sleb(1 << 63), 0)
    with pytest.raises(Leb128Error, match="64 bits"):
        sleb128(sleb(-(1 << 63) - 1), 0)


@pytest.mark.parametrize("buf", [b"", b"\x80", b"\xff\xff\xff", memoryview(b"\x01\x82")[1:]])
def test_unterminated_leb128_is_an_index_error_with_its_reason(buf):
    for reader in (uleb128, sleb128):
        with pytest.raises(Leb128Error, match="runs past") as info:
            reader(buf, 0)
        assert isinstance(info.value, IndexError)  # what every reader already catches at its data's end


# ---------------------------------------------------------------- DWARF: abbreviations and the first DIE


def _abbrev_table(code, tag, attrs):
    out = uleb(code) + uleb(tag) + b"\x00"
    for at, form in attrs:
        out += uleb(at) + uleb(form)
    return out + b"\x00\x00"


def test_abbreviations_of_every_table_are_read_end_to_end():
    """A .dwp's one .debug_abbrev.dwo: only the second table has a variable with a location."""
    first = _abbrev_table(1, 0x11, [(0x03, 0x08)]) + b"\x00"
    second = _abbrev_table(1, 0x11, [(0x03, 0x08)]) + _abbrev_table(2, 0x34, [(0x02, 0x18)]) + b"\x00"
    abbrevs = dwarf.Abbrevs(memoryview(first + second))
    assert abbrevs.end(0) == len(first)
    assert abbrevs.tags_with(0, 0x02) == set() and abbrevs.tags_with(len(first), 0x02) == {0x34}
    assert dwarf.Abbrevs(memoryview(first + second)).all_tags_with(0x02) == {0x34}
    assert abbrevs.find(len(first), 2) == dwarf.Abbrev(0x34, [(0x02, 0x18, 0)])
    assert abbrevs.find(0, 9) is None


def _unit(die, version=4, abbrev_offset=0, addr_size=8):
    """A DWARF 2-4 unit header (32-bit) followed by ``die``; its length covers exactly ``die``."""
    body = struct.pack("<HIB", version, abbrev_offset, addr_size) + die
    return struct.pack("<I", len(body)) + body


def _first_die(info, abbrev):
    h = next(dwarf.unit_headers(memoryview(info), "<"))
    code, pos = uleb128(info, h.die)
    ab = dwarf.Abbrevs(memoryview(abbrev)).find(h.abbrev_offset, code)
    assert ab is not None
    return dwarf.first_die(memoryview(info), pos, h, ab.attrs, "<", {0x03, 0x1B, 0x13})


def test_first_die_reads_the_wanted_attributes():
    abbrev = _abbrev_table(1, 0x11, [(0x25, 0x08), (0x13, 0x0B), (0x03, 0x08), (0x1B, 0x0E)])
    info = _unit(b"\x01" + b"gcc\x00" + b"\x0c" + b"a.c\x00" + struct.pack("<I", 7))
    vals = _first_die(info, abbrev)
    assert vals[0x13] == (0x0B, 0x0C) and vals[0x1B] == (0x0E, 7)
    assert dwarf.inline_string(memoryview(info), vals[0x03][1]) == "a.c"


def test_first_die_stops_at_an_unknown_form_an_unterminated_string_and_the_section_end():
    with pytest.raises(dwarf.Unreadable, match="form 0x7f"):
        _first_die(_unit(b"\x01" + b"\x00" * 8), _abbrev_table(1, 0x11, [(0x03, 0x7F)]))
    with pytest.raises(dwarf.Unreadable, match="unterminated"):
        _first_die(_unit(b"\x01" + b"abc"), _abbrev_table(1, 0x11, [(0x03, 0x08)]))
    with pytest.raises((IndexError, struct.error)):  # a strp cut short by the section's end
        _first_die(_unit(b"\x01\x07\x00"), _abbrev_table(1, 0x11, [(0x1B, 0x0E)]))


# ---------------------------------------------------------------- files gcc builds


def _build_so(tmp_path, name="libx.so", flags=("-g",), ldflags=()):
    src = tmp_path / "src" / "x.c"
    src.parent.mkdir(exist_ok=True)
    src.write_text(SRC)
    out = tmp_path / name
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-gdwarf-4", *flags, *ldflags, "src/x.c", "-o", str(out)],
                   check=True, cwd=str(tmp_path))
    return str(out)


def _cu_abbrev_form_offset(path):
    """The file offset of the form of the compile unit's first attribute in .debug_abbrev (one byte)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        sec = ElfFile(mm, path).section(".debug_abbrev")
        assert sec is not None
        pos = sec.offset
        _code, pos = uleb128(mm, pos)
        tag, pos = uleb128(mm, pos)
        assert tag == 0x11
        pos += 1  # has_children
        _at, pos = uleb128(mm, pos)
        assert mm[pos] < 0x80
        return pos


def _patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


@requires_gcc
def test_an_unknown_dwarf_form_is_reported_by_doctor_and_taken_as_describing_the_code(tmp_path):
    lib = _build_so(tmp_path)
    assert doctor.inspect(lib).dwarf_files == ["src/x.c"]
    _patch(lib, _cu_abbrev_form_offset(lib), b"\x7f")  # the unit's first attribute: DW_FORM 0x7f
    cov = dwarfcover.read(lib)
    assert not cov.readable and "form 0x7f" in cov.why_unreadable and cov.describes_code
    rep = doctor.inspect(lib)  # the same reader: no exception, the unit counted without its name
    assert rep.dwarf_units == 1 and rep.dwarf_files == ["?"]
    assert any("1 of the 1 compile units was not read (DWARF form 0x7f)" in n for n in rep.notes), rep.notes
    r = subprocess.run([*TFNATIVE, "doctor", lib], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "was not read (DWARF form 0x7f)" in r.stdout


@requires_gcc
def test_a_unit_longer_than_its_section_is_read_as_far_as_the_section_goes(tmp_path):
    lib = _build_so(tmp_path)
    with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        info = ElfFile(mm, lib).section(".debug_info")
        assert info is not None
        offset = info.offset
    _patch(lib, offset, struct.pack("<I", 0x7FFFFFFF))  # the unit runs far past .debug_info
    cov = dwarfcover.read(lib)
    assert not cov.readable and "cut short" in cov.why_unreadable
    rep = doctor.inspect(lib)
    assert rep.dwarf_units == 1 and rep.dwarf_files == ["src/x.c"]
    assert not any("was not read" in n for n in rep.notes), rep.notes


def _readelf_first_load(path):
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True, check=True).stdout
    m = re.search(r"^\s*LOAD\s+0x[0-9a-f]+\s+0x([0-9a-f]+)", out, re.M)
    assert m is not None
    return int(m.group(1), 16) & ~0xFFF


def _exec(tmp_path, name, flag):
    (tmp_path / "main.c").write_text(MAIN)
    out = str(tmp_path / name)
    subprocess.run(["gcc", flag, "main.c", "-o", out], check=True, cwd=str(tmp_path))
    return out


def _python_exec():
    """A non-PIE interpreter (Debian's python3.14 unpacked under ~/.cache/tfnative or .ci/pythons), or None."""
    for root in (os.path.expanduser("~/.cache/tfnative/cpython"), ".ci/pythons"):
        for d, _dirs, files in os.walk(root):
            if "python3.14" in files and d.endswith("/usr/bin"):
                return os.path.join(d, "python3.14")
    return None


@requires_gcc
def test_first_pt_load_of_a_pie_and_of_a_non_pie(tmp_path):
    pie, exe = _exec(tmp_path, "pie", "-pie"), _exec(tmp_path, "exe", "-no-pie")
    cases = [(pie, 3, 0), (exe, 2, _readelf_first_load(exe))]
    py = _python_exec()
    if py is not None:
        cases.append((py, None, _readelf_first_load(py)))
    for path, e_type, want in cases:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            elf = ElfFile(mm, path, sections=False)
            assert e_type is None or elf.e_type == e_type
            assert elf.first_load_vaddr() == want, path
        assert _first_load_vaddr(path) == want, path
    assert _readelf_first_load(exe) == 0x400000  # gcc's default base for a non-PIE on x86-64


@requires_gcc
def test_program_headers_past_the_first_page_are_read_from_the_file(tmp_path):
    exe = _exec(tmp_path, "exe", "-no-pie")
    data = bytearray(open(exe, "rb").read())
    hdr = elf_header(data, exe)
    table = data[hdr.phoff:hdr.phoff + hdr.phnum * hdr.phentsize]
    moved = len(data) + (-len(data) % 8)
    data += b"\0" * (moved - len(data)) + table
    struct.pack_into("<Q", data, 32, moved)  # e_phoff: the table now lies past the first page
    path = str(tmp_path / "moved")
    open(path, "wb").write(bytes(data))
    with pytest.raises(ElfTruncated):
        program_headers(data[:4096], elf_header(data[:4096], path), path)
    moved_hdr = elf_header(data, path)
    assert moved_hdr.phoff == moved and first_load_vaddr(data, moved_hdr, path) == 0x400000
    assert program_headers(data, moved_hdr, path) == program_headers(data, hdr, path)
    with pytest.raises(ElfTruncated):
        first_load_vaddr(data[:4096], moved_hdr, path)
    assert _first_load_vaddr(path) == 0x400000
    assert _first_load_vaddr(str(tmp_path / "main.c")) == 0  # not ELF: no bias


# ---------------------------------------------------------------- the separate debug file under a prefix root


def _stripped_in_root(tmp_path, ldflags=()):
    """A stripped library in a private root (``<root>/usr/lib/x86_64-linux-gnu``) and its debug file's bytes."""
    libdir = tmp_path / "root" / "usr" / "lib" / "x86_64-linux-gnu"
    libdir.mkdir(parents=True)
    lib = _build_so(tmp_path, ldflags=ldflags)
    dbg = str(tmp_path / "x.debug")
    subprocess.run(["objcopy", "--only-keep-debug", lib, dbg], check=True)
    subprocess.run(["objcopy", "--strip-all", "--add-gnu-debuglink=%s" % dbg, lib], check=True)
    target = str(libdir / "libx.so")
    shutil.move(lib, target)
    return target, dbg


def _stack_index_path(lib):
    return Library(lib, 0, []).indexes()[0].path


@requires_gcc
def test_a_debug_file_under_a_prefix_root_by_build_id(tmp_path):
    lib, dbg = _stripped_in_root(tmp_path, ["-Wl,--build-id"])
    build_id = dwarfcover.read(lib).build_id
    assert build_id
    where = tmp_path / "root" / "usr" / "lib" / "debug" / ".build-id" / build_id[:2]
    where.mkdir(parents=True)
    debug = str(where / (build_id[2:] + ".debug"))
    shutil.move(dbg, debug)  # the debuglink's name is found nowhere now: only the build-id finds it
    assert find_debug_file(lib, build_id, "x.debug") == debug
    rep = doctor.inspect(lib)
    assert rep.debuglink_found == debug and rep.dwarf_files == ["src/x.c"]
    assert _stack_index_path(lib) == debug


@requires_gcc
def test_a_debug_file_under_a_prefix_root_by_debuglink(tmp_path):
    lib, dbg = _stripped_in_root(tmp_path, ["-Wl,--build-id=none"])
    assert dwarfcover.read(lib).build_id is None
    where = tmp_path / "root" / "usr" / "lib" / "debug" / "usr" / "lib" / "x86_64-linux-gnu"
    where.mkdir(parents=True)
    debug = str(where / "x.debug")
    shutil.move(dbg, debug)  # gdb's place: <debug dir>/<the library's directory, within its root>/<link>
    assert find_debug_file(lib, None, "x.debug") == debug
    rep = doctor.inspect(lib)
    assert rep.debuglink_found == debug and rep.dwarf_files == ["src/x.c"]
    assert _stack_index_path(lib) == debug


def test_the_search_order_is_gdbs_over_every_root(tmp_path):
    """Build-id before debuglink; the system's root before the prefix's; the file's own directory before both."""
    from tfnative.core.binary.debugfiles import DEBUG_DIR, candidates

    usr = tmp_path / "root" / "usr"
    (usr / "lib" / "debug" / ".build-id").mkdir(parents=True)
    (usr / "bin").mkdir()
    path = str(usr / "bin" / "python3.14")
    got = candidates(path, "abcdef", "python3.14.debug")
    prefix = str(usr / "lib" / "debug")
    assert got == [
        DEBUG_DIR + "/.build-id/ab/cdef.debug",
        prefix + "/.build-id/ab/cdef.debug",
        str(usr / "bin" / "python3.14.debug"),
        str(usr / "bin" / ".debug" / "python3.14.debug"),
        DEBUG_DIR + str(usr / "bin" / "python3.14.debug"),
        prefix + "/usr/bin/python3.14.debug",
    ]
    assert candidates(path, None, None) == [] and candidates(path, "ab", None) == []
