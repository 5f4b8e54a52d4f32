"""What gdb gets of each library: full symbols, our index only, or a surrogate (the fast path).

Reading the million-odd minimal symbols of ``libtensorflow_cc.so.2`` is
most of what a ``gdb -p`` of a TensorFlow process costs (docs/design.md,
"Fast attach on stock TensorFlow").  We start gdb with ``auto-solib-add off`` and, at
attach and at shared-library events, decide per library:

* small libraries (the interpreter, libc, extension modules, a custom op
  built with debug info...): ``sharedlibrary ^PATH$``, gdb's full symbols,
  where a library may add a location to a breakpoint (its file holds the
  function's name);
* huge ones (``HUGE_BYTES`` and up, without DWARF for their own code, ``wants_surrogate``:
  TensorFlow's): our cached
  index (``symindex.py``) resolves the breakpoints in them to addresses.
  Only when gdb itself must unwind (a capture through gdb) do they get a
  surrogate objfile (``surrogate.py``) with the library's CFI, so gdb's
  unwind through them is exactly as correct; frames gdb cannot name there are
  named afterwards from the index by ``symbolize``.

Once every breakpoint has resolved, gdb stops following the target's library
loads (``release``): at each ``dlopen`` gdb would stop the whole process and
read the loader's list again, which costs TensorFlow's import (~160 loads)
about a second.  The breakpoints are pinned to their addresses, gdb forgets
the libraries (``nosharedlibrary``) and takes the OS ABI "none", which has no
library list to follow.  tfnative watches ``/proc/PID/maps`` meanwhile
(``watch``): it arms, from its index, the breakpoint functions a newly loaded
library defines (what gdb would add a location for), and deletes the
breakpoints of an unloaded one (what gdb would disable).  Should gdb itself
have to unwind, it gets its GNU/Linux ABI and the libraries back first
(``_reacquire``).

Stacks at stops need none of this: tfnative unwinds them itself
(``snapshot/pipeline.py``).  ``--full-symbols`` turns all this off.
"""

from __future__ import annotations

import enum
import json
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set, TextIO, Tuple

from ..core import procfs
from ..core.binary import dwarfcover
from ..core.binary.cxxnames import display_names
from ..core.binary.elf import ElfError
from ..core.binary.loadbase import load_base
from ..core.binary.mapfile import map_file
from ..core.binary.symindex import ElfIndex
from ..core.model import Capture, NativeFrame
from ..core.threads import SIGNAL_FRAME
from ..errors import GdbError
from ..sources.modules import file_root
from .breakpoints import Breakpoints, CodeRows, library_starts
from .mi import Gdb
from .surrogate import build_surrogate, gdb_regex_escape

HUGE_BYTES = 4 * 1024 * 1024
QUIET_S = 0.2  # no library loaded for this long: a burst of dlopen()s is over
WATCH_S = 0.2  # after release: how often tfnative looks for new libraries itself


def wants_surrogate(path: str) -> bool:
    """A big library without DWARF for its code, not the interpreter: its symbols cost gdb more than they give.

    Libraries whose DWARF describes their code, or whose separate debug file
    gdb would find (``dwarfcover.gdb_gives_lines``), keep gdb's full symbols
    (file:line, locals, FILE:LINE breakpoints); so do libpython, whose
    ``_PyRuntime`` and eval-loop symbols the Python frame reader needs from
    gdb, and a library with MiniDebugInfo (``.gnu_debugdata``), whose symbols
    only gdb reads.  A few units of the toolchain's runtime (TensorFlow 2.16
    to 2.20) or a ``.gnu_debuglink`` that names no debug file (``crti.o``) do
    not make a debug build.
    """
    if "libpython" in os.path.basename(path):
        return False
    cov = dwarfcover.cover(path)
    if not cov.elf or cov.debugdata:
        return False
    return not dwarfcover.gdb_gives_lines(path)


@dataclass
class IndexedLibrary:
    path: str
    base: int
    index: ElfIndex
    size: int = 0  # the file's size: its vaddrs span about as much


class Phase(enum.Enum):
    """Where gdb stands with the target's library loads (see ``SymbolLoader``)."""

    IDLE = "idle"  # no process image followed: a loader for one look (``stack``, a core)
    EXEC = "exec"  # exec caught, breakpoints to resolve: gdb stops at each load; the program's libraries not in yet
    STARTED = "started"  # gdb stops at each load; the program's own (DT_NEEDED) libraries are in
    SETTLED = "settled"  # gdb follows loads without stopping; new libraries get symbols in batches
    RELEASED = "released"  # gdb no longer follows loads; tfnative watches /proc/PID/maps


# (from, to) -> what makes it; every phase change goes through ``SymbolLoader._enter``.
TRANSITIONS: Dict[Tuple[Phase, Phase], str] = {
    **{(p, Phase.EXEC): "after_exec: a new image, breakpoints to resolve" for p in Phase},
    **{(p, Phase.SETTLED): "after_exec: a new image, no breakpoint (or --full-symbols)" for p in Phase},
    (Phase.EXEC, Phase.STARTED): "a library event brought libraries, or after_attach",
    (Phase.EXEC, Phase.SETTLED): "settle with no breakpoint location to wait for",
    (Phase.STARTED, Phase.SETTLED): "settle: every breakpoint resolved",
    (Phase.SETTLED, Phase.RELEASED): "release: breakpoints pinned, gdb forgets the libraries",
    (Phase.RELEASED, Phase.SETTLED): "a full sync or reacquire_abi: gdb must unwind or dump",
}


class SymbolLoader:
    """Gives gdb the symbols of the target's libraries, phase by phase (``Phase``).

    ===========  ==========  ===================================================
    from         to          when
    ===========  ==========  ===================================================
    any          EXEC        ``after_exec`` with breakpoints: gdb stops at each
                             library load (``stop-on-solib-events 1``)
    any          SETTLED     ``after_exec`` with no breakpoint, or with
                             ``--full-symbols`` (gdb then follows loads itself)
    EXEC         STARTED     ``sync`` of a library event that brought libraries
                             (the program's DT_NEEDED ones); ``after_attach``
    EXEC         SETTLED     ``settle`` with no breakpoint table to wait for
    STARTED      SETTLED     ``settle``: every breakpoint resolved; gdb stops at
                             loads no more (``stop-on-solib-events 0``)
    SETTLED      RELEASED    ``release``: breakpoints pinned to their addresses
                             (``Breakpoints.pin``), ``nosharedlibrary``,
                             ``set osabi none``
    RELEASED     SETTLED     ``sync(full_list=True)`` or ``reacquire_abi``: gdb
                             must unwind or dump, its GNU/Linux ABI comes back
    ===========  ==========  ===================================================

    ``_enter`` makes every change and refuses any other (a bug: ``RuntimeError``).
    Orthogonal to the phase, ``listed`` says whether gdb's whole library list
    was read since the exec (the first ``sync`` of an image lists it; later
    ones take the ``=library-loaded`` records).  With ``--full-symbols`` the
    loader never leaves SETTLED and sends gdb nothing.

    In RELEASED, ``watch`` says which libraries came and went
    (``/proc/PID/maps``) and ``Breakpoints`` acts: it arms the breakpoint
    functions a new library defines and deletes the breakpoints of one that
    was unloaded.
    """

    def __init__(self, gdb: Gdb, pid: int, breaks: List[str], full_symbols: bool, err: TextIO,
                 breakpoints: Optional[Breakpoints] = None) -> None:
        self.gdb = gdb
        self.pid = pid
        self.breaks = [b for b in breaks if not b.startswith("*") and ":" not in b.replace("::", "")]
        self.full = full_symbols
        self.err = err
        self.breaks_total = len(breaks)
        # The last identifier of each function breakpoint: in a library that
        # defines the function, it is among the file's bytes (plain or mangled).
        # A location with no identifier before its '(' (``(x``, ``$(touch f)``) has none.
        self.tokens = {names[-1].encode() for names in
                       (re.findall(r"[A-Za-z_][A-Za-z0-9_]*", b.split("(")[0]) for b in self.breaks) if names}
        self.breakpoints = breakpoints
        self.seen: Set[Any] = set()
        self.surrogates: Dict[str, IndexedLibrary] = {}  # big libraries gdb has a surrogate for
        self.indexed: Dict[str, IndexedLibrary] = {}  # big libraries our index knows (with or without one)
        self.pending: List[Dict[str, Any]] = []
        self.phase = Phase.IDLE
        self.listed = False  # gdb's whole library list was read since the exec
        self.mapped: Dict[str, int] = {}  # after release: library -> where it was mapped at the last look
        self.watched = 0.0  # monotonic time of the last look (``watch``)

    def want_names(self, names: List[str]) -> None:
        """A small library whose file holds one of ``names`` gets gdb's symbols too (``--break-op`` types:
        a library that registers a kernel for one holds its name, and its kernel's ``Compute`` is named by gdb)."""
        self.tokens.update(n.encode() for n in names)

    @property
    def eager(self) -> bool:
        """gdb stops at each library load (``stop-on-solib-events``)."""
        return self.phase in (Phase.EXEC, Phase.STARTED)

    @property
    def released(self) -> bool:
        """gdb no longer follows library loads (see ``release``)."""
        return self.phase is Phase.RELEASED

    def _enter(self, phase: Phase) -> None:
        """The one place the phase changes: refuses a change ``TRANSITIONS`` does not have.

        Whether gdb stops at library loads follows the phase: entering or
        leaving EXEC/STARTED sets ``stop-on-solib-events`` (never with
        ``--full-symbols``).
        """
        if phase is self.phase:
            return
        if (self.phase, phase) not in TRANSITIONS:
            raise RuntimeError("symbol loader: no transition from %s to %s" % (self.phase.name, phase.name))
        eager = phase in (Phase.EXEC, Phase.STARTED)
        if eager != self.eager and not self.full:
            self.gdb.console_command("set stop-on-solib-events %d" % int(eager))
        self.phase = phase

    @staticmethod
    def early_commands(full_symbols: bool) -> List[str]:
        return [] if full_symbols else ["set auto-solib-add off"]

    def after_exec(self) -> None:
        """The process image changed: libraries of the launcher are gone.

        Until every breakpoint has resolved, gdb stops at each library load so
        that the new library gets its symbols before any of its code runs;
        after that, libraries get their symbols lazily, before each capture.
        """
        self.seen.clear()
        self.surrogates.clear()
        self.indexed.clear()
        self.pending.clear()
        self.listed = False
        if self.breakpoints is not None:
            self.breakpoints.forget_libraries()
        self._enter(Phase.EXEC if self.breaks_total and not self.full else Phase.SETTLED)

    def after_attach(self) -> None:
        """Attached to a running process: as after an exec, with the program's own libraries in already."""
        self.after_exec()
        if self.phase is Phase.EXEC:
            self._enter(Phase.STARTED)

    def note_library(self, payload: Dict[str, Any]) -> None:
        """A ``=library-loaded`` record: the library gets its symbols at the next sync."""
        self.pending.append(payload)

    def quiet_sync(self) -> None:
        """The target has loaded no library for a moment: give the new ones their symbols now.

        While the target runs (lazy phase, gdb in async mode), gdb can read
        symbols without stopping it; doing it in one batch once a burst of
        ``dlopen``s is over (``QUIET_S``) keeps gdb off the target's path
        while it imports (each load stops it until gdb is free), and keeps the
        work off the path from a hit to its report.
        """
        if self.pending and not self.eager and not self.full:
            try:
                self.sync()
            except GdbError:
                pass  # gdb would not do it while the target runs: the next sync will

    def settle(self) -> None:
        """Every breakpoint has resolved: no more stops at library events, and ``release`` if it may.

        Not before the program's own libraries are in: a breakpoint on
        ``uname`` resolves in the loader first, and libc, loaded next, must
        add its location before any of the program's code runs.
        """
        if self.breakpoints is not None and self.breakpoints.locations and self.phase is Phase.EXEC:
            return
        if self.eager:
            self._enter(Phase.SETTLED)
        self.release()

    def release(self) -> bool:
        """gdb stops following library loads; True if it did.

        Not done with ``--full-symbols``, FILE:LINE breakpoints (a library
        loaded later may add a line location, which needs gdb's DWARF reader)
        or op breakpoints (their kernels may be in libraries loaded later,
        named by gdb).  A breakpoint's locations so far become address
        breakpoints: gdb forgets the libraries they are in.
        """
        bps = self.breakpoints
        if self.full or self.phase is not Phase.SETTLED or bps is None or not bps.all_resolved():
            return False
        if any(":" in b.replace("::", "") for b in bps.locations):
            return False
        addresses = bps.addresses(self.gdb)
        if addresses is None:
            return False
        bps.delete(self.gdb)
        released = False
        try:
            self.gdb.console_command("nosharedlibrary")
            self.gdb.console_command("set osabi none")
            self._enter(Phase.RELEASED)
            released = True
        finally:
            if not released:  # gdb refused: it keeps following the loads, as before
                self.gdb.console_command("set osabi auto")
            rows = self._code_rows()
            bps.pin(self.gdb, addresses, rows)
        self.seen = {lib.path for lib in self.surrogates.values()}
        self.pending.clear()
        self.mapped = library_starts(rows)
        return True

    def _code_rows(self) -> CodeRows:
        """(start, end, path) of the target's executable file mappings."""
        try:
            return [(lo, hi, name) for lo, hi, perms, _o, _d, inode, name in procfs.maps(self.pid)
                    if "x" in perms and inode and name.startswith("/")]
        except OSError:
            return []

    def _reacquire(self) -> None:
        """gdb must unwind: its GNU/Linux ABI (signal frames, threads) and the library list, back."""
        if self.phase is not Phase.RELEASED:
            return
        self.gdb.console_command("set osabi auto")
        self._enter(Phase.SETTLED)

    def reacquire_abi(self) -> None:
        """gdb is about to read the whole process (``gcore``): its GNU/Linux ABI back, no symbols needed."""
        self._reacquire()

    def watch(self, due_only: bool = False) -> None:
        """After release: say which libraries were loaded and unloaded since the last look.

        What gdb would do at the library events, a moment later (every
        ``WATCH_S`` while the target runs, and at each stop before it goes
        on): the breakpoints in a library that was unloaded go
        (``Breakpoints.unloaded``), so that gdb never writes a trap where
        other code may now be mapped; a new library that holds a breakpoint's
        name (see ``_holds_breakpoint_name``) is looked up in our index, and
        each function it defines under that name gets an address breakpoint
        (``Breakpoints.loaded``).  ``due_only``: only if the last look is
        ``WATCH_S`` old.
        """
        bps = self.breakpoints
        if self.phase is not Phase.RELEASED or bps is None or bps.retired:
            return
        if due_only and time.monotonic() - self.watched < WATCH_S:
            return
        self.watched = time.monotonic()
        rows = self._code_rows()
        now = library_starts(rows)
        bps.unloaded(self.gdb, {(path, start) for path, start in self.mapped.items() if now.get(path) != start})
        came = [p for p in now if self.mapped.get(p) != now[p]]
        self.mapped = now
        for path in came:
            found = self._defined_breakpoints(path)
            if found:
                bps.loaded(self.gdb, found, rows, self.err, os.path.basename(path))

    def _defined_breakpoints(self, path: str) -> List[Tuple[str, int]]:
        """(location, address) of each breakpoint function the mapped library ``path`` defines, from our index."""
        if not self._holds_breakpoint_name(path):
            return []
        try:
            index = ElfIndex.open(path)
            base = load_base(self.pid, path)
        except (ElfError, OSError, LookupError):
            return []
        return [(loc, base + vaddr) for loc, vaddr in self._functions(index)]

    def _functions(self, index: ElfIndex) -> List[Tuple[str, int]]:
        """(location, vaddr) of each function ``index``'s library defines for a function breakpoint."""
        return [(loc, vaddr) for loc in self.breaks for _name, vaddr in index.find(loc)]

    def sync(self, full_list: bool = False) -> None:
        """Give gdb symbols (full or surrogate) for every library loaded since the last call."""
        if self.full:
            return
        if full_list:
            self._reacquire()
        elif self.phase is Phase.RELEASED:
            return
        if self.pending and self.phase is Phase.EXEC:
            self._enter(Phase.STARTED)
        if full_list or not self.listed:
            # The whole list once per process image; after that, the
            # =library-loaded records say what is new (a library event with
            # none, the loader's "about to add", has nothing to do; listing
            # there costs gdb a full walk of the loader's list each time).
            libs = self._listing()
            self.listed = True
        else:
            libs = self.pending
        self.pending = []
        self._load(libs, full_list)

    def _listing(self) -> List[Dict[str, Any]]:
        libs: List[Dict[str, Any]] = self.gdb.command("-file-list-shared-libraries", timeout=120).get(
            "shared-libraries", [])
        return libs

    def _load(self, libs: List[Dict[str, Any]], full_list: bool) -> None:
        """Symbols for ``libs`` (MI library records); ``full_list``: they are gdb's whole list.

        A full list means gdb is about to unwind (a capture through gdb): every
        library gets what that needs.  Otherwise (library events), gdb gets only
        what breakpoints need: a huge library is looked up in our index (its
        functions get address breakpoints) without a surrogate, and a small
        library only when its file holds one of the breakpoints' names (every
        one, with a FILE:LINE breakpoint).  Captures need none of it: tfnative unwinds
        them itself (``snapshot/pipeline.py``).  What is left out is loaded by the next
        full sync, should gdb ever have to unwind.
        """
        small: List[str] = []
        surrogated = {v.path for v in self.surrogates.values()}
        root = file_root(self.pid)  # a process in another mount namespace: its files under /proc/PID/root
        for lib in libs:
            path = lib.get("target-name") or ""
            if not path:
                continue
            if path in self.seen:
                # A full listing double-checks: a library whose symbols did not
                # load (and has no surrogate) is tried again.
                if not (full_list and lib.get("symbols-loaded") == "0" and root + path not in surrogated):
                    continue
            host = root + path  # where we read the file; gdb reads it as the target sees it
            try:
                size = os.path.getsize(host)
            except OSError:
                continue
            name = lib.get("host-name") or path  # what gdb matches "sharedlibrary" against ("target:/..." there)
            if size >= HUGE_BYTES and wants_surrogate(host):
                self.seen.add(path)
                if not self._index(host) or (full_list and not self._surrogate(host)):
                    small.append(name)
            elif lib.get("symbols-loaded") != "1":
                if full_list or self._may_define_breakpoint(host):
                    self.seen.add(path)
                    small.append(name)
            else:
                self.seen.add(path)
        if small:
            regex = "\\|".join("^%s$" % gdb_regex_escape(p) for p in small)
            try:
                self.gdb.console_command("sharedlibrary %s" % regex, timeout=600)
            except GdbError:
                self.seen.difference_update(p.split("target:", 1)[-1] for p in small)  # the next full sync retries
                raise
        if self.breakpoints is not None and self.eager:
            self.breakpoints.drop_plt_stubs(self.gdb)

    def _may_define_breakpoint(self, path: str) -> bool:
        """Whether a library may add a location to a breakpoint: then it gets gdb's symbols.

        gdb would add one where the library defines a breakpoint's function:
        its name is then among the file's bytes (plain or in a mangled name).
        FILE:LINE breakpoints need the library's DWARF: those keep every
        library loaded.
        """
        if self.breaks_total > len(self.breaks):
            return True
        return self._holds_breakpoint_name(path)

    def _holds_breakpoint_name(self, path: str) -> bool:
        """Whether one of the function breakpoints' names is among the file's bytes."""
        if not self.tokens:
            return False
        try:
            with map_file(path) as mm:
                return any(mm.find(t) >= 0 for t in self.tokens)
        except (OSError, ValueError):
            return True

    def sync_for_snapshot(self) -> List[str]:
        """Symbols for the libraries a snapshot of the stopped process can meet, and no others.

        ``tfnative stack`` looks once and leaves: reading the symbols of every
        small library TensorFlow loads costs gdb more than the snapshot, and
        most of them are on no thread's stack.  gdb tells which code ranges the
        threads' pcs and stack words point into (``-tfnative-stack-code``);
        those libraries (and the interpreter's) get symbols as in ``sync``.
        Returns the libraries left without symbols.
        """
        if self.full:
            return []
        libs = self._listing()
        paths = [lib.get("target-name") or "" for lib in libs]
        by_file: Dict[Tuple[int, int], str] = {}
        root = file_root(self.pid)
        for p in paths:
            try:
                st = os.stat(root + p)
                by_file[(st.st_dev, st.st_ino)] = p
            except OSError:
                continue
        code: List[Tuple[Any, ...]] = []
        owners: List[str] = []
        stacks: List[Tuple[Any, ...]] = []
        for lo, hi, perms, _off, dev, inode, name in procfs.maps(self.pid):
            if "x" in perms and inode:
                major, minor = (int(x, 16) for x in dev.split(":"))
                owner = by_file.get((os.makedev(major, minor), inode))
                if owner:
                    code.append((lo, hi))
                    owners.append(owner)
            elif perms.startswith("rw") and (not name or name == "[stack]"):
                stacks.append((lo, hi))
        args = ["c:%x:%x" % r for r in code] + ["s:%x:%x" % r for r in stacks]
        try:
            hit = json.loads(self.gdb.command("-tfnative-stack-code " + " ".join(args), timeout=120)["json"])
        except (GdbError, KeyError, ValueError):
            self._load(libs, full_list=True)
            return []
        wanted = {owners[i] for i in hit} | {p for p in paths if "libpython" in os.path.basename(p)}
        self._load([lib for lib in libs if lib.get("target-name") in wanted], full_list=True)
        return [p for p in paths if p and p not in wanted]

    def _index(self, path: str) -> bool:
        """Our index of a huge library; in the eager phase, its breakpoint functions get address breakpoints.

        Resolving a pending breakpoint by name in gdb would need the library's
        symbols (the slow part of a plain ``gdb -p``) or make gdb analyse the
        function's prologue, which parses the library's whole ``.eh_frame``.  We
        resolve names from our index and break at the function's entry
        address, which CFI unwinds exactly.
        """
        name = os.path.basename(path)
        if name in self.indexed:
            return True
        try:
            index = ElfIndex.open(path)
            found = self._functions(index) if self.eager else []
            base = load_base(self.pid, path)
        except (ElfError, OSError, LookupError) as exc:
            self.err.write("tfnative: warning: fast symbols unavailable for %s (%s); gdb reads it in full\n"
                           % (name, exc))
            return False
        self.indexed[name] = IndexedLibrary(path, base, index, os.path.getsize(path))
        if self.breakpoints is not None:
            self.breakpoints.arm_addresses(self.gdb, [(loc, base + vaddr) for loc, vaddr in found])
        return True

    def _surrogate(self, path: str) -> bool:
        """Give gdb a CFI-only surrogate of an indexed library, for gdb's own unwind through it."""
        lib = self.indexed[os.path.basename(path)]
        if os.path.basename(path) in self.surrogates:
            return True
        try:
            surrogate = build_surrogate(path)
        except (ElfError, OSError) as exc:
            self.err.write("tfnative: warning: fast symbols unavailable for %s (%s); gdb reads it in full\n"
                           % (os.path.basename(path), exc))
            return False
        try:
            self.gdb.console_command("add-symbol-file %s -o 0x%x" % (surrogate, lib.base), timeout=600)
        except GdbError as exc:
            self.err.write("tfnative: warning: gdb refused the surrogate for %s (%s)\n" % (path, exc))
            return False
        self.surrogates[os.path.basename(path)] = lib
        return True

    def symbolize(self, capture: Capture) -> None:
        """Name the frames of surrogate libraries from our index, in place.

        A caller's frame is looked up at its return address less one, as gdb and tfnative's unwinder do:
        the call that does not return (``abort()`` at the end of absl's ``FailWithoutStackTrace``) is the
        function's last instruction, and its return address the first byte past the function."""
        if not self.indexed:
            return
        todo = []
        for thread in capture.threads:
            for frames in (thread.frames, thread.python_frames or []):
                for i, f in enumerate(frames):
                    if not isinstance(f, NativeFrame) or not f.address:
                        continue
                    lib = self.indexed.get(f.library or "")
                    if lib is None:
                        continue
                    before = frames[i - 1] if i else None
                    caller = before is not None and before.function != SIGNAL_FRAME
                    pc = int(f.address, 16) - int(caller)
                    hit = lib.index.symbolize(pc - lib.base)
                    if hit is not None:
                        todo.append((f, hit[0]))
                        f.start = pc - hit[1]
        names = display_names([m for _, m in todo])
        for (f, _), name in zip(todo, names):
            f.function = name

    def name_of(self, address: int) -> Optional[str]:
        """The demangled name of the function at ``address`` in an indexed library, or None."""
        for lib in self.indexed.values():
            vaddr = address - lib.base
            if not 0 <= vaddr < lib.size:
                continue
            hit = lib.index.symbolize(vaddr)
            if hit is not None:
                return display_names([hit[0]])[0]
        return None
