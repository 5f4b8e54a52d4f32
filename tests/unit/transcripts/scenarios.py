"""What the recorded sessions do: run by ``record.py`` over a real gdb, by the tests over ``ReplayGdb``.

Each scenario drives tfnative's own code (``Breakpoints``, ``SymbolLoader``,
``session.stop_kind``) as the attach session does, against whatever
answers as gdb; given the same answers it sends the same commands, so the
replay checks that the code still does what it did with the real gdb.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TextIO, Tuple

from tfnative.attach.session import stop_kind
from tfnative.attach.tfenv import NUMERICS_SIGNAL_NAME
from tfnative.gdb.breakpoints import Breakpoints, CodeRows, library_starts
from tfnative.gdb.control import setup_signals
from tfnative.gdb.ops import OpBreaks
from tfnative.gdb.symbols import QUIET_S, WATCH_S, Phase, SymbolLoader

PROBE_BREAK = "probe_hit"  # the function of probe.c every run calls first
OVERLOADS_BREAKS = ["overloaded", "main"]  # overloads.cpp: two overloads, one plain function
PENDING_BREAK = "no_such_function"  # in no file: stays pending
STOP_LIMIT = 50  # a session that stops more often is not the recorded one


class PhaseLog(SymbolLoader):
    """A SymbolLoader that remembers each phase change it made, as (from, to)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.log: List[Tuple[Phase, Phase]] = []
        super().__init__(*args, **kw)

    def _enter(self, phase: Phase) -> None:
        before = self.phase
        super()._enter(phase)
        if self.phase is not before:
            self.log.append((before, self.phase))


def stops(gdb: Any, err: TextIO) -> List[Dict[str, Any]]:
    """probe.c from its exec to its end, as a session sets it up: every ``*stopped`` payload, in order.

    Fatal signals and the numerics signal stop (``setup_signals``), SIGCHLD
    stops (as for a launched script without the proc connector), gdb stops at
    every library event, and a breakpoint is set at ``probe_hit``.
    """
    setup_signals(gdb, [NUMERICS_SIGNAL_NAME])
    gdb.console_command("handle SIGCHLD stop print pass")
    gdb.console_command("set stop-on-solib-events 1")
    Breakpoints().arm(gdb, [PROBE_BREAK], err, 60)
    out: List[Dict[str, Any]] = []
    while len(out) < STOP_LIMIT:
        gdb.command("-exec-continue")
        payload = gdb.wait_event("stopped", 60)
        if payload is None:
            raise AssertionError("probe did not stop within 60 s")
        out.append(payload)
        if payload.get("reason", "").startswith("exited"):
            return out
    raise AssertionError("probe stopped more than %d times" % STOP_LIMIT)


def phases(gdb: Any, pid: int, err: TextIO) -> Tuple[PhaseLog, Breakpoints, List[str]]:
    """probe.c from its exec to its end with ``--break probe_hit``, as ``session.Session`` runs it.

    The loader starts at the exec; library events are synced and settle the
    loader once every breakpoint resolved; at the hit gdb is made ready to
    unwind (a full sync, as a capture through gdb does).  Returns the loader,
    the breakpoints and the kind of each stop (``stop_kind``).
    """
    bps = Breakpoints()
    opbreaks = OpBreaks([], bps)
    bps.arm(gdb, [PROBE_BREAK], err, 60)
    loader = PhaseLog(gdb, pid, [PROBE_BREAK], False, err, bps)
    loader.after_exec()
    loader.sync()
    if bps.all_resolved():
        loader.settle()
    kinds: List[str] = []
    gdb.command("-exec-continue")
    running = True
    while len(kinds) < STOP_LIMIT:
        wait: Optional[float] = QUIET_S if loader.pending else WATCH_S if loader.released else 60.0
        rec = gdb.next_event(wait if running else 60.0)
        if running:
            loader.watch(due_only=True)
        if rec is None:
            loader.quiet_sync()
            continue
        message, payload = rec.get("message"), rec.get("payload") or {}
        if message in ("breakpoint-modified", "breakpoint-created"):
            bps.note(payload.get("bkpt") or {})
        elif message == "library-loaded":
            loader.note_library(payload)
        elif message == "stopped":
            running = False
            kinds.append(stop_kind(payload, opbreaks))
            if kinds[-1] == "exit":
                return loader, bps, kinds
            if kinds[-1] == "library":
                loader.sync()
                if bps.all_resolved():
                    loader.settle()
            elif kinds[-1] == "breakpoint":
                bps.hit(payload.get("bkptno"))
                loader.sync(full_list=True)
            loader.watch()
            gdb.command("-exec-continue")
            running = True
    raise AssertionError("probe stopped more than %d times" % STOP_LIMIT)


def breakpoint_table(gdb: Any, code: CodeRows, err: TextIO) -> Dict[str, Any]:
    """overloads.cpp stopped at its exec: its breakpoints armed, listed, pinned, unloaded and loaded again.

    ``code``: the process's executable file mappings at that stop.  Returns
    what the table said at each step, for the test to check.
    """
    seen: Dict[str, Any] = {}
    bps = Breakpoints()
    bps.arm(gdb, OVERLOADS_BREAKS, err, 60)
    seen["armed"] = {text: list(bps.locations[text].numbers) for text in OVERLOADS_BREAKS}
    seen["traps"] = sorted(bps.traps)
    addresses = bps.addresses(gdb)
    seen["addresses"] = addresses
    bps.arm(gdb, [PENDING_BREAK], err, 60)
    seen["pending"] = (list(bps.locations[PENDING_BREAK].numbers), bps.locations[PENDING_BREAK].resolved)
    seen["addresses_with_pending"] = bps.addresses(gdb)  # a location with no address: nothing can be pinned
    assert addresses is not None
    bps.delete(gdb)
    seen["pinned_numbers"] = bps.pin(gdb, addresses, code)
    seen["pinned"] = dict(bps.pinned)
    exe = code[0][2]  # the program: mapped below the loader
    bps.unloaded(gdb, {(exe, library_starts(code)[exe])})
    seen["after_unload"] = {text: list(loc.numbers) for text, loc in bps.locations.items()}
    main = [a for text, a in addresses if text == "main"]
    bps.loaded(gdb, [("main", main[0])], code, err, exe)
    seen["after_load"] = {text: list(loc.numbers) for text, loc in bps.locations.items()}
    seen["pinned_after_load"] = dict(bps.pinned)
    seen["unresolved"] = bps.unresolved()
    return seen
