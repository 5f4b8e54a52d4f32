"""The call-frame information of one ELF file: ``.eh_frame_hdr``'s sorted table searched for a pc's FDE, the FDE
and its CIE decoded (``EhFrame``), each address's unwind row kept once worked out."""

from __future__ import annotations

import mmap
import struct
from typing import Dict, NamedTuple, Optional, Tuple

from .cfaprogram import MASK, CfiError, Row
from .elf import ElfError, ElfFile, Section
from .leb128 import sleb128 as _sleb
from .leb128 import uleb128 as _uleb
from .mapfile import map_file


class Cie(NamedTuple):
    """A Common Information Entry: what every FDE pointing at it shares."""

    code_align: int
    data_align: int
    ra_reg: int  # the return-address column
    fde_enc: int  # DW_EH_PE encoding of its FDEs' addresses
    aug_z: bool  # "z" augmentation: FDEs carry an augmentation length
    signal_frame: bool  # "S": the frames of a signal trampoline
    initial: bytes  # the initial CFA instructions


class Fde(NamedTuple):
    """A Frame Description Entry: the file addresses ``[start, end)`` it covers, its CIE, its program."""

    start: int
    end: int
    cie: Cie
    program: bytes


_FIXED = {0x02: "<H", 0x03: "<I", 0x04: "<Q", 0x0A: "<h", 0x0B: "<i", 0x0C: "<q", 0x00: "<Q"}


class EhFrame:
    """The ``.eh_frame``/``.eh_frame_hdr`` of one ELF file (file addresses, not run-time ones)."""

    def __init__(self, path: str, image: Optional[mmap.mmap] = None) -> None:
        """The CFI of the file ``path``, or of ``image``: an ELF image read from memory (the vDSO)."""
        self.path = path
        # The unwind row (CFA rule, register rules, return-address column, signal frame) of each
        # file address looked up so far: threads waiting in the same place share it.
        self.rows: Dict[int, Row] = {}
        if image is not None:
            self.mm = image
        else:
            self.mm = map_file(path)
        try:
            elf = ElfFile(self.mm, path)
        except ElfError as exc:
            raise CfiError(str(exc)) from None
        hdr = elf.section(".eh_frame_hdr")
        eh = elf.section(".eh_frame")
        if hdr is None or eh is None or hdr.type == 8 or eh.type == 8:
            raise CfiError("%s has no .eh_frame_hdr" % path)
        self.hdr_addr = hdr.addr
        self.eh = eh
        self.eh_addr, self.eh_off, self.eh_size = eh.addr, eh.offset, eh.size
        mm = self.mm
        version, _ptr_enc, count_enc, table_enc = mm[hdr.offset:hdr.offset + 4]
        if version != 1 or table_enc != 0x3B:  # datarel | sdata4: what every linker writes
            raise CfiError("%s: unsupported .eh_frame_hdr (version %d, table encoding 0x%x)"
                           % (path, version, table_enc))
        pos = hdr.offset + 4
        _eh_ptr, pos = self._encoded(_ptr_enc, pos, hdr)
        self.count, pos = self._encoded(count_enc, pos, hdr)
        self.table = pos
        self._cies: Dict[int, Cie] = {}
        self._fdes: Dict[int, Fde] = {}

    def _encoded(self, enc: int, pos: int, sec: Section) -> Tuple[int, int]:
        """A DW_EH_PE-encoded value at file offset ``pos`` of section ``sec``."""
        if enc == 0xFF:
            return 0, pos
        fmt = enc & 0x0F
        if fmt == 0x01:
            value, end = _uleb(self.mm, pos)
        elif fmt == 0x09:
            value, end = _sleb(self.mm, pos)
        elif fmt in _FIXED:
            value = struct.unpack_from(_FIXED[fmt], self.mm, pos)[0]
            end = pos + struct.calcsize(_FIXED[fmt])
        else:
            raise CfiError("%s: pointer encoding 0x%x" % (self.path, enc))
        app = enc & 0x70
        if app == 0x10:  # pcrel
            value += sec.addr + (pos - sec.offset)
        elif app == 0x30:  # datarel: relative to .eh_frame_hdr
            value += self.hdr_addr
        elif app:
            raise CfiError("%s: pointer encoding 0x%x" % (self.path, enc))
        if enc & 0x80:
            raise CfiError("%s: indirect pointer in CFI" % self.path)
        return value & MASK, end

    def _eh_pos(self, fde_addr: int) -> int:
        off = self.eh_off + (fde_addr - self.eh_addr)
        if not self.eh_off <= off < self.eh_off + self.eh_size:
            raise CfiError("%s: FDE outside .eh_frame" % self.path)
        return off

    def find(self, pc: int) -> Fde:
        """The FDE covering file address ``pc``."""
        lo, hi = 0, self.count
        base = self.table
        unpack = struct.unpack_from
        while lo < hi:
            mid = (lo + hi) // 2
            if unpack("<i", self.mm, base + mid * 8)[0] + self.hdr_addr <= pc:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            raise CfiError("no FDE for 0x%x in %s" % (pc, self.path))
        fde_addr = (unpack("<i", self.mm, base + (lo - 1) * 8 + 4)[0] + self.hdr_addr) & MASK
        fde = self._fdes.get(fde_addr)
        if fde is None:
            fde = self._fdes[fde_addr] = self._parse_fde(self._eh_pos(fde_addr))
        if not fde.start <= pc < fde.end:
            raise CfiError("no FDE for 0x%x in %s" % (pc, self.path))
        return fde

    def _parse_fde(self, pos: int) -> Fde:
        mm = self.mm
        length = struct.unpack_from("<I", mm, pos)[0]
        if length == 0xFFFFFFFF:
            raise CfiError("%s: 64-bit DWARF CFI" % self.path)
        end = pos + 4 + length
        cie_ptr = struct.unpack_from("<I", mm, pos + 4)[0]
        cie = self._cie(pos + 4 - cie_ptr)
        start, p = self._encoded(cie.fde_enc, pos + 8, self.eh)
        size, p = self._encoded(cie.fde_enc & 0x0F, p, self.eh)
        if cie.aug_z:
            aug_len, p = _uleb(mm, p)
            p += aug_len
        return Fde(start, start + size, cie, bytes(mm[p:end]))

    def _cie(self, pos: int) -> Cie:
        cie = self._cies.get(pos)
        if cie is not None:
            return cie
        mm = self.mm
        length = struct.unpack_from("<I", mm, pos)[0]
        end = pos + 4 + length
        p = pos + 8
        version = mm[p]
        p += 1
        aug_end = mm.find(b"\0", p)
        aug = bytes(mm[p:aug_end])
        p = aug_end + 1
        if b"eh" in aug:
            raise CfiError("%s: old 'eh' augmentation" % self.path)
        code_align, p = _uleb(mm, p)
        data_align, p = _sleb(mm, p)
        if version == 1:
            ra_reg = mm[p]
            p += 1
        else:
            ra_reg, p = _uleb(mm, p)
        fde_enc = 0
        signal_frame = False
        aug_z = aug.startswith(b"z")
        if aug_z:
            aug_len, p = _uleb(mm, p)
            data_end = p + aug_len
            q = p
            for ch in aug[1:]:
                if ch == ord("R"):
                    fde_enc = mm[q]
                    q += 1
                elif ch == ord("P"):
                    enc = mm[q]
                    _value, q = self._encoded(enc & 0x7F, q + 1, self.eh)
                elif ch == ord("L"):
                    q += 1
                elif ch == ord("S"):
                    signal_frame = True
                elif ch == ord("B"):
                    pass
                else:
                    break  # unknown: the length lets us skip the rest
            p = data_end
        elif aug:
            raise CfiError("%s: CIE augmentation %r" % (self.path, aug))
        cie = Cie(code_align, data_align, ra_reg, fde_enc, aug_z, signal_frame, bytes(mm[p:end]))
        self._cies[pos] = cie
        return cie
