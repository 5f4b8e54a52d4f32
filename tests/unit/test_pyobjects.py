"""Short reprs and attribute reads on hand-built CPython 3.12 objects: bounded on corrupt memory."""

from __future__ import annotations

import struct

from tfnative.core.python.pyframes import PythonReader
from tfnative.core.python.pylayout import LAYOUTS
from tfnative.core.python.pyobjects import MAX_REPR, ObjectReader

from .fakemem import PyHeap

L = LAYOUTS[(3, 12)]


class Heap(PyHeap):
    def __init__(self) -> None:
        super().__init__(L)

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
