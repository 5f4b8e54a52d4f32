"""A small x86-64 ELF shared object built byte by byte: headers, symbols, a build-id, ``.eh_frame`` and its index.

The unit tests of the ELF reader, the symbol index and the CFI unwinder read
these bytes exactly as they read a library on disk; every address and CFA
instruction is chosen by the test, so each expected value is known.
"""

import struct
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

# DWARF register numbers (x86-64) and CFA opcodes the tests use.
RBP, RSP, RA = 6, 7, 16
DEF_CFA, DEF_CFA_OFFSET, DEF_CFA_REGISTER = 0x0C, 0x0E, 0x0D


def uleb(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def sleb(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        done = (v == 0 and not b & 0x40) or (v == -1 and b & 0x40)
        out.append(b | (0 if done else 0x80))
        if done:
            return bytes(out)


def advance(delta: int) -> bytes:
    """DW_CFA_advance_loc (delta < 64 code units)."""
    assert 0 < delta < 64
    return bytes([0x40 | delta])


def offset(reg: int, factored: int) -> bytes:
    """DW_CFA_offset: ``reg`` saved at CFA + factored * data_align."""
    return bytes([0x80 | reg]) + uleb(factored)


# The frame-pointer prologue every unoptimized x86-64 function starts with, and its CFI:
#   +0 push %rbp        CFA = rsp+8, return address at CFA-8
#   +1 mov  %rsp,%rbp   CFA = rsp+16, rbp saved at CFA-16
#   +4 ...              CFA = rbp+16
FRAME_POINTER_CFI = (advance(1) + bytes([DEF_CFA_OFFSET]) + uleb(16) + offset(RBP, 2)
                     + advance(3) + bytes([DEF_CFA_REGISTER]) + uleb(RBP))


@dataclass
class Function:
    name: str
    offset: int  # from the start of .text
    size: int
    cfi: bytes = b""  # FDE instructions; None-like b"" means CFA = rsp+8 throughout
    fde: bool = True


@dataclass
class Library:
    data: bytes
    text_addr: int
    addresses: Dict[str, int] = field(default_factory=dict)  # function name -> file virtual address
    build_id: bytes = b""


def _align(buf: bytearray, n: int) -> None:
    buf.extend(b"\0" * (-len(buf) % n))


def build(functions: List[Function], build_id: bytes = b"\x12\x34\x56\x78" * 5, text_size: int = 0x400,
          labels: List[Tuple[str, int]] = ()) -> Library:
    """An ELF64 ET_DYN whose file offsets equal its virtual addresses (one PT_LOAD from 0)."""
    out = bytearray(64)  # ELF header, written last
    phnum = 3
    phoff = len(out)
    out.extend(b"\0" * (56 * phnum))
    # each: name, type, flags, offset, size, link, info, align, entry size
    sections: List[Tuple[str, int, int, int, int, int, int, int, int]] = []

    # .note.gnu.build-id
    _align(out, 4)
    note_off = len(out)
    out.extend(struct.pack("<III", 4, len(build_id), 3) + b"GNU\0" + build_id)
    _align(out, 4)
    sections.append((".note.gnu.build-id", 7, 2, note_off, len(out) - note_off, 0, 0, 4, 0))

    # .text: int3 filler (the bytes are never executed, only addressed)
    _align(out, 16)
    text_addr = len(out)
    out.extend(b"\xcc" * text_size)
    sections.append((".text", 1, 6, text_addr, text_size, 0, 0, 16, 0))

    # .eh_frame: one CIE (zR, pcrel|sdata4), one FDE per function with CFI
    _align(out, 8)
    eh_addr = len(out)
    cie_body = (struct.pack("<I", 0) + b"\x01" + b"zR\0" + uleb(1) + sleb(-8) + bytes([RA]) + uleb(1) + b"\x1b"
                + bytes([DEF_CFA]) + uleb(RSP) + uleb(8) + offset(RA, 1))
    cie_body += b"\0" * (-(len(cie_body) + 4) % 8)
    out.extend(struct.pack("<I", len(cie_body)) + cie_body)
    fdes: List[Tuple[int, int]] = []  # (function address, FDE address)
    for fn in functions:
        if not fn.fde:
            continue
        at = len(out)
        start = text_addr + fn.offset
        body = bytearray(struct.pack("<I", at + 4 - eh_addr))  # CIE pointer: back to the CIE
        body += struct.pack("<i", start - (at + 8))  # pc_begin, pcrel from this field
        body += struct.pack("<I", fn.size) + uleb(0) + fn.cfi
        body += b"\0" * (-(len(body) + 4) % 8)
        out.extend(struct.pack("<I", len(body)) + body)
        fdes.append((start, at))
    out.extend(struct.pack("<I", 0))  # terminator
    sections.append((".eh_frame", 1, 2, eh_addr, len(out) - eh_addr, 0, 0, 8, 0))

    # .eh_frame_hdr: version 1, eh_frame_ptr pcrel|sdata4, count udata4, table datarel|sdata4
    _align(out, 4)
    hdr_addr = len(out)
    out.extend(bytes([1, 0x1B, 0x03, 0x3B]))
    out.extend(struct.pack("<i", eh_addr - (hdr_addr + 4)))
    out.extend(struct.pack("<I", len(fdes)))
    for start, fde in sorted(fdes):
        out.extend(struct.pack("<ii", start - hdr_addr, fde - hdr_addr))
    sections.append((".eh_frame_hdr", 1, 2, hdr_addr, len(out) - hdr_addr, 0, 0, 4, 0))
    load_end = len(out)

    # .strtab and .symtab: FUNC symbols in .text, labels being functions without a size (as assembly leaves them)
    strtab = bytearray(b"\0")
    syms = [struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0)]
    addresses = {}
    for fn in functions:
        addresses[fn.name] = text_addr + fn.offset
        syms.append(struct.pack("<IBBHQQ", len(strtab), 0x12, 0, 2, text_addr + fn.offset, fn.size))  # GLOBAL FUNC
        strtab += fn.name.encode() + b"\0"
    for name, off in labels:
        addresses[name] = text_addr + off
        syms.append(struct.pack("<IBBHQQ", len(strtab), 0x12, 0, 2, text_addr + off, 0))  # GLOBAL FUNC, no size
        strtab += name.encode() + b"\0"
    str_off = len(out)
    out.extend(strtab)
    strtab_index = len(sections) + 2  # null section first, .symtab just before it
    _align(out, 8)
    sym_off = len(out)
    out.extend(b"".join(syms))
    sections.append((".symtab", 2, 0, sym_off, len(out) - sym_off, strtab_index, 1, 8, 24))
    sections.append((".strtab", 3, 0, str_off, len(strtab), 0, 0, 1, 0))

    # .shstrtab, then the section header table
    names = bytearray(b"\0")
    name_at = {}
    for s in sections + [(".shstrtab",)]:
        name_at[s[0]] = len(names)
        names += s[0].encode() + b"\0"
    shstr_off = len(out)
    out.extend(names)
    sections.append((".shstrtab", 3, 0, shstr_off, len(names), 0, 0, 1, 0))
    _align(out, 8)
    shoff = len(out)
    out.extend(b"\0" * 64)  # SHN_UNDEF
    for name, typ, flags, off, size, link, info, align, ent in sections:
        addr = off if flags & 2 else 0  # SHF_ALLOC: address == offset
        out.extend(struct.pack("<IIQQQQIIQQ", name_at[name], typ, flags, addr, off, size, link, info, align, ent))
    shnum = len(sections) + 1

    # program headers: PT_LOAD over the allocated part, PT_NOTE, PT_GNU_EH_FRAME
    phdrs = [(1, 5, 0, 0, 0, load_end, load_end, 0x1000),
             (4, 4, note_off, note_off, note_off, 16 + len(build_id), 16 + len(build_id), 4),
             (0x6474E550, 4, hdr_addr, hdr_addr, hdr_addr, sections[3][4], sections[3][4], 4)]
    for i, p in enumerate(phdrs):
        struct.pack_into("<IIQQQQQQ", out, phoff + 56 * i, *p)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    struct.pack_into("<16sHHIQQQIHHHHHH", out, 0, ident, 3, 62, 1, 0, phoff, shoff, 0, 64, 56, phnum, 64, shnum,
                     shnum - 1)
    return Library(bytes(out), text_addr, addresses, build_id)
