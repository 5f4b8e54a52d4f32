"""The CFI unwinder's pieces: FDE lookup against binutils, CFA programs, DWARF expressions.

The whole unwinder is checked against gdb on live TensorFlow processes
(``test_fast_path.py``, ``test_snapshot.py``); these pin down the parts.
"""

import re
import shutil
import subprocess

import pytest

from tfnative.core.binary.cfaprogram import CfiError, evaluate, run_program
from tfnative.core.binary.cfi import RIP, RSP
from tfnative.core.binary.ehframe import EhFrame

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def _readelf_fdes(path):
    # readelf exits 1 over warnings unrelated to .eh_frame (the separate debug file's link)
    out = subprocess.run(["readelf", "--debug-dump=frames", path], capture_output=True, text=True).stdout
    return [(int(a, 16), int(b, 16)) for a, b in re.findall(r" FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", out)]


@pytest.mark.skipif(shutil.which("readelf") is None or not __import__("os").path.exists(LIBC),
                    reason="needs readelf and glibc")
def test_fde_lookup_agrees_with_readelf():
    fdes = sorted(f for f in _readelf_fdes(LIBC) if f[1] > f[0])
    assert len(fdes) > 1000
    eh = EhFrame(LIBC)
    for start, end in fdes[::7]:
        for pc in (start, (start + end) // 2, end - 1):
            got = eh.find(pc)
            assert (got[0], got[1]) == (start, end), hex(pc)
    # a pc between two FDEs has none
    gaps = [(a[1], b[0]) for a, b in zip(fdes, fdes[1:]) if b[0] > a[1]]
    assert gaps
    with pytest.raises(CfiError):
        eh.find(gaps[0][0])


def test_cfa_program_of_a_frame_pointer_prologue():
    """push %rbp; mov %rsp,%rbp; ... as GCC describes it, one instruction at a time."""
    # CIE: def_cfa rsp+8; offset r16 (return address) at cfa-8
    cie = bytes([0x0C, 7, 8, 0x80 | 16, 1])
    # FDE: advance 1; def_cfa_offset 16; offset rbp at cfa-16; advance 3; def_cfa_register rbp;
    #      remember_state; advance 10; def_cfa rsp+8; restore_state
    fde = bytes([0x41, 0x0E, 16, 0x80 | 6, 2, 0x43, 0x0D, 6, 0x0A, 0x4A, 0x0C, 7, 8, 0x0B])

    def state_at(pc):
        state = {"cfa": None, "rules": {}}
        run_program(cie, 1, -8, 0x1000, 1 << 64, state, None)
        initial = dict(state["rules"])
        run_program(fde, 1, -8, 0x1000, pc, state, initial)
        return state

    s = state_at(0x1000)
    assert s["cfa"] == ("reg", RSP, 8) and s["rules"] == {RIP: ("offset", -8)}
    s = state_at(0x1001)
    assert s["cfa"] == ("reg", RSP, 16) and s["rules"][6] == ("offset", -16)
    s = state_at(0x1004)
    assert s["cfa"] == ("reg", 6, 16)
    s = state_at(0x100E)  # after the epilogue's def_cfa, the remembered state is back
    assert s["cfa"] == ("reg", 6, 16)


def test_plt_cfa_expression():
    """The expression every PLT's FDE uses: rsp + 8, plus 8 past the push in each 16-byte entry."""
    expr = bytes([0x77, 8, 0x80, 0, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22])
    assert evaluate(expr, {RSP: 0x7000, RIP: 0x4005}, None) == 0x7008
    assert evaluate(expr, {RSP: 0x7000, RIP: 0x400B}, None) == 0x7010


def test_signal_frame_expression_reads_memory():
    """glibc's __restore_rt: the CFA is a word of the ucontext on the stack (DW_OP_breg7 160; DW_OP_deref)."""
    memory = {0x8000 + 160: (0x9000).to_bytes(8, "little")}
    expr = bytes([0x77, 0xA0, 0x01, 0x06])
    assert evaluate(expr, {RSP: 0x8000}, lambda addr, size: memory[addr]) == 0x9000


def test_unknown_instruction_is_refused():
    with pytest.raises(CfiError):
        run_program(bytes([0x3F]), 1, -8, 0, 1 << 64, {"cfa": None, "rules": {}}, None)
    with pytest.raises(CfiError):
        evaluate(bytes([0x96 + 0x50]), {}, None)
