"""The ELF reader, the symbol index and the CFI unwinder on an ELF built in the test (``elfsynth.py``).

Every address and CFA rule is the test's own, so each frame, CFA and saved
register is known exactly; ``readelf`` (binutils) reads the same bytes as a
second opinion where it is installed.
"""

import mmap
import shutil
import subprocess

import pytest

from tfnative.core.binary.cfaprogram import CfiError
from tfnative.core.binary.cfi import RIP, RSP, Module, Unwinder
from tfnative.core.binary.ehframe import EhFrame
from tfnative.core.binary.elf import ElfError, ElfFile, ElfTruncated, read_build_id
from tfnative.core.binary.symindex import ElfIndex

from . import elfsynth
from .elfsynth import FRAME_POINTER_CFI, RBP, Function
from .fakemem import FakeMemory

MANGLED = "_ZN10tensorflow8OpKernel7ComputeEPNS_15OpKernelContextE"
BASE = 0x7F1234560000  # where the test "loads" the library
FUNCTIONS = [
    Function("outer", 0x00, 0x40),  # frameless: CFA = rsp+8 throughout
    Function("inner", 0x40, 0x40, FRAME_POINTER_CFI),
    Function(MANGLED, 0x80, 0x40, FRAME_POINTER_CFI),
    Function("no_cfi", 0xC0, 0x20, fde=False),
    Function("bad_cfi", 0xE0, 0x20, bytes([0x3F])),  # an opcode DWARF does not define
]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    built = elfsynth.build(FUNCTIONS, labels=[("inner_label", 0x50)])
    path = tmp_path_factory.mktemp("elf") / "libsynth.so"
    path.write_bytes(built.data)
    built.path = str(path)
    return built


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TFNATIVE_CACHE_DIR", str(tmp_path / "cache"))


def _elf(path):
    f = open(path, "rb")
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    f.close()
    return ElfFile(mm, path)


# ------------------------------------------------------------------------------------------- ELF headers


def test_headers_sections_segments_and_build_id(lib):
    elf = _elf(lib.path)
    assert (elf.is64, elf.endian, elf.e_type, elf.e_machine) == (True, "<", 3, 62)
    names = [s.name for s in elf.sections]
    assert names == ["", ".note.gnu.build-id", ".text", ".eh_frame", ".eh_frame_hdr", ".symtab", ".strtab",
                     ".shstrtab"]
    text = elf.section(".text")
    assert (text.addr, text.size, text.flags) == (lib.text_addr, 0x400, 6)
    assert [s[0] for s in elf.segments] == [1, 4, 0x6474E550]  # PT_LOAD, PT_NOTE, PT_GNU_EH_FRAME
    assert elf.first_load_vaddr() == 0
    assert elf.build_id() == lib.build_id.hex() == read_build_id(lib.path)


def test_readelf_reads_the_same_sections(lib):
    if shutil.which("readelf") is None:
        pytest.skip("binutils' readelf is not installed")
    out = subprocess.run(["readelf", "-S", "-W", lib.path], capture_output=True, text=True, check=True).stdout
    elf = _elf(lib.path)
    for s in elf.sections[1:]:
        line = next(ln for ln in out.splitlines() if " %s " % s.name in ln)
        assert "%016x %06x %06x" % (s.addr, s.offset, s.size) in line


def test_truncated_and_foreign_files_are_refused(lib, tmp_path):
    cut = tmp_path / "cut.so"
    cut.write_bytes(lib.data[: len(lib.data) - 100])  # the section header table runs past the end
    with pytest.raises(ElfTruncated, match="truncated section header table"):
        _elf(str(cut))
    # without sections, the program headers (at the start) still read
    f = open(str(cut), "rb")
    assert len(ElfFile(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), str(cut), sections=False).segments) == 3
    f.close()
    other = tmp_path / "script.sh"
    other.write_bytes(b"#!/bin/sh\n" + b"\0" * 100)
    with pytest.raises(ElfError, match="not an ELF file"):
        _elf(str(other))


# ------------------------------------------------------------------------------------------ symbol index


def test_symbolize_inside_a_function_a_label_and_past_the_end(lib):
    with ElfIndex.open(lib.path) as idx:
        a = lib.addresses
        assert idx.symbolize(a["inner"] + 5) == ("inner", 5)
        assert idx.symbolize(a["outer"]) == ("outer", 0)
        # a zero-sized label inside a sized function: the function wins
        assert idx.symbolize(a["inner_label"] + 2) == ("inner", 0x12)
        assert idx.symbolize(a["no_cfi"] + 0x1F) == ("no_cfi", 0x1F)
        assert idx.symbolize(lib.text_addr + 0x100) is None  # after the last function's end
        assert idx.symbolize(lib.text_addr - 1) is None
        assert idx.build_id == lib.build_id.hex()


def test_find_by_c_name_mangled_name_and_cxx_name(lib):
    if shutil.which("c++filt") is None:
        pytest.skip("binutils' c++filt is not installed")
    with ElfIndex.open(lib.path) as idx:
        assert idx.find("inner") == [("inner", lib.addresses["inner"])]
        assert idx.find(MANGLED) == [(MANGLED, lib.addresses[MANGLED])]
        assert idx.find("tensorflow::OpKernel::Compute") == [(MANGLED, lib.addresses[MANGLED])]
        assert idx.find("OpKernel::Compute(tensorflow::OpKernelContext*)") == [(MANGLED, lib.addresses[MANGLED])]
        assert idx.find("OpKernel::Compute(int)") == []
        assert idx.find("missing") == []


def test_the_cache_gives_the_same_answers(lib):
    first = ElfIndex.open(lib.path)
    again = ElfIndex.open(lib.path)
    try:
        assert (first.from_cache, again.from_cache) == (False, True)
        probes = [lib.addresses[n] + 3 for n in ("outer", "inner", MANGLED, "no_cfi")]
        assert [again.symbolize(p) for p in probes] == [first.symbolize(p) for p in probes]
        assert len(again) == len(first) == len(FUNCTIONS) + 1  # the label too
    finally:
        first.close()
        again.close()


# ------------------------------------------------------------------------------------------------ CFI


def test_fde_lookup_covers_each_function_and_nothing_else(lib):
    eh = EhFrame(lib.path)
    a = lib.addresses
    start, end, _cie, program = eh.find(a["inner"] + 0x3F)
    assert (start, end, program.rstrip(b"\0")) == (a["inner"], a["inner"] + 0x40, FRAME_POINTER_CFI)
    assert eh.find(a["outer"])[:2] == (a["outer"], a["outer"] + 0x40)
    with pytest.raises(CfiError, match="no FDE"):
        eh.find(a["no_cfi"] + 4)
    with pytest.raises(CfiError, match="no FDE"):
        eh.find(lib.text_addr - 1)


def _unwinder(lib, words):
    """An unwinder over the library loaded at BASE and a stack holding ``words``: nothing else is readable."""
    memory = FakeMemory()
    for at, value in words.items():
        memory.map(at, 8)
        memory.u64(at, value)
    module = Module(lib.path, BASE, [(BASE + lib.text_addr, BASE + lib.text_addr + 0x400)])
    return Unwinder([module], memory.read)


SP = 0x7FFE0000F000
CALLER_RBP = 0x7FFE0000F800
RETURN = 0x10  # where `inner` returns to in `outer`


@pytest.mark.parametrize("at, rsp, rbp, cfa", [
    (0, SP + 16, CALLER_RBP, SP + 24),  # before push %rbp: CFA = rsp+8
    (1, SP + 8, CALLER_RBP, SP + 24),  # after push: CFA = rsp+16, rbp saved at CFA-16
    (4, SP, SP + 8, SP + 24),  # after mov %rsp,%rbp (and a sub): CFA = rbp+16
    (0x3F, SP - 0x40, SP + 8, SP + 24),  # the last byte of the body
])
def test_frame_pointer_prologue_step_by_step(lib, at, rsp, rbp, cfa):
    """`inner` called from `outer`+RETURN; `outer` is the outermost frame (its return address is 0)."""
    words = {SP + 8: CALLER_RBP, SP + 16: BASE + lib.addresses["outer"] + RETURN, SP + 24: 0}
    words.update({SP - 0x40 + 8 * i: 0xDEAD for i in range(8)})
    regs = {"rip": BASE + lib.addresses["inner"] + at, "rsp": rsp, "rbp": rbp}
    frames = _unwinder(lib, words).unwind(regs, limit=16)
    assert [f.pc - BASE for f in frames] == [lib.addresses["inner"] + at, lib.addresses["outer"] + RETURN]
    caller = frames[1]
    assert caller.regs[RSP] == cfa  # the caller's stack pointer is the callee's CFA
    assert caller.regs[RBP] == CALLER_RBP  # restored from CFA-16, or never touched before the push
    assert caller.regs[RIP] == BASE + lib.addresses["outer"] + RETURN


def test_an_unknown_cfa_opcode_is_refused_not_guessed(lib):
    regs = {"rip": BASE + lib.addresses["bad_cfi"] + 2, "rsp": SP, "rbp": SP}
    with pytest.raises(CfiError, match="CFA instruction 0x3f"):
        _unwinder(lib, {}).unwind(regs, limit=4)


def test_a_frame_without_fde_and_without_a_frame_chain_stops_the_unwind(lib):
    regs = {"rip": BASE + lib.addresses["no_cfi"] + 2, "rsp": SP, "rbp": 0}
    with pytest.raises(CfiError) as exc:
        _unwinder(lib, {SP: 0}).unwind(regs, limit=4)
    assert [f.pc - BASE for f in exc.value.frames] == [lib.addresses["no_cfi"] + 2]
