"""Recovering the caller of a frame without CFI: the call check, the frame pointer, the scan."""

import struct

from tfnative.core.binary.jit import is_call_before, recover_caller

RBP, RSP, RIP = 6, 7, 16
CODE_LO, CODE_HI = 0x400000, 0x500000


def test_call_forms():
    pad = b"\x90" * 8
    assert is_call_before((pad + b"\xe8\x10\x20\x30\x40")[-8:])  # call rel32
    assert is_call_before((pad + b"\xff\xd3")[-8:])  # call *%rbx
    assert is_call_before((pad + b"\x41\xff\xd3")[-8:])  # call *%r11
    assert is_call_before((pad + b"\xff\x50\x18")[-8:])  # call *0x18(%rax)
    assert is_call_before((pad + b"\xff\x15\x00\x10\x00\x00")[-8:])  # call *rip+0x1000
    assert is_call_before((pad + b"\xff\x14\x24")[-8:])  # call *(%rsp)
    assert is_call_before((pad + b"\x41\xff\x94\x24\x00\x01\x00\x00")[-8:])  # call *0x100(%r12)
    assert not is_call_before(pad)
    assert not is_call_before((pad + b"\xff\xe3")[-8:])  # jmp *%rbx: not a call
    assert not is_call_before((pad + b"\x48\x89\xe5")[-8:])


class _Memory:
    """Code at CODE_LO..CODE_HI (calls before every 0x...10 address), a stack at 0x7000..0x9000."""

    def __init__(self, stack_words):
        self.stack = bytearray(0x2000)
        for addr, value in stack_words.items():
            struct.pack_into("<Q", self.stack, addr - 0x7000, value)

    def read(self, addr, size):
        if 0x7000 <= addr and addr + size <= 0x9000:
            return bytes(self.stack[addr - 0x7000:addr - 0x7000 + size])
        if CODE_LO <= addr and addr + size <= CODE_HI:
            # each 16-byte line of "code" ends with call rel32 before its next line: 0x...10 are return addresses
            line = b"\x90" * 11 + b"\xe8\x00\x00\x00\x00"
            start = (addr - CODE_LO) % 16
            return (line * (size // 16 + 2))[start:start + size]
        raise MemoryError("unreadable 0x%x" % addr)


def _is_code(pc):
    return CODE_LO <= pc < CODE_HI


def test_frame_pointer_chain():
    mem = _Memory({0x7100: 0x7200, 0x7108: 0x400110})
    regs, how = recover_caller({RSP: 0x7000, RBP: 0x7100, RIP: 0x1234}, mem.read, _is_code)
    assert how == "frame-pointer" and regs == {RSP: 0x7110, RIP: 0x400110, RBP: 0x7200}


def test_scan_when_frame_pointer_is_junk():
    # a code pointer not after a call (0x400104) is skipped; the return address at 0x7040 is taken
    mem = _Memory({0x7010: 0x400104, 0x7040: 0x400210})
    regs, how = recover_caller({RSP: 0x7000, RBP: 0x1234, RIP: 0x1234}, mem.read, _is_code)
    assert how == "scan" and regs[RSP] == 0x7048 and regs[RIP] == 0x400210


def test_scan_finds_saved_frame_pointer():
    # the callee pushed the caller's rbp (0x7300) just below the return address; [0x7308] is a return address
    mem = _Memory({0x7038: 0x7300, 0x7040: 0x400210, 0x7308: 0x400410})
    regs, how = recover_caller({RSP: 0x7000, RBP: 0x1234, RIP: 0x1234}, mem.read, _is_code)
    assert how == "scan" and regs[RBP] == 0x7300


def test_nearer_scan_hit_wins_over_an_outer_frame_pointer():
    # rbp belongs to an outer function: the scan's nearer return address is the caller
    mem = _Memory({0x7020: 0x400310, 0x7100: 0x7200, 0x7108: 0x400110})
    regs, how = recover_caller({RSP: 0x7000, RBP: 0x7100, RIP: 0x1234}, mem.read, _is_code)
    assert how == "scan" and regs[RIP] == 0x400310


def test_nothing_found():
    assert recover_caller({RSP: 0x7000, RIP: 0x1234}, _Memory({}).read, _is_code) is None
