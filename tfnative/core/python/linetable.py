"""Decode CPython line tables to find the line of an instruction (pure).

* 3.10 (PEP 626): ``co_linetable`` is pairs of (bytecode-delta: unsigned byte,
  line-delta: signed byte; -128 = no line), addresses in bytes.
* 3.11+: the location table of ``Objects/locations.md``: entries start with a
  byte ``1cccclll`` (code, length-1 in code units) followed by varints.
"""

from typing import Optional, Tuple


def line_310(table: bytes, firstlineno: int, addr: int) -> Optional[int]:
    """Line of the instruction at byte offset ``addr`` (3.10 format)."""
    if addr < 0:
        return firstlineno
    line = firstlineno
    end = 0
    for i in range(0, len(table) - 1, 2):
        sdelta = table[i]
        ldelta = table[i + 1]
        if ldelta >= 128:
            ldelta -= 256
        start = end
        end = start + sdelta
        if ldelta == -128:
            current = None
        else:
            line += ldelta
            current = line
        if start <= addr < end:
            return current
    return None


def _varint(table: bytes, pos: int) -> Tuple[int, int]:
    """The varint at ``pos`` and the position after it; past the table's end (``len(table) + 1``) where the
    table ends inside it (a table torn by a process that ran on while it was read), never a read past it."""
    n = len(table)
    if pos >= n:
        return 0, n + 1
    b = table[pos]
    pos += 1
    val = b & 63
    shift = 0
    while b & 64:
        if pos >= n:
            return val, n + 1
        b = table[pos]
        pos += 1
        shift += 6
        val |= (b & 63) << shift
    return val, pos


def _svarint(table: bytes, pos: int) -> Tuple[int, int]:
    val, pos = _varint(table, pos)
    return (-(val >> 1) if val & 1 else (val >> 1)), pos


def line_311(table: bytes, firstlineno: int, addr: int) -> Optional[int]:
    """Line of the instruction at byte offset ``addr`` (3.11+ format); None where the table has none for it,
    or ends inside an entry (torn)."""
    unit = addr // 2
    if unit < 0:
        return firstlineno
    line = firstlineno
    pos = 0
    start = 0
    n = len(table)
    while pos < n:
        first = table[pos]
        pos += 1
        code = (first >> 3) & 15
        length = (first & 7) + 1
        current: Optional[int] = line
        if code == 15:
            current = None
        elif code == 14:
            delta, pos = _svarint(table, pos)
            line += delta
            current = line
            _, pos = _varint(table, pos)  # end line delta
            _, pos = _varint(table, pos)  # column + 1
            _, pos = _varint(table, pos)  # end column + 1
        elif code == 13:
            delta, pos = _svarint(table, pos)
            line += delta
            current = line
        elif code >= 10:
            line += code - 10
            current = line
            pos += 2
        else:
            pos += 1
            current = line
        if pos > n:  # the entry is cut by the table's end: a torn table, no line to trust
            return None
        if start <= unit < start + length:
            return current
        start += length
    return None


def line_for(version: Tuple[int, int], table: bytes, firstlineno: int, addr: int) -> Optional[int]:
    if tuple(version) < (3, 11):
        return line_310(table, firstlineno, addr)
    return line_311(table, firstlineno, addr)
