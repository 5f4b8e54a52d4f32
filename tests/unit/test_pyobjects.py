"""Short reprs and attribute reads on hand-built CPython 3.12 objects: bounded on corrupt memory."""

from __future__ import annotations

import struct

from tfnative_gdb.pyframes import PythonReader
from tfnative_gdb.pylayout import LAYOUTS
from tfnative_gdb.pyobjects import MAX_REPR, ObjectReader

from .fakemem import FakeMemory

L = LAYOUTS[(3, 12)]
HEAP = 0x10000


class Heap:
    """Objects laid out one after another in one region, types named by their tp_name."""

    def __init__(self) -> None:
        self.mem = FakeMemory()
        self.mem.map(HEAP, 1 << 16)
        self.next = HEAP
        self.types = {}

    def alloc(self, size: int) -> int:
        at = self.next
        self.next += (size + 15) // 16 * 16
        return at

    def type(self, name: str) -> int:
        if name not in self.types:
            tp = self.alloc(400)
            text = self.alloc(len(name) + 1)
            self.mem.write(text, name.encode() + b"\0")
            self.mem.u64(tp + L.type_name, text)
            self.types[name] = tp
        return self.types[name]

    def obj(self, name: str, size: int = 64) -> int:
        at = self.alloc(size)
        self.mem.u64(at + L.ob_type, self.type(name))
        return at

    def str(self, text: str) -> int:
        at = self.obj("str", L.unicode_ascii_size + len(text) + 1)
        self.mem.write(at + L.unicode_length, struct.pack("<q", len(text)))
        self.mem.write(at + L.unicode_state, struct.pack("<I", (1 << 2) | (1 << 5) | (1 << 6)))
        self.mem.write(at + L.unicode_ascii_size, text.encode())
        return at

    def list(self, items, size=None) -> int:
        at = self.obj("list")
        arr = self.alloc(8 * max(len(items), 1))
        for i, item in enumerate(items):
            self.mem.u64(arr + 8 * i, item)
        self.mem.write(at + L.tuple_size, struct.pack("<q", len(items) if size is None else size))
        self.mem.u64(at + L.list_items, arr)
        return at

    def reader(self) -> ObjectReader:
        return ObjectReader(PythonReader(self.mem, L, 0))


def test_long_string_is_cut():
    h = Heap()
    s = h.str("x" * 500)
    text = h.reader().short_repr(s)
    assert len(text) == MAX_REPR and text.startswith("'xxx") and text.endswith("...")


def test_implausible_list_size_is_unreadable_not_a_hang():
    h = Heap()
    bad = h.list([], size=1 << 40)
    assert h.reader().short_repr(bad) == "<unreadable at 0x%x>" % bad


def test_list_that_contains_itself_stops_at_one_level():
    h = Heap()
    lst = h.list([0, 0])
    h.mem.u64(_items(h, lst), lst)  # lst[0] is lst itself
    h.mem.u64(_items(h, lst) + 8, lst)
    assert h.reader().short_repr(lst) == "[<list of 2>, <list of 2>]"


def _items(h: Heap, lst: int) -> int:
    return struct.unpack("<Q", h.mem.read(lst + L.list_items, 8))[0]


def test_pointer_into_nothing_is_unreadable():
    h = Heap()
    lst = h.list([0xDEAD0000])
    assert h.reader().short_repr(lst) == "[<unreadable at 0xdead0000>]"


def test_unknown_type_is_named_with_its_address():
    h = Heap()
    o = h.obj("Tensor")
    assert h.reader().short_repr(o) == "<Tensor at 0x%x>" % o
