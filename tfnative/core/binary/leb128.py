"""The one LEB128 reader (DWARF, CFI): unsigned and signed numbers, bounded in length and width."""

from __future__ import annotations

import mmap
from typing import Tuple, Union

MAX_LEB128_BYTES = 16  # a LEB128 number longer than this is not one (a 64-bit value takes 10; padding a few)


class Leb128Error(IndexError):
    """A LEB128 number cut short by its buffer's end, longer than ``MAX_LEB128_BYTES``, or wider than 64 bits.

    An ``IndexError``: every reader already treats running past its data as that.
    """


def uleb128(buf: Union[bytes, memoryview, mmap.mmap], pos: int) -> Tuple[int, int]:
    """The unsigned LEB128 number at ``pos`` (DWARF, CFI) and the position after it: the one LEB128 reader.

    Raises ``Leb128Error`` for a number that runs past ``buf``, is longer than ``MAX_LEB128_BYTES``
    or does not fit in 64 bits.
    """
    try:
        b = buf[pos]
    except IndexError:
        raise Leb128Error("a LEB128 number runs past the end of its data") from None
    if b < 0x80:  # most numbers are one byte
        return b, pos + 1
    return _leb128(buf, pos, False)


def sleb128(buf: Union[bytes, memoryview, mmap.mmap], pos: int) -> Tuple[int, int]:
    """The signed LEB128 number at ``pos`` and the position after it (errors as ``uleb128``)."""
    try:
        b = buf[pos]
    except IndexError:
        raise Leb128Error("a LEB128 number runs past the end of its data") from None
    if b < 0x80:
        return (b - 0x80 if b & 0x40 else b), pos + 1
    return _leb128(buf, pos, True)


def _leb128(buf: Union[bytes, memoryview, mmap.mmap], pos: int, signed: bool) -> Tuple[int, int]:
    """A LEB128 number of more than one byte at ``pos`` (``uleb128``, ``sleb128``)."""
    start = pos
    result = shift = 0
    b = 0x80
    try:
        while b >= 0x80 and pos < start + MAX_LEB128_BYTES:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
    except IndexError:
        raise Leb128Error("a LEB128 number runs past the end of its data") from None
    if b >= 0x80:
        raise Leb128Error("a LEB128 number longer than %d bytes at %d" % (MAX_LEB128_BYTES, start))
    if signed and b & 0x40:
        result -= 1 << shift
    if not (-(1 << 63) <= result < (1 << 63) if signed else result < (1 << 64)):
        raise Leb128Error("a LEB128 number wider than 64 bits at %d" % start)
    return result, pos
