"""The vDSO read from memory: found through the auxiliary vector, its CFI and symbols from the image."""

import struct
import sys

import pytest

from tfnative.core.binary import vdso
from tfnative.sources.procmem import Memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def test_auxv_base():
    auxv = struct.pack("<QQQQQQ", 6, 4096, 33, 0x7FFF1000, 0, 0)
    assert vdso.auxv_vdso_base(auxv) == 0x7FFF1000
    assert vdso.auxv_vdso_base(struct.pack("<QQ", 0, 0)) is None


def test_own_vdso_image_has_cfi_and_names():
    with open("/proc/self/auxv", "rb") as f:
        base = vdso.auxv_vdso_base(f.read())
    assert base
    mem = Memory(__import__("os").getpid())
    try:
        image = vdso.image_of(mem.read, base)
    finally:
        mem.close()
    assert image is not None and vdso.code_size(image) > 0
    (index,) = vdso.symbols(image)
    ((_name, start),) = index.find("clock_gettime")
    assert index.symbolize(start + 1)[0] in ("clock_gettime", "__vdso_clock_gettime")
    fde_start, fde_end, _cie, _program = vdso.cfi(image).find(start + 1)
    assert fde_start <= start < fde_end
    assert vdso.image_of(lambda addr, size: b"\0" * size, base) is None  # not an ELF image


def test_unreadable_image():
    def unreadable(addr, size):
        raise MemoryError("unreadable")

    assert vdso.image_of(unreadable, 0x1000) is None
