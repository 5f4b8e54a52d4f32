"""CFA programs and DWARF expressions: a CIE's and an FDE's instructions run up to a pc (``run_program``) give the
unwind row there (the CFA rule, each register's rule); ``evaluate`` computes the DWARF expressions those rules use
(the subset CFI uses: PLT entries, glibc's signal trampoline); ``CfiError`` where CFI alone cannot unwind a pc."""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Literal, NamedTuple, Optional, Tuple, TypedDict, Union

from .leb128 import sleb128 as _sleb
from .leb128 import uleb128 as _uleb

MASK = (1 << 64) - 1
Reader = Callable[[int, int], bytes]


class CfiError(Exception):
    """This pc cannot be unwound from CFI alone."""

    # Set by ``Unwinder.unwind``: the frames (``cfi.Frame``) unwound before the one that failed.
    frames: Optional[List[Any]] = None


# The CFA rule: ("reg", reg, offset) | ("expr", bytes).
CfaRule = Union[Tuple[Literal["reg"], int, int], Tuple[Literal["expr"], bytes]]
# A register's rule (a register without one keeps its value: "same value").
RegRule = Union[
    Tuple[Literal["offset"], int],  # saved at CFA + n
    Tuple[Literal["val_offset"], int],  # is CFA + n
    Tuple[Literal["register"], int],  # in another register
    Tuple[Literal["expr"], bytes],  # saved at the address the expression gives
    Tuple[Literal["val_expr"], bytes],  # is the value the expression gives
    Tuple[Literal["undefined"]],
]


class State(TypedDict):
    """What a CFA program changes as it runs: the CFA rule and the register rules."""

    cfa: Optional[CfaRule]
    rules: Dict[int, RegRule]


class Row(NamedTuple):
    """The unwind row at one address: the CFA rule, the register rules, the return-address column."""

    cfa: Optional[CfaRule]
    rules: Dict[int, RegRule]  # DWARF register -> its rule
    ra_reg: int
    signal_frame: bool



def run_program(program: bytes, code_align: int, data_align: int, loc: int, pc: int, state: State,
         initial: Optional[Dict[int, RegRule]]) -> int:
    """Run CFA instructions from ``loc`` while the location is <= ``pc``; update ``state``."""
    rules = state["rules"]
    stack: List[Tuple[Optional[CfaRule], Dict[int, RegRule]]] = []
    pos, n = 0, len(program)
    while pos < n:
        op = program[pos]
        pos += 1
        high, low = op & 0xC0, op & 0x3F
        if high == 0x40:  # advance_loc
            loc += low * code_align
            if loc > pc:
                return loc
            continue
        if high == 0x80:  # offset
            off, pos = _uleb(program, pos)
            rules[low] = ("offset", off * data_align)
            continue
        if high == 0xC0:  # restore
            _restore(rules, initial, low)
            continue
        if op == 0x00:
            continue
        if op in (0x02, 0x03, 0x04):
            fmt = {0x02: "<B", 0x03: "<H", 0x04: "<I"}[op]
            delta = struct.unpack_from(fmt, program, pos)[0]
            pos += struct.calcsize(fmt)
            loc += delta * code_align
            if loc > pc:
                return loc
        elif op == 0x05:  # offset_extended
            reg, pos = _uleb(program, pos)
            off, pos = _uleb(program, pos)
            rules[reg] = ("offset", off * data_align)
        elif op == 0x06:  # restore_extended
            reg, pos = _uleb(program, pos)
            _restore(rules, initial, reg)
        elif op == 0x07:  # undefined
            reg, pos = _uleb(program, pos)
            rules[reg] = ("undefined",)
        elif op == 0x08:  # same_value
            reg, pos = _uleb(program, pos)
            rules.pop(reg, None)
        elif op == 0x09:  # register
            reg, pos = _uleb(program, pos)
            other, pos = _uleb(program, pos)
            rules[reg] = ("register", other)
        elif op == 0x0A:  # remember_state
            stack.append((state["cfa"], dict(rules)))
        elif op == 0x0B:  # restore_state
            if not stack:
                raise CfiError("DW_CFA_restore_state with nothing remembered")
            cfa, saved = stack.pop()
            state["cfa"] = cfa
            rules.clear()
            rules.update(saved)
        elif op == 0x0C:  # def_cfa
            reg, pos = _uleb(program, pos)
            off, pos = _uleb(program, pos)
            state["cfa"] = ("reg", reg, off)
        elif op == 0x0D:  # def_cfa_register
            reg, pos = _uleb(program, pos)
            state["cfa"] = ("reg", reg, _cfa_offset(state))
        elif op == 0x0E:  # def_cfa_offset
            off, pos = _uleb(program, pos)
            state["cfa"] = ("reg", _cfa_reg(state), off)
        elif op == 0x0F:  # def_cfa_expression
            size, pos = _uleb(program, pos)
            state["cfa"] = ("expr", program[pos:pos + size])
            pos += size
        elif op in (0x10, 0x16):  # expression, val_expression
            reg, pos = _uleb(program, pos)
            size, pos = _uleb(program, pos)
            if op == 0x10:
                rules[reg] = ("expr", program[pos:pos + size])
            else:
                rules[reg] = ("val_expr", program[pos:pos + size])
            pos += size
        elif op == 0x11:  # offset_extended_sf
            reg, pos = _uleb(program, pos)
            off, pos = _sleb(program, pos)
            rules[reg] = ("offset", off * data_align)
        elif op == 0x12:  # def_cfa_sf
            reg, pos = _uleb(program, pos)
            off, pos = _sleb(program, pos)
            state["cfa"] = ("reg", reg, off * data_align)
        elif op == 0x13:  # def_cfa_offset_sf
            off, pos = _sleb(program, pos)
            state["cfa"] = ("reg", _cfa_reg(state), off * data_align)
        elif op in (0x14, 0x15):  # val_offset, val_offset_sf
            reg, pos = _uleb(program, pos)
            off, pos = (_uleb if op == 0x14 else _sleb)(program, pos)
            rules[reg] = ("val_offset", off * data_align)
        elif op == 0x2E:  # GNU_args_size
            _size, pos = _uleb(program, pos)
        elif op == 0x2F:  # GNU_negative_offset_extended
            reg, pos = _uleb(program, pos)
            off, pos = _uleb(program, pos)
            rules[reg] = ("offset", -off * data_align)
        else:
            raise CfiError("CFA instruction 0x%02x" % op)
    return loc


def _restore(rules: Dict[int, RegRule], initial: Optional[Dict[int, RegRule]], reg: int) -> None:
    if initial is not None and reg in initial:
        rules[reg] = initial[reg]
    else:
        rules.pop(reg, None)


def _cfa_reg(state: State) -> int:
    cfa = state["cfa"]
    if cfa is None or cfa[0] != "reg":
        raise CfiError("CFA offset change without a register rule")
    return cfa[1]


def _cfa_offset(state: State) -> int:
    cfa = state["cfa"]
    if cfa is None or cfa[0] != "reg":
        raise CfiError("CFA register change without an offset rule")
    return cfa[2]


# ------------------------------------------------------------------------------ DWARF expressions


def evaluate(expr: bytes, regs: Dict[int, int], read: Reader, push_cfa: Optional[int] = None) -> int:
    """The value of a DWARF expression (the subset CFI uses)."""
    stack: List[int] = [] if push_cfa is None else [push_cfa]
    pos, n = 0, len(expr)

    def reg(r: int) -> int:
        if r not in regs:
            raise CfiError("DWARF expression reads register %d, unknown here" % r)
        return regs[r]

    while pos < n:
        op = expr[pos]
        pos += 1
        if 0x30 <= op <= 0x4F:  # lit0..lit31
            stack.append(op - 0x30)
        elif 0x70 <= op <= 0x8F:  # breg0..breg31
            off, pos = _sleb(expr, pos)
            stack.append((reg(op - 0x70) + off) & MASK)
        elif 0x50 <= op <= 0x6F:  # reg0..reg31
            stack.append(reg(op - 0x50))
        elif op == 0x92:  # bregx
            r, pos = _uleb(expr, pos)
            off, pos = _sleb(expr, pos)
            stack.append((reg(r) + off) & MASK)
        elif op in (0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F):
            fmt = {0x08: "<B", 0x09: "<b", 0x0A: "<H", 0x0B: "<h", 0x0C: "<I", 0x0D: "<i",
                   0x0E: "<Q", 0x0F: "<q"}[op]
            stack.append(struct.unpack_from(fmt, expr, pos)[0] & MASK)
            pos += struct.calcsize(fmt)
        elif op == 0x10:
            v, pos = _uleb(expr, pos)
            stack.append(v & MASK)
        elif op == 0x11:
            v, pos = _sleb(expr, pos)
            stack.append(v & MASK)
        elif op == 0x12:
            stack.append(stack[-1])
        elif op == 0x13:
            stack.pop()
        elif op == 0x14:
            stack.append(stack[-2])
        elif op == 0x15:
            stack.append(stack[-1 - expr[pos]])
            pos += 1
        elif op == 0x16:
            stack[-1], stack[-2] = stack[-2], stack[-1]
        elif op == 0x06:  # deref
            addr = stack.pop()
            try:
                stack.append(struct.unpack("<Q", read(addr, 8))[0])
            except MemoryError:
                raise CfiError("DWARF expression reads unreadable 0x%x" % addr) from None
        elif op == 0x23:  # plus_uconst
            v, pos = _uleb(expr, pos)
            stack.append((stack.pop() + v) & MASK)
        elif op == 0x1F:
            stack.append(-stack.pop() & MASK)
        elif op == 0x20:
            stack.append(~stack.pop() & MASK)
        elif op in _BINARY:
            b, a = stack.pop(), stack.pop()
            stack.append(_BINARY[op](a, b) & MASK)
        else:
            raise CfiError("DWARF expression op 0x%02x" % op)
    if not stack:
        raise CfiError("empty DWARF expression")
    return stack[-1]


def _signed(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


_BINARY: Dict[int, Callable[[int, int], int]] = {
    0x1A: lambda a, b: a & b,
    0x1C: lambda a, b: a - b,
    0x1E: lambda a, b: a * b,
    0x21: lambda a, b: a | b,
    0x22: lambda a, b: a + b,
    0x24: lambda a, b: a << b if b < 64 else 0,
    0x25: lambda a, b: a >> b,
    0x26: lambda a, b: _signed(a) >> b,
    0x27: lambda a, b: a ^ b,
    0x29: lambda a, b: int(a == b),
    0x2A: lambda a, b: int(_signed(a) >= _signed(b)),
    0x2B: lambda a, b: int(_signed(a) > _signed(b)),
    0x2C: lambda a, b: int(_signed(a) <= _signed(b)),
    0x2D: lambda a, b: int(_signed(a) < _signed(b)),
    0x2E: lambda a, b: int(a != b),
}
