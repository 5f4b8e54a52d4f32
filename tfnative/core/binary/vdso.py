"""The kernel's vDSO: an ELF image that exists only in the target's memory.

``clock_gettime`` and ``gettimeofday`` run there, so a busy loop is often
caught inside it.  No file backs it, so its CFI (``.eh_frame_hdr``) and its
symbols (``.dynsym``) are read from the image itself, found through the
auxiliary vector's ``AT_SYSINFO_EHDR``, and its frames are named ``[vdso]``
as ``/proc/PID/maps`` names the mapping.
"""

from __future__ import annotations

import mmap
import struct
from typing import Callable, List, Optional

from .ehframe import EhFrame
from .elf import PF_X, PT_LOAD, ElfError, ElfFile, elf_header, program_headers
from .symindex import ElfIndex, build_index

__all__ = ["VDSO", "auxv_vdso_base", "cfi", "code_size", "image_of", "symbols"]

VDSO = "[vdso]"
AT_SYSINFO_EHDR = 33
MAX_IMAGE = 1 << 20  # a vDSO is a few pages: anything larger is not one


def auxv_vdso_base(auxv: bytes) -> Optional[int]:
    """The vDSO's address from an auxiliary vector (``/proc/PID/auxv``, a core's NT_AUXV), or None."""
    for i in range(0, len(auxv) - 15, 16):
        key, value = struct.unpack_from("<QQ", auxv, i)
        if key == 0:
            break
        if key == AT_SYSINFO_EHDR:
            return value or None
    return None


def image_of(read: Callable[[int, int], bytes], base: int) -> Optional[mmap.mmap]:
    """The vDSO's ELF image at ``base`` in the target (``read(addr, size)``), up to its section headers.

    None when it cannot be read or is not a 64-bit ELF image of a plausible size.
    """
    try:
        head = read(base, 64)
    except MemoryError:
        return None
    try:
        hdr = elf_header(head, VDSO)
    except ElfError:
        return None
    if not hdr.is64:
        return None
    size = hdr.shoff + hdr.shentsize * hdr.shnum
    if not 64 <= size <= MAX_IMAGE:
        return None
    try:
        data = read(base, size)
    except MemoryError:
        return None
    image = mmap.mmap(-1, size)
    image.write(data)
    return image


def code_size(image: mmap.mmap) -> int:
    """The end of the image's first executable PT_LOAD, from its start (0 if it has none)."""
    try:
        segments = program_headers(image, elf_header(image, VDSO), VDSO)
    except (ElfError, struct.error):
        return 0
    for seg in segments:
        if seg.type == PT_LOAD and seg.flags & PF_X:
            end: int = seg.vaddr + seg.memsz
            return end
    return 0


def cfi(image: mmap.mmap) -> EhFrame:
    return EhFrame(VDSO, image)


def symbols(image: mmap.mmap) -> List[ElfIndex]:
    """The image's ``.dynsym`` as a symbol index (empty list if it has none)."""
    try:
        return [build_index(ElfFile(image, VDSO), None, image, VDSO)]
    except (ElfError, ValueError, struct.error):
        return []
