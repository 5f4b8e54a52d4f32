"""``session.stop_kind`` on gdb's real ``*stopped`` records (``transcripts/stops-*.json``).

Each transcript is probe.c run from its exec to its end under a real gdb set
up as a session sets it up (``transcripts/record.py``); replaying it drives
the same code again, which must send gdb exactly the recorded commands.
"""

import io

import pytest

from tfnative.attach.session import NUMERICS_SIGNAL_NAME, Session, stop_kind
from tfnative.attach.targets import return_code
from tfnative.gdb.breakpoints import Breakpoints
from tfnative.gdb.ops import DISPATCH_FUNCTIONS, OpBreaks

from . import mireplay
from .transcripts import scenarios

# What the probe does in each run, as the session's handlers see it.
RUNS = {
    "stops-exit": (["library", "library", "breakpoint", "exit"], 0),
    "stops-segv": (["library", "library", "breakpoint", "fatal-signal", "exit"], -11),
    "stops-child": (["library", "library", "breakpoint", "child", "exit"], 3),
    "stops-numerics": (["library", "library", "breakpoint", "numerics", "exit"], 0),
}


def replayed_stops(name):
    gdb = mireplay.ReplayGdb(mireplay.load(name))
    stops = scenarios.stops(gdb, io.StringIO())
    gdb.finished()
    return stops


@pytest.mark.parametrize("name", sorted(RUNS))
def test_stop_kind_of_each_recorded_stop(name):
    kinds, code = RUNS[name]
    stops = replayed_stops(name)
    opbreaks = OpBreaks([], Breakpoints())
    assert [stop_kind(p, opbreaks) for p in stops] == kinds
    assert all(k in Session.STOPS for k in kinds)
    assert return_code(stops[-1]) == code  # the status the session reports for the end


def test_recorded_signals_and_exits_carry_what_the_handlers_read():
    segv = replayed_stops("stops-segv")
    assert (segv[3]["signal-name"], segv[4]["reason"], segv[4]["signal-name"]) == \
        ("SIGSEGV", "exited-signalled", "SIGSEGV")
    child = replayed_stops("stops-child")
    assert (child[3]["signal-name"], child[4]["reason"], child[4]["exit-code"]) == ("SIGCHLD", "exited", "03")
    assert replayed_stops("stops-numerics")[3]["signal-name"] == NUMERICS_SIGNAL_NAME
    assert replayed_stops("stops-exit")[-1] == {"reason": "exited-normally"}


def test_recorded_breakpoint_hit_is_at_the_function():
    t = mireplay.load("stops-exit")
    lo, hi = t["facts"]["functions"]["probe_hit"]
    hit = replayed_stops("stops-exit")[2]
    assert (hit["reason"], hit["bkptno"], hit["frame"]["func"]) == ("breakpoint-hit", "2", "probe_hit")
    assert lo <= int(hit["frame"]["addr"], 16) < hi


def test_a_hit_of_a_dispatch_breakpoint_is_an_op_dispatch():
    """The same real hit, its gdb number mapped to a ``--break-op`` dispatch location: the dispatch handler."""
    hit = replayed_stops("stops-exit")[2]
    bps = Breakpoints()
    opbreaks = OpBreaks(["MatMul"], bps)
    assert stop_kind(hit, opbreaks) == "breakpoint"
    bps.add_number(DISPATCH_FUNCTIONS[0], hit["bkptno"])
    assert stop_kind(hit, opbreaks) == "op-dispatch"


def test_replay_fails_on_a_command_the_session_never_sent():
    gdb = mireplay.ReplayGdb(mireplay.load("stops-exit"))
    with pytest.raises(mireplay.TranscriptMismatch, match="step 0"):
        gdb.console_command("handle SIGSEGV nostop")
    gdb = mireplay.ReplayGdb(mireplay.load("stops-exit"))
    with pytest.raises(mireplay.TranscriptMismatch, match="read an event"):
        gdb.next_event(1.0)
