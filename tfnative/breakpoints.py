"""The user's breakpoint locations and what became of them.

One ``--break LOCATION`` may end up as several gdb breakpoints: the pending
one gdb resolves by name in libraries whose symbols it reads, and address
breakpoints that ``symbolload`` sets itself in libraries it gives gdb only a
surrogate for.  This table maps gdb's numbers back to the user's location and
says, at the end, which locations never resolved or never fired.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, TextIO

from .gdbmi import Gdb, GdbDied, GdbError, mi_quote


@dataclass
class Location:
    text: str
    numbers: List[str] = field(default_factory=list)
    resolved: bool = False
    hits: int = 0
    error: Optional[str] = None


class Breakpoints:
    def __init__(self) -> None:
        self.locations: Dict[str, Location] = {}
        self._by_number: Dict[str, Location] = {}

    def arm(self, gdb: Gdb, locations: List[str], err: TextIO, timeout: float) -> None:
        """A pending (``-f``) gdb breakpoint for each location."""
        for text in locations:
            loc = self.locations.setdefault(text, Location(text))
            try:
                res = gdb.command("-break-insert -f %s" % mi_quote(text), timeout=timeout)
            except GdbError as exc:
                err.write("tfnative: warning: cannot set breakpoint %s: %s\n" % (text, exc))
                loc.error = str(exc)
                continue
            bp = res.get("bkpt") or {}
            self._add(loc, str(bp.get("number")))
            self.note(bp)

    def add_address(self, gdb: Gdb, text: str, address: int) -> None:
        """A breakpoint at an address we resolved ourselves for ``text``."""
        loc = self.locations.get(text)
        if loc is None:
            return
        res = gdb.command("-break-insert *0x%x" % address, timeout=60)
        self._add(loc, str((res.get("bkpt") or {}).get("number")))
        loc.resolved = True

    def _add(self, loc: Location, number: str) -> None:
        loc.numbers.append(number)
        self._by_number[number] = loc

    def note(self, bp: Dict[str, Any]) -> None:
        """A ``bkpt`` tuple (from -break-insert, -break-list or =breakpoint-modified)."""
        loc = self._by_number.get(str(bp.get("number", "")).split(".")[0])
        if loc is None:
            return
        addr = bp.get("addr", "")
        if (addr and addr != "<PENDING>" and not bp.get("pending")) or bp.get("locations"):
            loc.resolved = True

    def hit(self, number: Any) -> Optional[Location]:
        loc = self._by_number.get(str(number))
        if loc is not None:
            loc.hits += 1
            loc.resolved = True
        return loc

    def all_resolved(self) -> bool:
        return all(loc.resolved for loc in self.locations.values())

    def refresh(self, gdb: Gdb) -> None:
        try:
            table = gdb.command("-break-list", timeout=30).get("BreakpointTable", {})
        except (GdbError, GdbDied):
            return
        for bp in table.get("body", []):
            self.note(bp)

    def delete_all(self, gdb: Gdb) -> None:
        self.refresh(gdb)
        gdb.command("-break-delete")
        self._by_number.clear()

    def unresolved(self) -> List[str]:
        return [loc.text for loc in self.locations.values() if not loc.resolved]

    def summary(self) -> List[str]:
        out = []
        for loc in self.locations.values():
            if not loc.resolved:
                out.append("breakpoint %s never resolved: no loaded code matched it" % loc.text)
            elif loc.hits == 0:
                out.append("breakpoint %s resolved but never fired" % loc.text)
        return out
