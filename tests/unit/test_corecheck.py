"""corecheck on hand-made cores and libraries: is the file on this host the one the process mapped?

No real core here: an ELF core with one thread, one NT_FILE mapping of ``/opt/app/libwheel.so`` and its
first page dumped or not, and small ELF libraries with or without a build-id (``--sysroot`` finds them).
"""

from __future__ import annotations

import struct

import pytest

from tfnative.corefile.checks import mismatch
from tfnative.corefile.reader import NT_FILE, NT_PRSTATUS, Core
from tfnative.corefile.source import CoreSource

from .test_corefile_notes import note, prstatus

SEEN = "/opt/app/libwheel.so"
START = 0x7F0000000000
PAGE = 4096


def library(load_size: int, file_size: int, build_id: bytes = b"") -> bytes:
    """An ELF shared object: one PT_LOAD of ``load_size`` bytes, a PT_NOTE with ``build_id`` when given."""
    phnum = 2 if build_id else 1
    shoff, shnum = (file_size - 128, 2) if build_id else (0, 0)  # the note's section header, for read_build_id
    head = bytearray(struct.pack("<4sBBBB8xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 3, 62, 1, 0, 64, shoff, 0, 64,
                                 56, phnum, 64, shnum, 0))
    head += struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, load_size, load_size, PAGE)
    tail = b""
    if build_id:
        desc = note(3, build_id, b"GNU\0")
        at = 64 + 56 * phnum
        head += struct.pack("<IIQQQQQQ", 4, 4, at, at, at, len(desc), len(desc), 4)
        head += desc
        tail = bytes(64) + struct.pack("<IIQQQQIIQQ", 0, 7, 2, at, at, len(desc), 0, 0, 4, 0)
    return bytes(head) + bytes(file_size - len(head) - len(tail)) + tail


def core(tmp_path, lib: bytes, extent: int, dumped: bool) -> str:
    """An ELF core mapping ``SEEN`` at START for ``extent`` bytes; its first page dumped when ``dumped``."""
    files = struct.pack("<QQ", 1, PAGE) + struct.pack("<QQQ", START, START + extent, 0) + SEEN.encode() + b"\0"
    notes = note(NT_PRSTATUS, prstatus(100, START + 16, 0, 11)) + note(NT_FILE, files)
    phoff, phnum = 64, 2
    notes_at = phoff + 56 * phnum
    data_at = (notes_at + len(notes) + PAGE - 1) // PAGE * PAGE
    head = struct.pack("<4sBBBB8xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 4, 62, 1, 0, phoff, 0, 0, 64, 56,
                       phnum, 64, 0, 0)
    ph = struct.pack("<IIQQQQQQ", 4, 0, notes_at, 0, 0, len(notes), 0, 4)
    ph += struct.pack("<IIQQQQQQ", 1, 5, data_at, START, 0, PAGE if dumped else 0, extent, PAGE)
    body = head + ph + notes
    body += bytes(data_at - len(body)) + (lib[:PAGE] if dumped else b"")
    path = tmp_path / "core"
    path.write_bytes(body)
    return str(path)


def check(tmp_path, mapped: bytes, here: bytes, extent: int, dumped: bool):
    (tmp_path / "here.so").write_bytes(here)
    with Core(core(tmp_path, mapped, extent, dumped)) as c:
        return mismatch(c, c.notes.files, str(tmp_path / "here.so"))


def test_the_same_file_without_build_id_passes(tmp_path):
    lib = library(3 * PAGE, 3 * PAGE)
    assert check(tmp_path, lib, lib, 3 * PAGE, dumped=True) is None
    assert check(tmp_path, lib, lib, 3 * PAGE, dumped=False) is None


def test_a_rebuilt_file_without_build_id_differs_in_its_headers(tmp_path):
    why = check(tmp_path, library(3 * PAGE, 3 * PAGE), library(3 * PAGE - 8, 3 * PAGE), 3 * PAGE, dumped=True)
    assert why == "no build-id, and its ELF and program headers differ from the core's copy"


def test_without_the_first_page_a_file_too_short_for_the_mapping_differs(tmp_path):
    why = check(tmp_path, library(3 * PAGE, 3 * PAGE), library(2 * PAGE, 2 * PAGE), 3 * PAGE, dumped=False)
    assert why == "no build-id, and %d bytes where the process mapped %d" % (2 * PAGE, 3 * PAGE)
    # the last page may be partial: a file ending inside the last mapped page is long enough
    assert check(tmp_path, library(3 * PAGE, 3 * PAGE), library(2 * PAGE + 1, 2 * PAGE + 1), 3 * PAGE,
                 dumped=False) is None


@pytest.mark.parametrize("here_id, expect", [(b"\x01" * 20, None), (b"\x02" * 20, "other")])
def test_build_id_from_the_core_copy(tmp_path, here_id, expect):
    why = check(tmp_path, library(PAGE, PAGE, b"\x01" * 20), library(PAGE, PAGE, here_id), PAGE, dumped=True)
    assert why == expect or why == "build-id %s, the core's is %s" % ("02" * 20, "01" * 20)


def test_build_id_is_never_taken_from_the_file_itself(tmp_path):
    """Without the core's copy of the first page there is no build-id to compare: the size decides."""
    lib = library(PAGE, PAGE, b"\x01" * 20)
    assert check(tmp_path, lib, library(PAGE, PAGE, b"\x02" * 20), PAGE, dumped=False) is None
    assert check(tmp_path, lib, library(PAGE // 2, PAGE // 2, b"\x02" * 20), 2 * PAGE, dumped=False) is not None


def test_core_source_names_the_file_and_never_reads_it(tmp_path):
    (tmp_path / "root" / "opt" / "app").mkdir(parents=True)
    here = tmp_path / "root" / "opt" / "app" / "libwheel.so"
    here.write_bytes(library(3 * PAGE - 8, 3 * PAGE))
    path = core(tmp_path, library(3 * PAGE, 3 * PAGE), 3 * PAGE, dumped=True)
    source = CoreSource(path, sysroot=str(tmp_path / "root"))
    try:
        assert source.warnings == ["%s: no build-id, and its ELF and program headers differ from the core's copy: "
                                   "not the file the process ran; its frames are shown by address only" % here]
        assert source.host_of(SEEN) is None
        assert [lib.path for lib in source.libraries()] == ["libwheel.so"]  # by name only, never opened
        with pytest.raises(MemoryError):
            source.core.read(START + PAGE, 16)  # pages the core left out are not read from the wrong file
    finally:
        source.close()
