"""The user's breakpoint locations and what became of them.

One ``--break LOCATION`` may end up as several gdb breakpoints: the pending
one gdb resolves by name in libraries whose symbols it reads, and address
breakpoints that ``gdb/symbols.py`` sets itself in libraries it gives gdb only a
surrogate for.  This table maps gdb's numbers back to the user's location and
says, at the end, which locations never resolved or never fired.

``--break-op TYPE`` adds an *op location* (``op TYPE``, what the user sees)
and *dispatch locations* (internal: the device's Compute, see
``gdb/ops.py``); their gdb breakpoints are made by ``tfnative_gdb.opbreak``
and stop only for the op types asked for.

Once gdb no longer follows the target's library loads (``gdb/symbols.py``'s
RELEASED phase), the breakpoints are *pinned*: address breakpoints, each
remembered with the library load it is in (``pin``).  ``gdb/symbols.py`` says
which libraries came and went; ``loaded`` arms the functions a new one
defines and ``unloaded`` deletes the breakpoints of one that went.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, TextIO, Tuple

from ..errors import GdbDied, GdbError, TfnativeError, shown
from .mi import Gdb, mi_quote

CodeRows = List[Tuple[int, int, str]]  # (start, end, path) of a process's executable file mappings
LibraryLoad = Tuple[str, int]  # (path, start of its first executable mapping): one load of a library


def library_starts(code: CodeRows) -> Dict[str, int]:
    """path -> start of its first executable mapping: which load of a library this is."""
    out: Dict[str, int] = {}
    for lo, _hi, name in code:
        out.setdefault(name, lo)
    return out


CXA_THROW = "__cxa_throw"
# The type every C++ throw that only carries a Python exception has (pybind11's): TensorFlow's import throws and
# catches some; --break-throw without a type passes over them.
PYBIND_ERROR = "N8pybind1117error_already_setE"
_CLASS_RE = re.compile(r"^(::)?[A-Za-z_]\w*(::[A-Za-z_]\w*)*$")


def mangled_type(name: str) -> str:
    """The Itanium ABI's mangled name of a class (``std::out_of_range`` -> ``St12out_of_range``,
    ``my::Error`` -> ``N2my5ErrorE``), as its ``type_info`` spells it; ``TfnativeError`` for anything but a
    (qualified) class name."""
    if not _CLASS_RE.match(name):
        raise TfnativeError("--break-throw %s: give a class name such as std::out_of_range (no templates, pointers "
                            "or spaces)" % shown(name))
    parts = name.lstrip(":").split("::")
    prefix = ""
    if parts[0] == "std" and len(parts) > 1:
        prefix, parts = "St", parts[1:]
    body = "".join("%d%s" % (len(p), p) for p in parts)
    if len(parts) == 1:
        return prefix + body
    return "N%s%sE" % (prefix, body)


def throw_condition(type_name: Optional[str]) -> str:
    """gdb's condition at ``__cxa_throw``'s entry (its second argument, ``rsi``, the ``std::type_info``, whose
    name is at +8): the type is ``type_name``; without one, the type is not pybind11's ``error_already_set``."""
    name = "*(char**)($rsi+8)"
    if type_name is None:  # "*": how GCC spells a type_info name compared by address (hidden visibility)
        return '!$_streq(%s, "%s") && !$_streq(%s, "*%s")' % (name, PYBIND_ERROR, name, PYBIND_ERROR)
    mangled = mangled_type(type_name)
    return '$_streq(%s, "%s") || $_streq(%s, "*%s")' % (name, mangled, name, mangled)


@dataclass
class Location:
    text: str
    numbers: List[str] = field(default_factory=list)
    resolved: bool = False
    hits: int = 0
    error: Optional[str] = None
    op_types: Optional[List[str]] = None  # a dispatch location: stops for these op types only
    internal: bool = False
    op: bool = False  # an op location (``--break-op``): resolves with the dispatch locations
    addressed: bool = False  # tfnative set an address breakpoint for it (the function's real entry)
    spec: Optional[str] = None  # what gdb is given, where it is not the text (``--break-throw``: __cxa_throw)
    condition: Optional[str] = None  # gdb's condition on it (``--break-throw TYPE``: the type thrown)


class Breakpoints:
    def __init__(self) -> None:
        self.locations: Dict[str, Location] = {}
        self._by_number: Dict[str, Location] = {}
        self.retired = False  # deleted for good (--max-hits reached): nothing is armed any more
        self.traps: Set[int] = set()  # every code address gdb was told of for a breakpoint of ours (see traps.py)
        self.pinned: Dict[str, LibraryLoad] = {}  # address breakpoint's gdb number -> the library load it is in

    def arm(self, gdb: Gdb, locations: List[str], err: TextIO, timeout: float) -> None:
        """A pending (``-f``) gdb breakpoint for each location."""
        for text in locations:
            loc = self.locations.setdefault(text, Location(text))
            mark = gdb.said
            try:
                res = gdb.command(self._insert(loc, mi_quote(loc.spec or text)), timeout=timeout)
            except GdbError as exc:
                if self._users(loc):
                    raise TfnativeError("--break %s: gdb cannot set this breakpoint: %s" % (shown(text), exc))
                err.write("tfnative: warning: cannot set breakpoint %s: %s\n" % (shown(text), shown(str(exc))))
                loc.error = str(exc)
                continue
            bp = res.get("bkpt") or {}
            if self._users(loc) and bp.get("pending"):
                # Pending: a function or file no library defines yet, unless gdb said the text is no location
                # at all (``$(touch x)``: a convenience variable, which no library load will ever define).
                said = [ln.strip() for ln in gdb.said_since(mark) if ln.startswith("Undefined convenience")]
                if said:
                    raise TfnativeError("--break %s: not a location gdb can resolve: %s"
                                        % (shown(text), said[-1].rstrip(".")))
            self._add(loc, str(bp.get("number") or res.get("number")))  # -tfnative-break-op: top level
            self.note(bp)
            if res.get("pending") == "0":
                self._resolved(loc)

    def add_address(self, gdb: Gdb, text: str, address: int) -> Optional[str]:
        """A breakpoint at an address we resolved ourselves for ``text``; its gdb number."""
        loc = self.locations.get(text)
        if loc is None or self.retired:
            return None
        self.traps.add(address)
        res = gdb.command(self._insert(loc, "*0x%x" % address), timeout=60)
        number = str((res.get("bkpt") or {}).get("number") or res.get("number"))
        self._add(loc, number)
        self._resolved(loc)
        loc.addressed = True
        return number

    def drop_plt_stubs(self, gdb: Gdb) -> List[str]:
        """Disable the locations gdb put on PLT stubs of functions whose real entry tfnative armed.

        gdb breaks on a library's ``NAME@plt`` stub only while it knows no
        definition of NAME; the definition in a library that only tfnative's
        index knows (``gdb/symbols.py``) leaves gdb with the stub, and a stop
        there shows a frame with no name before the function has run.  gdb
        itself drops the stub once it knows the definition: so do we.
        Returns the gdb numbers disabled.
        """
        if not any(loc.addressed and not loc.op_types for loc in self.locations.values()):
            return []
        table = gdb.command("-break-list", timeout=30).get("BreakpointTable", {})
        off: List[str] = []
        for bp in table.get("body", []):
            loc = self._by_number.get(str(bp.get("number", "")))
            if loc is None or not loc.addressed or loc.op_types:
                continue
            for sub in bp.get("locations") or [bp]:
                where = "%s %s" % (sub.get("func", ""), sub.get("at", ""))
                if "@plt" in where and sub.get("enabled") != "n" and sub.get("number"):
                    off.append(str(sub["number"]))
        if off:
            gdb.command("-break-disable " + " ".join(off), timeout=30)
        return off

    @staticmethod
    def _users(loc: Location) -> bool:
        """A location the user gave with ``--break`` (not an op's dispatch point)."""
        return not loc.internal and not loc.op_types and not loc.op

    @staticmethod
    def _insert(loc: Location, spec: str) -> str:
        """The MI command for a breakpoint at ``spec`` (an MI c-string).  A location beginning with ``-`` comes
        after ``--``, which ends the options: a location, never one of ``-break-insert``'s options."""
        if loc.op_types:
            return "-tfnative-break-op %s %s" % (spec, " ".join(mi_quote(t) for t in loc.op_types))
        condition = "-c %s " % mi_quote(loc.condition) if loc.condition else ""
        return "-break-insert -f %s%s%s" % (condition, "-- " if spec.startswith('"-') else "", spec)

    def add_throw(self, type_name: Optional[str]) -> str:
        """The location of ``--break-throw [TYPE]`` (its text, ``throw TYPE``): ``__cxa_throw``, on the condition
        that the type thrown is TYPE (its mangled name, ``throw_condition``)."""
        text = "throw %s" % type_name if type_name else "throw"
        self.locations.setdefault(text, Location(text, spec=CXA_THROW, condition=throw_condition(type_name)))
        return text

    def add_op(self, text: str, internal: bool = False, op_types: Optional[List[str]] = None) -> Location:
        """A location for ``--break-op``: the op location (``op TYPE``) or an internal dispatch location."""
        return self.locations.setdefault(text, Location(text, internal=internal, op_types=op_types,
                                                        op=not internal))

    def add_number(self, text: str, number: str) -> None:
        """Map a gdb breakpoint made elsewhere (an op's kernel) to the location ``text``."""
        loc = self.locations.get(text)
        if loc is not None:
            self._add(loc, number)
            loc.resolved = True

    def _resolved(self, loc: Location) -> None:
        loc.resolved = True
        if loc.internal:  # a dispatch point is in: every op location can fire
            for other in self.locations.values():
                if other.op:
                    other.resolved = True

    def addresses(self, gdb: Gdb) -> Optional[List[Tuple[str, int]]]:
        """(location, address) for every code address gdb's breakpoints are set at now.

        A gdb breakpoint still pending whose location resolved elsewhere (the
        name breakpoint of a function ``gdb/symbols.py`` set an address breakpoint
        for) has nothing to pin.  None when a location has no address at all,
        or is not a plain breakpoint of ours (an op breakpoint decides in gdb
        whether to stop): those cannot be pinned.
        """
        if any(loc.op or loc.op_types for loc in self.locations.values()):
            return None
        table = gdb.command("-break-list", timeout=30).get("BreakpointTable", {})
        out: List[Tuple[str, int]] = []
        for bp in table.get("body", []):
            loc = self._by_number.get(str(bp.get("number", "")))
            if loc is None:
                continue
            if bp.get("enabled") == "n":
                continue
            subs = bp.get("locations") or [bp]
            addrs = [sub.get("addr", "") for sub in subs if sub.get("enabled") != "n"]
            out += [(loc.text, int(a, 16)) for a in addrs if a.startswith("0x")]
        pinned = {text for text, _ in out}
        if any(loc.numbers and loc.text not in pinned for loc in self.locations.values()):
            return None
        order = {text: i for i, text in enumerate(self.locations)}
        return sorted(set(out), key=lambda pair: (order[pair[0]], pair[1]))

    def pin(self, gdb: Gdb, addresses: List[Tuple[str, int]], code: CodeRows) -> Dict[str, int]:
        """Address breakpoints at ``addresses`` (from ``addresses()``, gdb's deleted meanwhile).

        Each is remembered with the library load of ``code`` (the process's
        executable mappings now) it is in, for ``unloaded``.  Hits counted so
        far stay with their locations.  Returns gdb number -> address.
        """
        out: Dict[str, int] = {}
        for text, address in addresses:
            number = self.add_address(gdb, text, address)
            if number is not None:
                out[number] = address
                self._note_pinned(code, number, address)
        return out

    def arm_addresses(self, gdb: Gdb, found: List[Tuple[str, int]]) -> None:
        """A library came while gdb stops at each load: address breakpoints at ``found``.

        ``found``: (location, address) of each breakpoint function the library
        defines, resolved by ``gdb/symbols.py`` from its index.  gdb's refusal
        raises ``GdbError``.
        """
        for text, address in found:
            self.add_address(gdb, text, address)

    def loaded(self, gdb: Gdb, found: List[Tuple[str, int]], code: CodeRows, err: TextIO, library: str) -> None:
        """After release, a library came: as ``arm_addresses``, each breakpoint pinned to its load.

        A breakpoint gdb refuses is a warning on ``err``: the others stay armed.
        """
        for text, address in found:
            try:
                self._note_pinned(code, self.add_address(gdb, text, address), address)
            except GdbError as exc:
                err.write("tfnative: warning: cannot break at %s in %s: %s\n" % (text, library, exc))

    def unloaded(self, gdb: Gdb, gone: Set[LibraryLoad]) -> None:
        """After release, libraries went: delete the breakpoints pinned in them.

        gdb puts its traps back at every resume: it must not write one where
        the loader may map other code next.
        """
        numbers = [n for n, load in self.pinned.items() if load in gone]
        if numbers:
            self.delete(gdb, numbers)
            for n in numbers:
                del self.pinned[n]

    def forget_libraries(self) -> None:
        """A new process image: no breakpoint is pinned to a library load any more."""
        self.pinned.clear()

    def _note_pinned(self, code: CodeRows, number: Optional[str], address: int) -> None:
        """Remember which library (and which load of it) breakpoint ``number`` is in."""
        if number is None:
            return
        for lo, hi, name in code:
            if lo <= address < hi:
                self.pinned[number] = (name, library_starts(code)[name])
                return

    def delete(self, gdb: Gdb, numbers: Optional[List[str]] = None) -> None:
        """Delete some (default: all) of gdb's breakpoints; their locations stay (resolved, hits)."""
        numbers = [n for n in numbers if n in self._by_number] if numbers is not None else list(self._by_number)
        if not numbers:
            return
        gdb.command("-break-delete " + " ".join(numbers), timeout=30)
        for n in numbers:
            self._by_number.pop(n).numbers.remove(n)

    def location_of(self, number: Any) -> Optional[Location]:
        return self._by_number.get(str(number))

    def _add(self, loc: Location, number: str) -> None:
        loc.numbers.append(number)
        self._by_number[number] = loc

    def note(self, bp: Dict[str, Any]) -> None:
        """A ``bkpt`` tuple (from -break-insert, -break-list or =breakpoint-modified)."""
        loc = self._by_number.get(str(bp.get("number", "")).split(".")[0])
        if loc is None:
            return
        addr = bp.get("addr", "")
        for a in [addr] + [sub.get("addr", "") for sub in bp.get("locations") or []]:
            if a.startswith("0x"):
                self.traps.add(int(a, 16))
        if (addr and addr != "<PENDING>" and not bp.get("pending")) or bp.get("locations"):
            self._resolved(loc)

    def hit(self, number: Any) -> Optional[Location]:
        loc = self._by_number.get(str(number))
        if loc is not None:
            loc.hits += 1
            loc.resolved = True
        return loc

    def recount(self, old: str, new: str) -> None:
        """Move one hit from location ``old`` to ``new`` (one kernel breakpoint serves several op types)."""
        if old in self.locations and new in self.locations:
            self.locations[old].hits -= 1
            self.locations[new].hits += 1

    def all_resolved(self) -> bool:
        return all(loc.resolved for loc in self.locations.values() if not loc.op)

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
        self.retired = True

    def unresolved(self) -> List[str]:
        return [loc.text for loc in self.locations.values() if not loc.resolved and not loc.internal]

    def summary(self) -> List[str]:
        out = []
        for loc in self.locations.values():
            if loc.internal:
                continue
            if not loc.resolved:
                out.append("breakpoint %s never resolved: no loaded code matched it" % loc.text)
            elif loc.hits == 0:
                out.append("breakpoint %s resolved but never fired" % loc.text)
        return out
