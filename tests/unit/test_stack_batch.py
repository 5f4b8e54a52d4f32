"""The hold's stack ranges (``snapshot.stackcopy.stack_batch``): its one pass over every thread's registers
gives, thread by thread and in order, the ranges ``_thread_stack`` gives for that thread, usual case or
not."""

import os
from array import array

import pytest

from tfnative.core.procfs import Mapping
from tfnative.snapshot.stackcopy import RED_ZONE, STACK_COPY, _thread_stack, stack_batch
from tfnative.sources.modules import Mappings
from tfnative.sources.procmem import PAGE
from tfnative.sources.ptrace import REGISTERS

STACK = (0x7F0000000000, 0x7F0000800000)  # an 8 MiB thread stack
JIT = (0x7F1000000000, 0x7F1000100000)  # oneDNN's kind of buffer a JIT kernel moves its stack pointer to
SMALL = (0x7F2000000000, 0x7F2000010000)  # a 64 KiB thread stack
LIB = (0x7F3000000000, 0x7F3000200000)


def _mappings():
    return Mappings([Mapping(lo, hi, "rw-p", 0, "00:00", 0, "") for lo, hi in (STACK, JIT, SMALL, LIB)])


THREADS = {
    "usual": (STACK[1] - 0x2F70, STACK[1] - 0x700),
    "deep, cut at STACK_COPY": (STACK[0] + 0x1008, STACK[1] - 0x700),
    "thread pointer at the stack's very end": (SMALL[1] - 0x1000, SMALL[1]),
    "just above the stack's start": (SMALL[0] + 0x40, SMALL[1] - 0x700),
    "in a JIT buffer, its own stack elsewhere": (JIT[0] + 0x8000, SMALL[1] - 0x700),
    "unmapped": (0x10000008, 0),
    "no stack pointer": (0, 0),
    "no thread pointer": (LIB[0] + 0x5000, 0),
}


def _words(threads):
    regs = array("Q", bytes(8 * len(REGISTERS) * len(threads)))
    for k, (rsp, fs_base) in enumerate(threads):
        regs[k * len(REGISTERS) + REGISTERS.index("rsp")] = rsp
        regs[k * len(REGISTERS) + REGISTERS.index("fs_base")] = fs_base
    return memoryview(regs)


@pytest.mark.parametrize("case", sorted(THREADS))
def test_each_thread_as_thread_stack_gives_it(case):
    rsp, fs_base = THREADS[case]
    mappings = _mappings()
    batch = stack_batch(os.getpid(), mappings, _words([(rsp, fs_base)]), bytearray(1 << 20))
    assert batch.ranges == _thread_stack(mappings, rsp, fs_base)


def test_all_threads_in_one_pass_in_order():
    mappings = _mappings()
    threads = list(THREADS.values()) * 3
    batch = stack_batch(os.getpid(), mappings, _words(threads), bytearray(1 << 20))
    assert batch.ranges == [r for rsp, fs in threads for r in _thread_stack(mappings, rsp, fs)]


def test_what_the_ranges_are():
    mappings = _mappings()
    usual = _thread_stack(mappings, *THREADS["usual"])
    rsp = THREADS["usual"][0]
    assert usual == [(rsp - RED_ZONE - (rsp - RED_ZONE) % PAGE, STACK[1])]  # from below rsp to the stack's end
    deep = _thread_stack(mappings, *THREADS["deep, cut at STACK_COPY"])
    assert deep[0][1] - deep[0][0] <= STACK_COPY + 2 * PAGE and deep[0][1] < STACK[1]  # both ends to a page
    jit = _thread_stack(mappings, *THREADS["in a JIT buffer, its own stack elsewhere"])
    assert len(jit) == 2 and JIT[0] <= jit[0][0] and jit[1] == SMALL  # the top of its own stack, below fs_base
