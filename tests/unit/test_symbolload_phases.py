"""``SymbolLoader``'s phases, driven by a real session's library events (``transcripts/phases.json``).

probe.c caught at its exec under a real gdb with ``--break probe_hit``: gdb
stops at its library loads, the loader settles once libc is in, releases
(the breakpoint pinned to its address), and at the hit gets gdb ready to
unwind again.  The replay drives the loader the same way and must send gdb
exactly what it sent then.
"""

import io
import itertools
import os

import pytest

from tfnative.gdb.symbols import TRANSITIONS, Phase, SymbolLoader

from . import mireplay
from .transcripts import scenarios

NO_PID = (1 << 22) + 1  # above any pid_max: no /proc/PID here, so no mapping is seen at the replay
E, S, T, R, IDLE = Phase.EXEC, Phase.SETTLED, Phase.STARTED, Phase.RELEASED, Phase.IDLE


@pytest.fixture(scope="module")
def session():
    t = mireplay.load("phases")
    libraries = {r["payload"]["target-name"] for r in mireplay.events(t, "library-loaded")}
    missing = sorted(p for p in libraries if not os.path.exists(p))
    if missing:  # the loader reads the libraries' files: their sizes decide what gdb is asked to load
        pytest.skip("the recorded session's libraries are not on this machine: %s" % ", ".join(missing))
    gdb = mireplay.ReplayGdb(t)
    loader, bps, kinds = scenarios.phases(gdb, NO_PID, io.StringIO())
    gdb.finished()
    return t, gdb, loader, bps, kinds


def test_the_loader_goes_through_every_phase_in_order(session):
    _, _, loader, _, kinds = session
    assert kinds == ["library", "library", "breakpoint", "exit"]
    assert loader.log == [(IDLE, E), (E, T), (T, S), (S, R), (R, S)]
    assert loader.phase is S and loader.listed and not loader.eager


def test_gdb_stops_at_loads_exactly_while_breakpoints_resolve(session):
    _, gdb, _, _, _ = session
    on, off = ('-interpreter-exec console "set stop-on-solib-events %d"' % i for i in (1, 0))
    assert gdb.sent.count(on) == gdb.sent.count(off) == 1
    continues = [i for i, c in enumerate(gdb.sent) if c == "-exec-continue"]
    # on before the program runs; off at the second library event (libc in), not at the first (none added)
    assert gdb.sent.index(on) < continues[0] and continues[1] < gdb.sent.index(off) < continues[2]


def test_release_pins_the_breakpoint_where_gdb_had_resolved_it(session):
    t, gdb, _, bps, _ = session
    lo, hi = t["facts"]["functions"][scenarios.PROBE_BREAK]
    loc = bps.locations[scenarios.PROBE_BREAK]
    (address,) = {a for a in bps.traps}
    assert lo <= address < hi
    assert gdb.sent[gdb.sent.index("-break-delete 2") + 1:][:3] == [
        '-interpreter-exec console "nosharedlibrary"', '-interpreter-exec console "set osabi none"',
        "-break-insert -f *0x%x" % address]
    assert (loc.numbers, loc.resolved, loc.hits) == (["3"], True, 1)  # the hit counted on the pinned number


def test_a_full_sync_gives_gdb_its_abi_and_libraries_back(session):
    _, gdb, _, _, _ = session
    after = gdb.sent[gdb.sent.index('-interpreter-exec console "set osabi auto"'):]
    assert after[1] == "-file-list-shared-libraries"
    assert after[2].startswith('-interpreter-exec console "sharedlibrary ') and "libc" in after[2]


def test_only_the_transitions_of_the_table_are_made():
    gdb = mireplay.ReplayGdb({"steps": []})  # the loader may send gdb nothing here
    for a, b in itertools.product(Phase, Phase):
        loader = SymbolLoader(gdb, NO_PID, [], True, io.StringIO())  # --full-symbols: no gdb command
        loader.phase = a
        if a is b or (a, b) in TRANSITIONS:
            loader._enter(b)
            assert loader.phase is b
        else:
            with pytest.raises(RuntimeError, match="no transition from %s to %s" % (a.name, b.name)):
                loader._enter(b)
            assert loader.phase is a
    assert (IDLE, R) not in TRANSITIONS and (E, R) not in TRANSITIONS and (R, T) not in TRANSITIONS


def test_full_symbols_settle_at_once_and_send_gdb_nothing():
    gdb = mireplay.ReplayGdb({"steps": []})
    loader = SymbolLoader(gdb, NO_PID, [scenarios.PROBE_BREAK], True, io.StringIO())
    loader.after_exec()
    assert loader.phase is S
    loader.sync()
    loader.settle()
    assert loader.phase is S and gdb.sent == []
