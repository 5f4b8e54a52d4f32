"""The CFI unwinder where CFI runs out: thread start (glibc's clone/clone3 after the syscall)."""

import struct

import pytest

from tfnative.core.binary.cfaprogram import CfiError
from tfnative.core.binary.cfi import RIP, RSP, Module, Unwinder


class _NoFde:
    def __init__(self):
        self.rows = {}  # the unwind rows cache every CFI object has

    def find(self, pc):
        raise CfiError("no FDE for 0x%x" % pc)


class _Lib(Module):
    """A module whose every pc lacks an FDE (as glibc's clone3+25)."""

    def __init__(self, lo, hi):
        super().__init__("libc.so.6", lo, [(lo, hi)])
        self._cfi = _NoFde()


class _Memory:
    def __init__(self, words):
        self.words = words

    def read(self, addr, size):
        for base, data in self.words.items():
            if base <= addr and addr + size <= base + len(data):
                return data[addr - base:addr - base + size]
        raise MemoryError("unreadable 0x%x" % addr)


CODE = 0x7F0000001000
CLONE3 = b"\xb8\xb3\x01\x00\x00\x0f\x05"  # mov $435,%eax; syscall
CLONE = b"\xb8\x38\x00\x00\x00\x0f\x05"  # mov $56,%eax; syscall
OTHER = b"\xb8\x27\x00\x00\x00\x0f\x05"  # mov $39,%eax (getpid); syscall


def _unwind(code, rax, stack=None, limit=64):
    pc = CODE + 0x100
    mem = {pc - len(code): code}
    if stack:
        mem.update(stack)
    unwinder = Unwinder([_Lib(CODE, CODE + 0x1000)], _Memory(mem).read)
    return unwinder.unwind({"rip": pc, "rsp": 0x7000, "rax": rax}, limit)


@pytest.mark.parametrize("code", [CLONE3, CLONE])
def test_new_thread_after_clone_ends_its_stack(code):
    """rax 0 after clone: the new thread, whose stack starts here: one frame, no error."""
    frames = _unwind(code, 0)
    assert [f.pc for f in frames] == [CODE + 0x100]


def test_parent_after_clone3_returns_to_its_caller():
    """rax = the new thread's id: the parent, its return address still at rsp."""
    ret = CODE + 0x800
    frames = _unwind(CLONE3, 1234, {0x7000: struct.pack("<Q", ret)}, limit=2)
    assert frames[1].pc == ret and frames[1].regs[RSP] == 0x7008 and frames[1].regs[RIP] == ret


def test_other_syscall_without_fde_is_still_refused():
    with pytest.raises(CfiError):
        _unwind(OTHER, 0)
