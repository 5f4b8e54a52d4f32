"""The line-table reader against CPython's own ``co_lines()``, on generated functions, for every interpreter.

Functions are generated as source text (loops, branches, calls spread over lines, comprehensions,
lambdas, nested functions, lines of hundreds of instructions, columns past 127 and 4096, gaps of up to
2^16 blank lines) and compiled; every instruction's line read by ``line_for`` from the code object's table
must be the one ``co_lines()`` gives.  The running interpreter's tables come from Hypothesis' examples; the
other interpreters (pyenv's CPython 3.10-3.13, 3.10's PEP 626 pairs among them) compile a fixed set of the
same functions in one subprocess each (with ``-X no_debug_ranges`` as well, for the tables without columns)
and send back their tables and ``co_lines()`` as JSON.
"""

from __future__ import annotations

import functools
import json
import random
import subprocess
import sys
from typing import Any, Dict, List, Sequence, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfnative.core.python.linetable import line_310, line_311, line_for

from ..utils import pyenv_pythons

Plan = Sequence[Tuple[str, int, int]]  # (kind of statement, blank lines before and inside it, width)

GAPS = (0, 1, 2, 3, 31, 32, 63, 64, 127, 128, 255, 256, 2047, 2048, 4096, 65535, 65536)
WIDTHS = (1, 70, 130, 5000)
STATEMENTS = {
    "assign": "    x{i} = a + {i}",
    "long": "    y{i} = " + " + ".join(["a"] * 70),  # hundreds of bytes of code on one line
    "call": "    z{i} = g(a,{gap}        b)",  # the call's line is above its last argument's
    "for": "    for v in range(a):{gap}        x{i} = v",
    "while": "    while a > {i}:{gap}        a -= 1",
    "if": "    if a:\n        b = {i}{gap}    else:\n        b = -{i}",
    "try": "    try:\n        a = a / b{gap}    except ZeroDivisionError:\n        a = 0\n    finally:\n        b = 2",
    "comp": "    c{i} = [v * a for v in range(b){gap}         if v]",
    "lambda": "    h{i} = lambda q: (q +{gap}        {i})",
    "def": "    def inner{i}():{gap}        return a + {i}",
    "with": "    with g() as m:{gap}        m.x = {i}",
    "wide": "    w{i} = ({pad}a)",  # a column past 127 (and past 4096): the long form's column varints
}
KINDS = tuple(sorted(STATEMENTS))


def source(plan: Plan, lead: int = 0) -> str:
    """A function ``f`` made of ``plan``'s statements, ``lead`` blank lines above it."""
    lines = ["\n" * lead + "def f(a, b=1):"]
    for i, (kind, gap, width) in enumerate(plan):
        text = STATEMENTS[kind].format(i=i, gap="\n" * (gap + 1), pad=" " * width)
        lines.append("\n" * gap + text)
    lines.append("    return a")
    return "\n".join(lines) + "\n"


def mismatches(version: Tuple[int, int], table: bytes, first: int, size: int,
               lines: List[Tuple[int, int, Any]]) -> List[str]:
    """Where ``line_for`` disagrees with ``co_lines()`` (at both ends of each of its ranges: one line-table entry
    or several; of at most 60 ranges spread over a long table, each read walks the table from its start),
    past the end, and before the start."""
    bad = []
    step = len(lines) // 60 + 1
    for start, end, line in lines[::step] + lines[-1:]:
        for addr in {start, end - 2} if end > start else ():
            got = line_for(version, table, first, addr)
            if got != line:
                bad.append("offset %d: %r, co_lines() says %r" % (addr, got, line))
    for addr, want in ((size, None), (size + 64, None), (-2, first)):
        got = line_for(version, table, first, addr)
        if got != want:
            bad.append("offset %d: %r, expected %r" % (addr, got, want))
    return bad


def code_objects(code: Any) -> List[Any]:
    todo, out = [code], []
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(k for k in c.co_consts if hasattr(k, "co_lines"))
    return out


plans = st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from(GAPS[:12]) | st.sampled_from(GAPS),
                           st.sampled_from(WIDTHS)), min_size=0, max_size=12)


@settings(max_examples=60, deadline=None)
@given(plans, st.sampled_from((0, 1, 200)))
def test_line_for_is_co_lines_of_this_interpreter(plan, lead):
    version = sys.version_info[:2]
    for code in code_objects(compile(source(plan, lead), "/gen/f.py", "exec")):
        bad = mismatches(version, code.co_linetable, code.co_firstlineno, len(code.co_code), list(code.co_lines()))
        assert not bad, (code.co_name, bad[:5])


# --- the other interpreters: one subprocess each, for a fixed set of generated functions -------------------

DUMP = r"""
import json, sys
out = []
for src in json.load(sys.stdin):
    todo = [compile(src, "/gen/f.py", "exec")]
    while todo:
        code = todo.pop()
        todo.extend(k for k in code.co_consts if hasattr(k, "co_lines"))
        out.append({"name": code.co_name, "table": code.co_linetable.hex(), "first": code.co_firstlineno,
                    "size": len(code.co_code), "lines": [list(t) for t in code.co_lines()]})
json.dump({"version": list(sys.version_info[:2]), "codes": out}, sys.stdout)
"""


def fixed_sources() -> List[str]:
    """Every kind of statement, every gap (three statements each), then seeded random functions (the same every
    run; big gaps rare: the tables of 3.10 grow with the gaps, and the check with the tables)."""
    rng = random.Random(20261126)
    out = [source([(kind, 1, width) for kind in KINDS for width in WIDTHS], lead=1)]
    for g, gap in enumerate(GAPS):
        out.append(source([(KINDS[(g + j) % len(KINDS)], gap, WIDTHS[(g + j) % len(WIDTHS)]) for j in range(3)],
                          lead=g % 3))
    for _ in range(16):
        out.append(source([(rng.choice(KINDS), rng.choice(GAPS if rng.random() < 0.1 else GAPS[:12]),
                            rng.choice(WIDTHS)) for _ in range(rng.randrange(0, 12))], lead=rng.choice((0, 1, 200))))
    return out


@functools.cache
def dumped(python: str, no_ranges: bool) -> Dict[str, Any]:
    """What ``python`` compiles ``fixed_sources()`` to (cached: one subprocess per interpreter and mode)."""
    args = [python, "-I"] + (["-X", "no_debug_ranges"] if no_ranges else []) + ["-c", DUMP]
    out = subprocess.run(args, input=json.dumps(fixed_sources()), stdout=subprocess.PIPE, text=True, check=True,
                         timeout=120)
    result: Dict[str, Any] = json.loads(out.stdout)
    return result


INTERPRETERS = [(v, p) for v, p in sorted(pyenv_pythons().items())]
MODES = [(v, p, nr) for v, p in INTERPRETERS for nr in (False, True) if not nr or v != "3.10"]


@pytest.mark.skipif(not INTERPRETERS, reason="no pyenv CPython 3.10-3.13 on this machine")
@pytest.mark.parametrize("version,python,no_ranges", MODES,
                         ids=["%s%s" % (v, "-no-ranges" if nr else "") for v, _, nr in MODES])
def test_line_for_is_co_lines_of_each_interpreter(version, python, no_ranges):
    got = dumped(python, no_ranges)
    assert "%d.%d" % tuple(got["version"]) == version
    for code in got["codes"]:
        bad = mismatches(tuple(got["version"]), bytes.fromhex(code["table"]), code["first"], code["size"],
                         [tuple(t) for t in code["lines"]])
        assert not bad, (code["name"], bad[:5])


# --- hand-made tables: each entry form alone -----------------------------------------------------------------

def test_310_pairs_no_line_and_long_jumps():
    """3.10's pairs: (bytes, signed line delta); -128 is "no line"; a jump past 127 lines is several pairs of
    zero bytes; a run past 254 bytes is several pairs of zero lines."""
    table = bytes([6, 1, 4, 0x80, 0, 127, 2, 3, 0, 0x81, 8, 0xFF, 254, 0, 2, 0])
    want = {0: 11, 4: 11, 6: None, 8: None, 10: 141, 12: 13, 18: 13, 20: 13, 272: 13, 274: 13, 276: None}
    for addr, line in want.items():
        assert line_310(table, 10, addr) == line, addr
        assert line_for((3, 10), table, 10, addr) == line, addr
    assert line_310(table, 10, -1) == 10
    assert line_310(table + b"\x07", 10, 276) is None  # an odd byte at the end is no entry


def _entry(code: int, units: int) -> int:
    return 0x80 | code << 3 | (units - 1)


def _sv(n: int) -> bytes:
    """A signed varint of the location table (sign in the lowest bit, 6 bits a byte, bit 6 "more")."""
    return _uv((-n << 1) | 1 if n < 0 else n << 1)


def _uv(n: int) -> bytes:
    out = bytearray()
    while n >= 64:
        out.append(64 | n & 63)
        n >>= 6
    out.append(n)
    return bytes(out)


def test_311_each_entry_form():
    """3.11+: short form (0-9, same line), one-line forms (10-12: the line moves 0-2), no-column form (13),
    long form (14: line delta, end line, columns as varints), no location (15); lengths of 1 to 8 units."""
    table = (bytes([_entry(0, 1), 0x05])  # short: unit 0, line 20
             + bytes([_entry(12, 2), 4, 9])  # one-line +2: units 1-2, line 22
             + bytes([_entry(13, 8)]) + _sv(-70000)  # no column, a jump down of 70000: units 3-10
             + bytes([_entry(15, 3)])  # no location: units 11-13
             + bytes([_entry(14, 1)]) + _sv(70033) + _uv(5) + _uv(4097) + _uv(5000)  # long form: unit 14
             + bytes([_entry(10, 1), 1, 2])  # one-line +0: unit 15
             + bytes([_entry(11, 4), 3, 7])  # one-line +1: units 16-19
             + bytes([_entry(9, 2), 0x33]))  # short form, code 9: units 20-21
    want = [20, 22, 22] + [22 - 70000] * 8 + [None] * 3 + [55, 55] + [56] * 4 + [56, 56]
    for unit, line in enumerate(want):
        assert line_311(table, 20, 2 * unit) == line, unit
        assert line_311(table, 20, 2 * unit + 1) == line, unit  # an odd byte offset is in its unit
        assert line_for((3, 12), table, 20, 2 * unit) == line
    assert line_311(table, 20, 2 * len(want)) is None
    assert line_311(table, 20, -2) == 20 and line_311(table, 20, -1) == 20
    assert line_311(b"", 20, 0) is None and line_310(b"", 20, 0) is None


def test_311_varints_of_every_length():
    for delta in (0, 1, -1, 31, 32, -32, 2047, 2048, -2048, 65535, 65536, -65536, 1 << 20):
        table = bytes([_entry(13, 1)]) + _sv(delta) + bytes([_entry(13, 1)]) + _sv(1)
        assert line_311(table, 1 << 21, 0) == (1 << 21) + delta, delta
        assert line_311(table, 1 << 21, 2) == (1 << 21) + delta + 1, delta


def test_a_torn_table_gives_a_line_or_none_never_an_error():
    """A table read from a process that runs on may be torn (its code object freed and its memory reused while
    it was read, as a job's ranks start): a varint cut by the table's end, or any bytes at all, give a line or
    None, never an error past the table.  An IndexError there once ended a watch as a 3-rank job started: the
    ranks of a starting 3-rank MWMS job, read the ``--no-pause`` way nonstop for 45 s, gave 2 in 1441 reads, both
    in ``_varint``."""
    cut = bytes([_entry(14, 1)]) + _sv(70033)[:1]  # the long form's line delta cut after its first byte
    assert cut[-1] & 64 and line_311(cut, 20, 0) is None
    assert line_311(bytes([_entry(13, 1), 0x41]), 20, 0) is None and line_311(bytes([_entry(11, 1)]), 20, 0) is None
    assert line_311(bytes([_entry(11, 1), 3, 7]) + bytes([_entry(13, 1), 0x41]), 20, 0) == 21  # before the cut
    table = bytes([_entry(14, 1)]) + _sv(70033) + _uv(5) + _uv(4097) + _uv(5000) + bytes([_entry(13, 2)]) + _sv(-3)
    for end in range(len(table) + 1):  # every prefix of a table
        for unit in range(4):
            line_311(table[:end], 20, 2 * unit)
    rng = random.Random(44)
    for _ in range(2000):  # any bytes at all
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 24)))
        for addr in (0, 2, 17, 40):
            line = line_311(junk, 20, addr)
            assert line is None or isinstance(line, int)
            line_310(junk, 20, addr)
