"""Target memory built in a test: regions of bytes at chosen addresses (py-spy's way of testing readers).

``FakeMemory.read(addr, size)`` behaves like a live process's memory for the
readers: bytes from one region, ``MemoryError`` for anything unmapped or a
read that crosses a region's end.
"""

from __future__ import annotations

import dis
import struct
from typing import Dict


class FakeMemory:
    def __init__(self) -> None:
        self.regions: Dict[int, bytearray] = {}
        self.reads = 0

    def map(self, addr: int, size: int) -> int:
        self.regions[addr] = bytearray(size)
        return addr

    def write(self, addr: int, data: bytes) -> None:
        for start, buf in self.regions.items():
            if start <= addr and addr + len(data) <= start + len(buf):
                buf[addr - start: addr - start + len(data)] = data
                return
        raise AssertionError("write outside the mapped regions: 0x%x" % addr)

    def u64(self, addr: int, value: int) -> None:
        self.write(addr, struct.pack("<Q", value))

    def read(self, addr: int, size: int) -> bytes:
        self.reads += 1
        for start, buf in self.regions.items():
            if start <= addr and addr + size <= start + len(buf):
                return bytes(buf[addr - start: addr - start + size])
        raise MemoryError("unmapped: 0x%x+%d" % (addr, size))


class PyHeap:
    """CPython objects of one layout built in fake memory, one after another: types named by ``tp_name``,
    compact ASCII strs, bytes, lists (py-spy's way of testing its readers)."""

    def __init__(self, layout, base: int = 0x10000, size: int = 1 << 16) -> None:  # noqa: ANN001
        self.L = layout
        self.mem = FakeMemory()
        self.mem.map(base, size)
        self.next = base
        self.types: Dict[str, int] = {}

    def alloc(self, size: int) -> int:
        at = self.next
        self.next += (size + 15) // 16 * 16
        return at

    def type(self, name: str) -> int:
        if name not in self.types:
            tp = self.alloc(400)
            text = self.alloc(len(name) + 1)
            self.mem.write(text, name.encode() + b"\0")
            self.mem.u64(tp + self.L.type_name, text)
            self.types[name] = tp
        return self.types[name]

    def obj(self, name: str, size: int = 64) -> int:
        at = self.alloc(size)
        self.mem.u64(at + self.L.ob_type, self.type(name))
        return at

    def str(self, text: str) -> int:
        L = self.L
        at = self.obj("str", L.unicode_ascii_size + len(text) + 1)
        self.mem.write(at + L.unicode_length, struct.pack("<q", len(text)))
        self.mem.write(at + L.unicode_state, struct.pack("<I", (1 << 2) | (1 << 5) | (1 << 6)))
        self.mem.write(at + L.unicode_ascii_size, text.encode())
        return at

    def bytes(self, data: bytes) -> int:
        L = self.L
        at = self.obj("bytes", L.bytes_sval + len(data) + 1)
        self.mem.write(at + L.bytes_size, struct.pack("<q", len(data)))
        self.mem.write(at + L.bytes_sval, data)
        return at

    def list(self, items, size=None) -> int:  # noqa: ANN001
        at = self.obj("list")
        arr = self.alloc(8 * max(len(items), 1))
        for i, item in enumerate(items):
            self.mem.u64(arr + 8 * i, item)
        self.mem.write(at + self.L.tuple_size, struct.pack("<q", len(items) if size is None else size))
        self.mem.u64(at + self.L.list_items, arr)
        return at


# Two functions whose code objects the frame tests lay out in fake memory, as "/app/train.py".
TRAIN_SOURCE = """
def inner(a):
    b = a + 1
    return b * 2

def outer():
    x = 3
    y = inner(x)
    return y
"""


def train_code(name: str):  # noqa: ANN201 - a code object
    """The code object of ``inner`` or ``outer`` in ``TRAIN_SOURCE``, compiled by the running interpreter."""
    ns: dict = {}
    exec(compile(TRAIN_SOURCE, "/app/train.py", "exec"), ns)
    return ns[name].__code__


def line_offset(code, line: int) -> int:  # noqa: ANN001 - a code object
    """Byte offset of the first instruction of ``line`` (relative to the function's first line)."""
    return next(i.offset for i in dis.get_instructions(code) if i.positions.lineno == code.co_firstlineno + line)
