"""The bounds a core's reader keeps: core/binary/mapfile.py (the one checked opener of every file tfnative maps, on real
odd files) and the checks of a core's notes (corefile/reader.py)."""

from __future__ import annotations

import os
import struct
import sys

import pytest

from tfnative.core import sourcelines
from tfnative.core.binary.elf import ElfError, read_build_id
from tfnative.core.binary.mapfile import MAX_SIZE, FileUnusable, check_file, map_file, read_file, read_head
from tfnative.core.binary.symindex import ElfIndex
from tfnative.corefile.reader import MAX_PROBLEMS, NT_FILE, NT_PRSTATUS, parse_notes


def _write(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.fixture
def odd(tmp_path) -> dict:
    sparse = str(tmp_path / "sparse")
    with open(sparse, "wb") as f:
        f.truncate(MAX_SIZE + 4096)
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    loop = str(tmp_path / "loop")
    os.symlink(loop, loop)
    return {
        "empty": (_write(tmp_path / "empty", b""), "empty"),
        "directory": (str(tmp_path), "not a regular file (a directory)"),
        "FIFO": (fifo, "not a regular file (a pipe or FIFO)"),
        "/dev/zero": ("/dev/zero", "not a regular file (a character device)"),
        "/proc/self/mem": ("/proc/self/mem", "a file of /proc or /sys, not a file on disk"),
        "sparse": (sparse, "too large (%d bytes)" % (MAX_SIZE + 4096)),
        "loop": (loop, "too many levels of symbolic links"),
        "missing": (str(tmp_path / "missing"), "no such file or directory"),
    }


@pytest.mark.parametrize("kind", ["empty", "directory", "FIFO", "/dev/zero", "/proc/self/mem", "sparse", "loop",
                                  "missing"])
def test_odd_files_are_refused_with_a_reason_and_never_block(odd, kind):
    path, reason = odd[kind]
    with pytest.raises(FileUnusable) as got:
        map_file(path)
    assert got.value.reason == reason and str(got.value) == "%s: %s" % (path, reason)
    assert got.value.missing == (kind == "missing")
    assert isinstance(got.value, OSError)  # what the callers that skipped unopenable files already catch
    bad = check_file(path)
    assert bad is not None and bad.reason == reason
    with pytest.raises(FileUnusable):
        read_head(path, 16)
    with pytest.raises(FileUnusable):
        read_file(path, 1 << 20)
    assert sourcelines.text_lines(path) is None  # a frame that names it: no source line, no hang, no blow-up
    # The ELF readers go through it: the same refusal, never a ValueError from mmap or a hang on the FIFO
    with pytest.raises(FileUnusable):
        read_build_id(path)
    with pytest.raises(FileUnusable):
        ElfIndex.open(path, use_cache=False)


def test_short_and_non_elf_files(tmp_path):
    one = _write(tmp_path / "one", b"\x7f")
    assert check_file(one, min_size=64).reason == "too short (1 bytes)"
    text = _write(tmp_path / "text", b"hello\n" * 20)
    assert check_file(text) is None
    assert check_file(text, elf=True).reason == "not an ELF file"
    with pytest.raises(ElfError):
        read_build_id(text)
    assert read_head(text, 5) == b"hello"


def test_read_file_is_bounded(tmp_path):
    src = _write(tmp_path / "a.py", b"x = 1\r\ny = 2\n")
    assert read_file(src, 100) == b"x = 1\r\ny = 2\n"
    assert sourcelines.line(src, 2) == "y = 2"
    with pytest.raises(FileUnusable) as got:
        read_file(src, 4)
    assert got.value.reason == "too large (13 bytes)"


def test_a_real_library_maps(tmp_path):
    exe = os.path.realpath(sys.executable)
    assert check_file(exe, min_size=64, elf=True) is None
    with map_file(exe) as mm:
        assert mm[:4] == b"\x7fELF"


def _nt_file(count: int, page: int, entries: list, names: list) -> bytes:
    desc = struct.pack("<QQ", count, page) + b"".join(struct.pack("<QQQ", *e) for e in entries)
    desc += b"".join(n + b"\0" for n in names)
    return struct.pack("<III", 5, len(desc), NT_FILE) + b"CORE\0\0\0\0" + desc + b"\0" * (-len(desc) % 4)


@pytest.mark.parametrize("page", [0, 3, 1 << 63, (1 << 64) - 1])
def test_nt_file_with_a_bad_page_size_is_left_out_and_said(page):
    n = parse_notes(_nt_file(1, page, [(0x1000, 0x2000, 1)], [b"/x"]))
    assert n.files == [] and n.problems == ["NT_FILE: a page size of %d; the mapped files are not read" % page]


def test_nt_file_bad_entries_are_left_out_and_the_rest_kept():
    entries = [(0x1000, 0x2000, 0), (0x5000, 0x4000, 0), (0x6000, (1 << 64) - 1, 0), (0x7000, 0x8000, 1 << 50),
               (0x9000, 0xA000, 0), (0xB000, 0xC000, 2)]
    names = [b"/a", b"/b", b"/c", b"/d", b"", b"/f"]
    n = parse_notes(_nt_file(len(entries), 4096, entries, names))
    assert [(m.start, m.offset, m.path) for m in n.files] == [(0x1000, 0, "/a"), (0xB000, 8192, "/f")]
    assert n.problems == ["NT_FILE: entry 1 (0x5000-0x4000) ends before it starts and 3 more; left out"]


def test_short_thread_notes_are_said_and_the_problems_bounded():
    short = struct.pack("<III", 5, 8, NT_PRSTATUS) + b"CORE\0\0\0\0" + bytes(8)
    n = parse_notes(short * 100000)
    assert n.threads == [] and len(n.problems) == MAX_PROBLEMS + 1
    assert n.problems[0].startswith("a thread's NT_PRSTATUS note of 8 bytes, too short for its registers")
    assert n.problems[-1] == "more damage, not listed"
