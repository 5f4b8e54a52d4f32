"""TensorFlow's fatal log line read back from memory built in the test (absl's encoded form and its text form)."""

from __future__ import annotations

import struct

from tfnative.core.tensorflow.tflog import fatal_line

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


# --- the edges: pages, the window's ends, decoy pointers, the pointer budget, nested and broken messages ------

PAGE = 4096


def _paged(mem: FakeMemory, start: int, pages: int) -> None:
    """Map ``pages`` pages from ``start``, each its own region: a read that crosses a page fails, as a read
    across two mappings of a process does."""
    for k in range(pages):
        mem.map(start + k * PAGE, PAGE)


def _put(mem: FakeMemory, addr: int, data: bytes) -> None:
    """``data`` written at ``addr`` across the page regions it spans."""
    while data:
        n = min(len(data), PAGE - addr % PAGE)
        mem.write(addr, data[:n])
        addr, data = addr + n, data[n:]


def _message(values: bytes, line: int = 362, tail: bytes = b"\x00" * 64) -> bytes:
    """An absl-encoded LogMessage: file, line, time, then ``values`` (field-7 messages) and ``tail``."""
    return (b"\xd0\xff\x7f\x00\x00" + _field(2, b"tensorflow/core/framework/tensor_shape.cc") + b"\x18"
            + _varint(line) + b"\x20" + _varint(1795577269236896) + values + tail)


def _value(text: bytes, field: int = 1) -> bytes:
    return _field(7, _field(field, text))


CHECK = _value(b"Check failed: ", 6)
WHERE = "tensorflow/core/framework/tensor_shape.cc:362] "
FORMATTED = b"F0000 00:00:1795577269.236896   18230 tensor_shape.cc:362] Check failed: d < dims() (1 vs. 0)"


def _found(blob: bytes) -> object:
    return fatal_line(_memory(blob).read, STACK)


NESTED = [  # (values, the message's text; None: no message)
    (CHECK + _field(7, _field(7, _field(1, b"in a nested value"))), "Check failed: in a nested value"),
    # nesting stops two levels down: what is below is taken as it is (here printable: "2(" then the text)
    (_field(7, _field(7, _field(7, _field(7, _field(6, b"x" * 40))))), "2(" + "x" * 40),
    (CHECK + _field(7, b"\x08\x96\x01" + _field(1, b"after a varint field")), "Check failed: after a varint field"),
    # a string that happens to parse as protobuf ("8" is field 7 as a varint) is a string still
    (_value(b"Check failed: n == ", 6) + _value(b"80"), "Check failed: n == 80"),
    # a field 7 whose bytes are no message is text
    (_field(7, _field(7, b"Check it")), "Check it"),
    # a value cut short, a 64-bit field: the text before it stays
    (CHECK + _field(7, b"\x0a\x0aabc"), "Check failed:"),
    (CHECK + _field(7, b"\x09" + b"\x01" * 8 + _field(1, b"zzz")), "Check failed:"),
    (CHECK + _value(b"caf\xe9 d < 1"), "Check failed: caf\ufffd d < 1"),  # bad UTF-8 replaced, not fatal
    (CHECK + _value(b"bell \x07"), None),  # not printable: no message of a log
    (CHECK + _value(b"x") + _field(8, b"not a value"), "Check failed: x"),  # the values end at another field
    (b"\x08\x05" + CHECK + _value(b"y"), "Check failed: y"),  # a varint field before the values is skipped
    (CHECK + _value(b"z") + b"\x00\x00" + _value(b" stale"), "Check failed: z"),  # field 0: the end
]


def test_encoded_messages_nested_broken_and_odd():
    for values, text in NESTED:
        got = _found(_message(values))
        assert got == (None if text is None else WHERE + text), (values, got)


def test_a_line_of_three_varint_bytes():
    assert _found(_message(CHECK + _value(b"x"), line=70000)) == (
        "tensorflow/core/framework/tensor_shape.cc:70000] Check failed: x")


def test_a_message_cut_by_the_end_of_what_is_read_keeps_its_text():
    """The message's last field runs past the 4 KiB read at the pointer: its text so far is taken."""
    mem = FakeMemory()
    mem.map(STACK, 0x10000)
    mem.map(HEAP, 0x2000)
    blob = _message(CHECK + _value(b"d < 1"), tail=b"\x3a\x80")
    mem.write(HEAP + PAGE - len(blob), blob)
    mem.u64(STACK + 0x40, HEAP)
    assert fatal_line(mem.read, STACK) == WHERE + "Check failed: d < 1"


def test_decoys_before_the_message_in_the_same_memory():
    """A header whose name length is wrong, and a torn message with no text, come before the real one."""
    wrong_length = b"\x12\x05tensorflow/x.cc\x18\x01" + _value(b"wrong")
    torn = _message(_field(7, b"\x0a\x0aabc"), tail=b"")
    assert _found(wrong_length + torn + _message(CHECK + _value(b"real"))) == WHERE + "Check failed: real"


def test_bad_utf8_and_trailing_spaces_in_text_lines():
    assert _found(FORMATTED.replace(b"d < dims()", b"caf\xe9") + b"\n") == (
        FORMATTED.replace(b"d < dims()", b"caf\xef\xbf\xbd").decode())
    mem = FakeMemory()
    mem.map(STACK, 0x10000)
    mem.write(STACK + 0x100, TSL_LINE.replace(b"(1 vs. 0)\n", b"caf\xe9   \n"))
    assert fatal_line(mem.read, STACK + 0x800) == (
        "tensorflow/core/framework/tensor_shape.cc:357] Check failed: d < dims() caf\ufffd")


def test_the_stack_window_read_page_by_page_to_its_last_word_and_no_further():
    """64 KiB from the stack pointer, each page its own mapping: a pointer on a later page and in the window's
    last word are followed; a fatal line just past the window is not read."""
    for sp_off in (0, 1, 0x804):
        mem = FakeMemory()
        _paged(mem, STACK, 18)
        mem.map(HEAP, 0x2000)
        sp = STACK + sp_off
        _put(mem, sp + 0x10000 + 0x100, FORMATTED.replace(b"Check failed", b"Past the window"))
        mem.write(HEAP + 0x100, _message(CHECK + _value(b"on a later page")))
        _put(mem, sp + 0x3008, struct.pack("<Q", HEAP + 0x100))
        assert fatal_line(mem.read, sp) == WHERE + "Check failed: on a later page", sp_off
        mem.write(HEAP + 0x1100, _message(CHECK + _value(b"in the last word")))
        _put(mem, sp + 0x3008, b"\x00" * 8)
        _put(mem, sp + 0xFFF8, struct.pack("<Q", HEAP + 0x1100))
        assert fatal_line(mem.read, sp) == WHERE + "Check failed: in the last word", sp_off
    # a stack that ends inside the window, at a stack pointer not 8-aligned: its whole words are read
    mem = FakeMemory()
    mem.map(STACK, 0x2000)
    mem.map(HEAP, 0x2000)
    mem.write(HEAP, _message(CHECK + _value(b"short stack")))
    mem.u64(STACK + 0x1FF4, HEAP)  # the last whole word from STACK + 4
    assert fatal_line(mem.read, STACK + 4) == WHERE + "Check failed: short stack"


def _budget_memory(words: list, sp: int = STACK) -> FakeMemory:
    mem = FakeMemory()
    mem.map(STACK, 0x10000)
    mem.map(HEAP, 0x2000)
    mem.write(HEAP + 0x100, _message(CHECK + _value(b"budget")))
    for k, word in enumerate(words):
        mem.u64(sp + 8 * k, word)
    return mem


UNMAPPED = 0x5500_0000_0000  # followable words whose memory is not there (they use up the budget)


def test_pointer_budget_counts_only_words_that_could_point_at_a_message():
    """1024 distinct words are followed at most; words that cannot point at a message (the stack's own
    addresses, unaligned, below 64 KiB, beyond user space, seen before) do not use the budget up."""
    from tfnative.core.memory import USER_SPACE_END
    from tfnative.core.tensorflow.tflog import MAX_POINTERS

    real = HEAP + 0x100
    followable = [UNMAPPED + 8 * k for k in range(MAX_POINTERS - 1)]
    decoys = [STACK, STACK + 8, STACK + 0xFFF8, UNMAPPED + 3, 0x8000, 0xFFF8, USER_SPACE_END, USER_SPACE_END + 8,
              (1 << 64) - 8, UNMAPPED, UNMAPPED + 8]
    mem = _budget_memory(decoys + followable + [real])
    assert fatal_line(mem.read, STACK) == WHERE + "Check failed: budget"
    # the boundaries are followable: the lowest user address, just past the window, just below user space's end
    edges = [0x10000, STACK + 0x10000, USER_SPACE_END - 8]
    mem = _budget_memory(edges + followable[:MAX_POINTERS - len(edges)] + [real])
    assert fatal_line(mem.read, STACK) is None  # the 1025th word: not followed
    mem = _budget_memory(edges + followable[:MAX_POINTERS - len(edges) - 1] + [real])
    assert fatal_line(mem.read, STACK) == WHERE + "Check failed: budget"  # the 1024th
    # past the budget, the stack itself and what is below it are still searched
    mem = _budget_memory(followable + followable[:10] + [UNMAPPED - 8 * k for k in range(1, 100)])
    mem.write(STACK + 0xF000, FORMATTED + b"\n")
    assert fatal_line(mem.read, STACK) == FORMATTED.decode()


def test_a_pointer_repeated_is_read_once():
    mem = _budget_memory([HEAP + 0x1000] * 4000)
    assert fatal_line(mem.read, STACK) is None
    assert mem.reads < 64  # the stack's pages, one pointer's page, the pages below


def test_a_message_at_the_lowest_user_address():
    mem = FakeMemory()
    mem.map(STACK, 0x10000)
    mem.map(0x10000, 0x1000)
    mem.write(0x10000, _message(CHECK + _value(b"low")))
    mem.u64(STACK + 0x10, 0x10000)
    assert fatal_line(mem.read, STACK) == WHERE + "Check failed: low"


def test_below_the_stack_pointer_only_from_32_kib_above_the_lowest_address():
    from tfnative.core.tensorflow.tflog import BELOW_SP_BYTES

    mem = FakeMemory()
    _paged(mem, 0x10000, 12)
    _put(mem, 0x10100, TSL_LINE)
    assert fatal_line(mem.read, 0x10000 + BELOW_SP_BYTES) == (
        "tensorflow/core/framework/tensor_shape.cc:357] Check failed: d < dims() (1 vs. 0)")
    assert fatal_line(mem.read, 0x11000) is None  # too near the bottom of user space: nothing below is read


def test_below_the_stack_pointer_ends_at_it():
    """A line that runs across the stack pointer is read below it only up to it (page by page)."""
    mem = FakeMemory()
    _paged(mem, STACK, 16)
    sp = STACK + 0x8800
    cut = TSL_LINE.index(b"(1 vs")
    _put(mem, sp - cut, TSL_LINE)
    assert fatal_line(mem.read, sp) == "tensorflow/core/framework/tensor_shape.cc:357] Check failed: d < dims()"
    # and it starts 32 KiB below, mid-page: the first (partial) page is read too
    from tfnative.core.tensorflow.tflog import BELOW_SP_BYTES

    _put(mem, sp - cut, b"\x00" * len(TSL_LINE))
    _put(mem, sp - BELOW_SP_BYTES + 0x10, TSL_LINE)
    assert fatal_line(mem.read, sp) == (
        "tensorflow/core/framework/tensor_shape.cc:357] Check failed: d < dims() (1 vs. 0)")
