"""The sections of a mapped ELF file by name, their bytes inflated where compressed (``SHF_COMPRESSED``, the legacy
``.zdebug_*``), up to a bound: the one section-data reader of the DWARF readers and ``tfnative doctor``."""

from __future__ import annotations

import mmap
import struct
import zlib
from typing import Dict, Optional, Tuple

from .dwarf import Unreadable
from .elf import SHT_NOBITS, ElfFile, Section

MAX_DECOMPRESS = 256 << 20  # a compressed debug section is inflated up to this size
SHF_COMPRESSED = 0x800
ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD = 1, 2


class DebugSections:
    """The sections of one mapped ELF file by name, inflated where compressed: the one section-data reader.

    ``SHF_COMPRESSED`` (zlib) sections and the legacy ``.zdebug_*`` ones (``ZLIB`` + size) are inflated up
    to ``limit`` bytes; ``tfnative doctor`` reads them through it too.
    """

    def __init__(self, elf: ElfFile, mm: mmap.mmap, limit: int = MAX_DECOMPRESS) -> None:
        self.elf = elf
        self.mm = mm
        self.limit = limit
        self.by_name: Dict[str, Section] = {}
        for s in elf.sections:
            self.by_name.setdefault(s.name, s)
        self._inflated: Dict[str, memoryview] = {}

    def present(self, name: str) -> bool:
        s = self.by_name.get(name)
        return s is not None and s.size > 0 and s.type != SHT_NOBITS

    def release(self) -> None:
        """Drops the inflated sections (before the mapping is closed)."""
        self._inflated.clear()

    def _zdebug(self, name: str) -> Optional[Section]:
        """The legacy ``.zdebug_*`` section of a ``.debug_*`` name, when there is no such ``.debug_*`` one."""
        if name in self.by_name or not name.startswith(".debug_"):
            return None
        return self.by_name.get(".z" + name[1:])

    def compression(self, name: str) -> Optional[str]:
        """How the section is compressed (``"zlib"``, ``"zstd"``, ``"zlib (.zdebug, legacy)"``), None if not."""
        if self._zdebug(name) is not None:
            return "zlib (.zdebug, legacy)"
        s = self.by_name.get(name)
        if s is None or not s.flags & SHF_COMPRESSED or s.type == SHT_NOBITS or s.size < 4:
            return None
        ch_type = struct.unpack_from(self.elf.endian + "I", self.mm, s.offset)[0]
        return {ELFCOMPRESS_ZLIB: "zlib", ELFCOMPRESS_ZSTD: "zstd"}.get(ch_type, "type %d" % ch_type)

    def uncompressed_size(self, name: str) -> int:
        """The section's size once inflated (its size where it is not compressed; 0 if absent)."""
        zs = self._zdebug(name)
        if zs is not None:
            zsize: int = struct.unpack_from(">Q", self.mm, zs.offset + 4)[0] if zs.size >= 12 else 0
            return zsize
        s = self.by_name.get(name)
        if s is None:
            return 0
        if s.flags & SHF_COMPRESSED and s.type != SHT_NOBITS:
            return self._chdr(name, s)[1]
        return s.size

    def _chdr(self, name: str, s: Section) -> Tuple[int, int, int]:
        """(type, inflated size, header size) of a ``SHF_COMPRESSED`` section's compression header."""
        hdr = 24 if self.elf.is64 else 12
        if s.size < hdr or s.offset + hdr > len(self.mm):
            raise Unreadable("%s is cut short" % name)
        if self.elf.is64:
            ch_type, _res, ch_size = struct.unpack_from(self.elf.endian + "IIQ", self.mm, s.offset)
        else:
            ch_type, ch_size = struct.unpack_from(self.elf.endian + "II", self.mm, s.offset)
        return ch_type, ch_size, hdr

    def data(self, name: str) -> Optional[memoryview]:
        """The section's bytes, inflated if compressed; None if absent; Unreadable beyond the bounds."""
        if name in self._inflated:
            return self._inflated[name]
        zs = self._zdebug(name)
        s = zs if zs is not None else self.by_name.get(name)
        if s is None or s.type == SHT_NOBITS or s.size == 0:
            return None
        if s.offset + s.size > len(self.mm):
            raise Unreadable("%s is cut short" % name)
        raw = memoryview(self.mm)[s.offset:s.offset + s.size]
        if zs is not None:
            if s.size < 12 or bytes(raw[:4]) != b"ZLIB":
                raise Unreadable("%s has no ZLIB header" % zs.name)
            ch_type, ch_size, hdr = ELFCOMPRESS_ZLIB, self.uncompressed_size(name), 12
        elif not s.flags & SHF_COMPRESSED:
            return raw
        else:
            ch_type, ch_size, hdr = self._chdr(name, s)
        if ch_type != ELFCOMPRESS_ZLIB:
            raise Unreadable("%s is compressed with type %d" % (name, ch_type))
        if ch_size > self.limit:
            raise Unreadable("%s inflates to %d bytes" % (name, ch_size))
        out = memoryview(zlib.decompressobj().decompress(raw[hdr:], self.limit))
        self._inflated[name] = out
        return out
