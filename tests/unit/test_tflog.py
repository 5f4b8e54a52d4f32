"""TensorFlow's fatal log line read back from memory built in the test (absl's encoded form and its text form)."""

from __future__ import annotations

import struct

from tfnative.core.tflog import fatal_line

from .fakemem import FakeMemory

STACK, HEAP = 0x7FFF_0000_0000, 0x5600_0000_0000


def _varint(n: int, width: int = 0) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n or len(out) + 1 < width else 0))
        if not n and len(out) >= width:
            return bytes(out)


def _field(number: int, payload: bytes, width: int = 0) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload), width) + payload


def _encoded() -> bytes:
    """As absl 2025 lays out a LogMessage: file, line, time, severity, tid, then value fields (lengths padded)."""
    return (b"\xd0\xff\x7f\x00\x00" + _field(2, b"tensorflow/core/framework/tensor_shape.cc") + b"\x18" + _varint(362)
            + b"\x20" + _varint(1795577269236896) + b"\x28" + _varint(0x44C) + b"\x30" + _varint(18686)
            + _field(7, _field(6, b"Check failed: ")) + _field(7, _field(1, b"d < dims() (1 vs. 0)", 2), 2)
            + b"\x00" * 64)


def _memory(blob_at_heap: bytes) -> FakeMemory:
    mem = FakeMemory()
    mem.map(STACK, 0x10000)
    mem.map(HEAP, 0x2000)
    mem.write(HEAP + 0x270, blob_at_heap)
    mem.u64(STACK + 0x40, HEAP)  # a LogMessage's data pointer, somewhere on the aborting thread's stack
    return mem


def test_encoded_message_found_through_a_stack_pointer():
    assert fatal_line(_memory(_encoded()).read, STACK) == (
        "tensorflow/core/framework/tensor_shape.cc:362] Check failed: d < dims() (1 vs. 0)")


def test_formatted_line_is_taken_as_it_is():
    line = b"F0000 00:00:1795577269.236896   18230 tensor_shape.cc:362] Check failed: d < dims() (1 vs. 0) \n"
    assert fatal_line(_memory(line).read, STACK) == (
        "F0000 00:00:1795577269.236896   18230 tensor_shape.cc:362] Check failed: d < dims() (1 vs. 0)")


def test_nothing_is_guessed_from_other_memory():
    mem = _memory(b"Check failed: but not in a log message" + struct.pack("<Q", 0xDEADBEEF) * 8)
    assert fatal_line(mem.read, STACK) is None
    # an unreadable stack gives nothing, not an error
    assert fatal_line(mem.read, 0x1000) is None


TSL_LINE = (b"2026-11-25 13:22:13.876844: F tensorflow/core/framework/tensor_shape.cc:357] "
            b"Check failed: d < dims() (1 vs. 0)\n")


def test_tsl_line_left_below_the_stack_pointer_by_fprintf():
    """tsl's own logger (TF 2.18) formats its line in glibc's fprintf buffer, 8 KiB or so below where the
    aborting frame's stack pointer is when abort() runs: it is read there, its ``file:line] text`` taken."""
    mem = FakeMemory()
    mem.map(STACK, 0x10000)
    sp = STACK + 0xE000
    mem.write(sp - 0x21B3, b"\x00\x00\x00" + TSL_LINE + b"\x00" * 16)
    assert fatal_line(mem.read, sp) == (
        "tensorflow/core/framework/tensor_shape.cc:357] Check failed: d < dims() (1 vs. 0)")


def test_below_the_stack_pointer_stops_at_an_unmapped_page():
    """Only the readable pages that reach the stack pointer are read below it: a line beyond a gap is not taken
    (it is no part of this thread's stack), and a stack pointer at the bottom of its mapping reads nothing."""
    mem = FakeMemory()
    mem.map(STACK - 0x3000, 0x1000)  # another mapping, a page of gap below the stack
    mem.map(STACK, 0x10000)
    mem.write(STACK - 0x3000 + 0x10, TSL_LINE)
    assert fatal_line(mem.read, STACK + 0x800) is None
    assert fatal_line(mem.read, STACK) is None
    mem.write(STACK + 0x100, TSL_LINE)
    assert fatal_line(mem.read, STACK + 0x800) == (
        "tensorflow/core/framework/tensor_shape.cc:357] Check failed: d < dims() (1 vs. 0)")


def test_a_non_fatal_tsl_line_is_not_taken():
    mem = FakeMemory()
    mem.map(STACK, 0x10000)
    mem.write(STACK + 0x100, TSL_LINE.replace(b": F ", b": W "))
    assert fatal_line(mem.read, STACK + 0x800) is None
