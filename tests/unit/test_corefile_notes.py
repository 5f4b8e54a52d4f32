"""corefile.parse_notes on synthesized note bytes (no core, no gdb, no TF)."""

import struct

from tfnative.corefile.reader import NT_FILE, NT_PRPSINFO, NT_PRSTATUS, NT_SIGINFO, PRSTATUS_REGS, parse_notes
from tfnative.sources.ptrace import REGISTERS


def note(ntype: int, desc: bytes, name: bytes = b"CORE\0") -> bytes:
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return struct.pack("<III", len(name), len(desc), ntype) + pad(name) + pad(desc)


def prstatus(tid: int, rip: int, fs_base: int, cursig: int = 0) -> bytes:
    d = bytearray(PRSTATUS_REGS + 8 * len(REGISTERS) + 8)
    struct.pack_into("<H", d, 12, cursig)
    struct.pack_into("<I", d, 32, tid)
    regs = [0] * len(REGISTERS)
    regs[REGISTERS.index("rip")] = rip
    regs[REGISTERS.index("fs_base")] = fs_base
    struct.pack_into("<%dQ" % len(regs), d, PRSTATUS_REGS, *regs)
    return bytes(d)


def test_threads_signal_files_and_args():
    psinfo = bytearray(136)
    struct.pack_into("<I", psinfo, 24, 4242)
    psinfo[40:46] = b"python"
    psinfo[56:70] = b"python app.py\0"
    siginfo = struct.pack("<iiiiQ", 11, 0, 1, 0, 0xdead) + bytes(112)
    files = struct.pack("<QQ", 2, 4096) + struct.pack("<QQQ", 0x1000, 0x3000, 0) + \
        struct.pack("<QQQ", 0x5000, 0x6000, 3) + b"/usr/bin/python\0/lib/libc.so.6\0"
    buf = (note(NT_PRSTATUS, prstatus(4242, 0x401000, 0x7000, 11)) + note(NT_PRSTATUS, prstatus(4243, 0x402000, 0))
           + note(NT_PRPSINFO, bytes(psinfo)) + note(NT_SIGINFO, siginfo, b"CORE\0") + note(NT_FILE, files))
    n = parse_notes(buf)
    assert [(t.tid, t.regs["rip"], t.regs["fs_base"], t.cursig) for t in n.threads] == [
        (4242, 0x401000, 0x7000, 11), (4243, 0x402000, 0, 0)]
    assert (n.pid, n.fname, n.psargs) == (4242, "python", "python app.py")
    assert (n.signal, n.signal_code, n.fault_address) == (11, 1, 0xdead)
    assert [(m.start, m.end, m.offset, m.path) for m in n.files] == [
        (0x1000, 0x3000, 0, "/usr/bin/python"), (0x5000, 0x6000, 3 * 4096, "/lib/libc.so.6")]
    assert not n.truncated


def test_cut_short_notes_keep_what_was_whole():
    buf = note(NT_PRSTATUS, prstatus(1, 2, 3)) + note(NT_PRSTATUS, prstatus(5, 6, 7))
    n = parse_notes(buf[:-40])
    assert [t.tid for t in n.threads] == [1]
    assert n.truncated


def test_abort_has_no_fault_address():
    n = parse_notes(note(NT_SIGINFO, struct.pack("<iiiiQ", 6, 0, -6, 0, 77) + bytes(112)))
    assert (n.signal, n.signal_code, n.fault_address) == (6, -6, None)


def test_nt_file_count_larger_than_the_note_is_bounded():
    files = struct.pack("<QQ", 1 << 40, 4096) + struct.pack("<QQQ", 0x1000, 0x2000, 0) + b"/x\0"
    n = parse_notes(note(NT_FILE, files))
    assert [(m.start, m.path) for m in n.files] == [(0x1000, "/x")]


def test_gcore_siginfo_per_thread_first_wins():
    """gdb's gcore writes an NT_SIGINFO per thread, the signalled thread first: its signal is the core's."""
    segv = struct.pack("<iiiiQ", 11, 0, 1, 0, 0xbad) + bytes(112)
    stop = struct.pack("<iiiiQ", 19, 0, -6, 0, 0) + bytes(112)
    buf = (note(NT_PRSTATUS, prstatus(10, 0x401000, 0, 11)) + note(NT_SIGINFO, segv)
           + note(NT_PRSTATUS, prstatus(11, 0x402000, 0, 19)) + note(NT_SIGINFO, stop))
    n = parse_notes(buf)
    assert (n.signal, n.signal_code, n.fault_address) == (11, 1, 0xbad)
    assert [t.tid for t in n.threads] == [10, 11]
