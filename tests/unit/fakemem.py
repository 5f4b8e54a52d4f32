"""Target memory built in a test: regions of bytes at chosen addresses (py-spy's way of testing readers).

``FakeMemory.read(addr, size)`` behaves like a live process's memory for the
readers: bytes from one region, ``MemoryError`` for anything unmapped or a
read that crosses a region's end.
"""

from __future__ import annotations

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
