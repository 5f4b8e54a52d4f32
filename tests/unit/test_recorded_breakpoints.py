"""``Breakpoints`` on gdb's real ``-break-insert`` and ``-break-list`` answers (``transcripts/breakpoints.json``).

overloads.cpp caught at its exec under a real gdb: ``overloaded`` (two C++
overloads: one gdb breakpoint, two locations), ``main``, a pending location,
then the table pinned, its library unloaded and loaded again.  The addresses
are checked against the functions' ranges from ``nm`` and the process's
mappings from ``/proc``, recorded beside gdb's answers.
"""

import io

import pytest

from tfnative.gdb.breakpoints import library_starts

from . import mireplay
from .transcripts import scenarios


@pytest.fixture(scope="module")
def recorded():
    t = mireplay.load("breakpoints")
    gdb = mireplay.ReplayGdb(t)
    err = io.StringIO()
    seen = scenarios.breakpoint_table(gdb, [tuple(r) for r in t["facts"]["code"]], err)
    gdb.finished()
    return t["facts"], seen, gdb, err.getvalue()


def inside(facts, name, address):
    lo, hi = facts["functions"][name]
    return lo <= address < hi


def test_overloads_are_one_breakpoint_with_a_location_in_each(recorded):
    facts, seen, _, _ = recorded
    assert seen["armed"] == {"overloaded": ["2"], "main": ["3"]}
    over = [a for text, a in seen["addresses"] if text == "overloaded"]
    assert len(over) == 2
    assert inside(facts, "overloaded(int)", over[0]) and inside(facts, "overloaded(double)", over[1])
    (main,) = [a for text, a in seen["addresses"] if text == "main"]
    assert inside(facts, "main", main)
    assert seen["traps"] == sorted(over + [main])  # every location's address, for traps.py


def test_a_pending_location_has_a_number_no_address_and_blocks_pinning(recorded):
    _, seen, _, _ = recorded
    assert seen["pending"] == (["4"], False)
    assert seen["addresses_with_pending"] is None
    assert seen["unresolved"] == [scenarios.PENDING_BREAK]


def test_pinning_makes_one_address_breakpoint_per_location_in_its_library_load(recorded):
    facts, seen, gdb, _ = recorded
    exe = facts["code"][0][2]
    start = library_starts([tuple(r) for r in facts["code"]])[exe]
    assert "-break-delete 2 3 4" in gdb.sent  # gdb's own breakpoints go first
    assert seen["pinned_numbers"] == {str(5 + i): a for i, (_, a) in enumerate(seen["addresses"])}
    assert seen["pinned"] == {n: (exe, start) for n in ("5", "6", "7")}


def test_unloaded_deletes_the_library_s_breakpoints_and_loaded_arms_again(recorded):
    facts, seen, gdb, err = recorded
    exe = facts["code"][0][2]
    assert "-break-delete 5 6 7" in gdb.sent
    assert seen["after_unload"] == {"overloaded": [], "main": [], scenarios.PENDING_BREAK: []}
    assert seen["after_load"] == {"overloaded": [], "main": ["8"], scenarios.PENDING_BREAK: []}
    start = library_starts([tuple(r) for r in facts["code"]])[exe]
    assert seen["pinned_after_load"] == {"8": (exe, start)}
    assert err == ""
