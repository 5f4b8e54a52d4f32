"""A core file as a snapshot source (``base.Source``): memory, threads' registers and mapped files.

Where each mapped file is on this host is ``corefile/paths.py``'s rules
(``--sysroot``, the executable given, its interpreter prefix and venv);
whether a file found there is the one the process ran is ``corefile/checks.py``'s
(build-id, else headers, else size).  A file that is missing or another
build is named in a warning and never read: its frames get an address and a
library name, never a name from the wrong file.
"""

from __future__ import annotations

import copy
import os
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..core.binary.cfaprogram import CfiError
from ..core.binary.elf import ElfError, ElfFile
from ..core.binary.mapfile import check_file, map_file
from ..core.model import Capture, NativeFrame, Thread
from ..core.threads import Threads
from ..errors import HasDebugInfo, TfnativeError, Unsupported
from ..sources.base import ThreadRegs
from ..sources.modules import Anonymous, Library, modules_of
from .checks import mismatch
from .paths import PathRules
from .reader import PF_X, PT_LOAD, Core, Mapping

# ``stacks(source, which, selected, variables)``: the snapshot path (``tfnative.snapshot.pipeline.stacks``), which the
# caller gives (sources do not import the snapshot path)
Stacks = Callable[[Any, Threads, Optional[int], bool], Capture]

AT_PHDR = 3
AT_EXECFN = 31
START_STRINGS_BYTES = 1 << 20  # how far below AT_EXECFN argc, argv and envp are looked for
MAX_START_STRINGS = 1 << 16


def _executable_in_file(path: str, offset: int) -> bool:
    """Whether the file's own program headers map ``offset`` executable (a mapping the core has no header for)."""
    try:
        with map_file(path) as mm:
            elf = ElfFile(mm, path, sections=False)
            return any(p_type == PT_LOAD and p_flags & PF_X and p_off - p_off % 4096 <= offset < p_off + p_filesz
                       for p_type, p_flags, p_off, _v, p_filesz, _m, _a in elf.segments)
    except (ElfError, OSError, ValueError, struct.error):
        return False


class _Unread(Anonymous):
    """Code of a file that was not read (missing here, or another build): no CFI, no symbols, its name only."""

    def open_cfi(self) -> Any:
        raise CfiError("%s was not read (missing on this host or another build)" % self.name)


class CoreSource:
    """Opens ``path`` and decides where each mapped file is read from; ``warnings`` says what is missing.

    A ``base.Source``: no code outside files (the core keeps no vDSO image
    apart), stack bounds from the core's mappings, no PID namespace; a
    thread whose native unwinding stops (memory or files missing) is shown
    cut with its Python frames (``partial_stacks``).
    """

    partial_stacks = True
    nonblocking = False  # a core never runs on

    def __init__(self, path: str, executable: Optional[str] = None, sysroot: Optional[str] = None) -> None:
        if executable is not None:  # checked first: a FIFO or a directory is one line at once, never a wait
            bad = check_file(executable, min_size=64, elf=True)
            if bad is not None:
                raise TfnativeError("%s: not an executable to read the core with: %s" % (executable, bad.reason))
        self.core = Core(path)
        self.memory = self.core
        self._only: Optional[int] = None  # one thread only (``_thread_by_thread``)
        self.sysroot = sysroot
        self.variables = False  # --locals: each Python frame's arguments and locals
        # What was wrong in the core's notes and program headers and left out (reader.py): the report goes on
        self.warnings: List[str] = ["%s: %s" % (path, p) for p in self.core.notes.problems]
        notes = self.core.notes
        phdr = notes.auxv.get(AT_PHDR)
        exe = next((m for m in notes.files if phdr is not None and m.start <= phdr < m.end), None)
        self.exe_seen = exe.path if exe else None
        self._host: Dict[str, Optional[str]] = {}
        self._strings: Optional[Tuple[List[str], List[str]]] = None
        self.rules = PathRules(sysroot, self.exe_seen, executable, next(iter(self._start_strings()[0]), None))
        self._check_files()
        self.core.locate = self._host.get  # pages left out of the core come from the checked files only

    def candidate(self, seen: str) -> str:
        """Where a path the process saw is on this host (``corefile/paths.py``: the first that exists; not
        checked)."""
        if self._host.get(seen):
            return self._host[seen]  # type: ignore[return-value]
        tries = self.rules.candidates(seen)
        return next((p for p in tries if os.path.exists(p)), tries[0])

    def _check_files(self) -> None:
        by_path: Dict[str, List[Mapping]] = {}
        for m in self.core.notes.files:
            by_path.setdefault(m.path, []).append(m)
        for seen, maps in by_path.items():
            self._host[seen] = None
            wrong = None
            code = any(m.executable for m in maps)
            for host in self.rules.candidates(seen):
                # The one check of every file tfnative maps (mapfile.py): a regular file, not empty, not of
                # /proc, not a sparse monster; code must be ELF.  Anything else is skipped, said, never read.
                bad = check_file(host, elf=code)
                if bad is not None:
                    if not bad.missing:
                        wrong = wrong or "%s: cannot be read (%s); its frames are shown by address only" % (
                            host, bad.reason)
                    continue
                why = mismatch(self.core, maps, host)
                if why is None:
                    self._host[seen] = host
                    for m in maps:  # gdb's gcore leaves code mappings out: the file's headers say which are code
                        if not m.has_header:
                            m.executable = _executable_in_file(host, m.offset)
                    break
                wrong = wrong or "%s: %s: not the file the process ran; its frames are shown by address only" % (
                    host, why)
            if self._host[seen] is not None or not (any(m.offset == 0 for m in maps)
                                                     and any(m.executable for m in maps)):
                continue
            self.warnings.append(wrong or "%s: missing on this host%s: its frames are shown by address only"
                                 % (seen, " (under %s)" % self.sysroot if self.sysroot else ""))

    def host_of(self, seen: str) -> Optional[str]:
        """The checked file on this host for a path the process mapped (None: missing or another build)."""
        return self._host.get(seen)

    @property
    def executable(self) -> Optional[str]:
        return self._host.get(self.exe_seen) if self.exe_seen else None

    def argv(self) -> List[str]:
        """The process's arguments: in full from its stack where the core holds them, else ``NT_PRPSINFO``'s
        (the first 80 characters, split at spaces)."""
        return self._start_strings()[0] or self.core.notes.psargs.split() or [self.core.notes.fname]

    def environment(self) -> Dict[str, str]:
        """The environment the process started with (its stack's strings; {} where the core lacks them)."""
        env: Dict[str, str] = {}
        for entry in self._start_strings()[1]:
            key, eq, value = entry.partition("=")
            if eq:
                env.setdefault(key, value)
        return env

    def _start_strings(self) -> Tuple[List[str], List[str]]:
        """(argv, envp) as the kernel laid them out at the top of the main stack: ``argc``, the ``argv``
        pointers, NULL, the ``envp`` pointers, NULL, then the auxiliary vector, whose copy ``NT_AUXV``
        holds, so it is found by its bytes and the pointers are read backwards from it (bounded).
        ([], []) where the core does not hold them."""
        if self._strings is not None:
            return self._strings
        self._strings = ([], [])
        notes = self.core.notes
        execfn = notes.auxv.get(AT_EXECFN)
        if not execfn or len(notes.auxv) < 2:
            return self._strings
        span = self.core.mapping_of(execfn)
        lo = max(execfn - START_STRINGS_BYTES, span[0] if span else 0)
        try:
            raw = self.core.read(lo, execfn - lo)
        except MemoryError:
            return self._strings
        pairs = list(notes.auxv.items())[:2]
        at = raw.rfind(struct.pack("<4Q", pairs[0][0], pairs[0][1], pairs[1][0], pairs[1][1]))
        if at < 16:
            return self._strings

        def word(off: int) -> Optional[int]:
            return struct.unpack_from("<Q", raw, off)[0] if off >= 0 else None

        def pointers(off: int) -> Tuple[List[int], int]:
            """The pointers that end with the NULL at ``off``, read backwards, and the offset before them."""
            out: List[int] = []
            off -= 8
            while len(out) < MAX_START_STRINGS:
                v = word(off)
                if v is None or not lo <= v < execfn:
                    break
                out.append(v)
                off -= 8
            return out[::-1], off

        if word(at - 8) != 0:
            return self._strings
        envp, off = pointers(at - 8)
        if word(off) != 0:
            return self._strings
        argv, off = pointers(off)
        if word(off) != len(argv) or not argv:
            return self._strings  # argc must count them

        def text(ptr: int) -> str:
            end = raw.find(b"\0", ptr - lo)
            return raw[ptr - lo:end if end >= 0 else len(raw)].decode("utf-8", "replace")

        self._strings = ([text(p) for p in argv], [text(p) for p in envp])
        return self._strings

    @property
    def pid(self) -> int:
        notes = self.core.notes
        return notes.pid or notes.threads[0].tid

    def extra_code(self) -> List[Library]:
        return []

    def mapping_of(self, addr: int) -> Optional[Tuple[int, int]]:
        return self.core.mapping_of(addr)

    def namespace_tids(self) -> Dict[int, int]:
        return {}

    def libraries(self) -> List[Library]:
        rows: List[Tuple[str, int, int, int, bool, str]] = []
        unread: Dict[str, List[Tuple[int, int]]] = {}
        for m in self.core.notes.files:
            host = self._host.get(m.path)
            if host:
                rows.append((host, m.start, m.end, m.offset, m.executable, "core"))
            elif m.executable:
                unread.setdefault(m.path, []).append((m.start, m.end))
        libs: List[Library] = modules_of(rows)
        return libs + [_Unread(os.path.basename(path), ranges) for path, ranges in unread.items()]

    def threads(self) -> List[ThreadRegs]:
        return [(t.tid, "", t.regs) for t in self.core.notes.threads if self._only in (None, t.tid)]

    def stacks(self, which: Threads, stacks: Stacks) -> Capture:
        """``stacks`` (the snapshot path) on the core; the thread that took the signal is ``selected_tid``.
        Raises ``base.HasDebugInfo`` where a library on a stack has DWARF (``corefile/withgdb.py`` then); a thread
        that cannot be read is read alone (``_thread_by_thread``)."""
        crashed = self.core.notes.threads[0].tid
        try:
            result = stacks(self, which, crashed, self.variables)
        except HasDebugInfo:
            raise
        except Unsupported:
            result = self._thread_by_thread(which, stacks)
        # The crashed thread is kept even when it runs no Python.
        if not any(t.tid == crashed for t in result.threads) and which is not Threads.ALL:
            every = stacks(self, Threads.SELECTED, crashed, self.variables)
            result.threads = every.threads + result.threads
        return self.finish(result)

    def finish(self, result: Capture, which: Threads = Threads.ALL) -> Capture:
        """What every capture of the core gets (ours, or gdb's keeping ``which`` threads): the crashed thread
        selected, frames in unread files labelled, the warnings."""
        crashed = self.core.notes.threads[0].tid
        result.selected_tid = crashed
        if which is Threads.PYTHON:
            result.threads = [t for t in result.threads if t.tid == crashed or t.gil == "held" or t.runs_python()]
        self._label_unread(result)
        result.warnings = self.warnings + result.warnings
        if self.core.missing:
            lo, hi = self.core.missing[0]
            result.warnings.append("memory missing from the core (%d reads, first 0x%x-0x%x)%s"
                                      % (len(self.core.missing), lo, hi,
                                         ": the core is truncated" if self.core.truncated_at else ""))
        elif self.core.truncated_at:
            result.warnings.append("the core is truncated (memory from 0x%x on is missing)"
                                      % self.core.truncated_at)
        return result

    def _label_unread(self, result: Capture) -> None:
        """Frames in a file that was not read (missing, other build-id) get its name as their library."""
        for t in result.threads:
            for f in t.frames:
                if isinstance(f, NativeFrame) and not f.library and f.address:
                    m = self.core.file_mapping(int(f.address, 16))
                    if m is not None:
                        f.library = os.path.basename(m.path)

    def one_thread(self, tid: int) -> CoreSource:
        """This source with thread ``tid`` alone (the others' registers hidden), its files and memory shared."""
        alone = copy.copy(self)
        alone._only = tid
        return alone

    def _thread_by_thread(self, which: Threads, stacks: Stacks) -> Capture:
        """Each thread on its own, so that the ones whose memory the core holds are still shown."""
        notes = self.core.notes
        merged: Optional[Capture] = None
        threads: List[Thread] = []
        for tid, name, _regs in self.threads():
            alone = self.one_thread(tid)
            try:
                one = stacks(alone, which if tid != notes.threads[0].tid else Threads.ALL, tid, self.variables)
            except Unsupported as exc:
                threads.append(Thread(tid=tid, name=name, error=str(exc)))
                continue
            threads += one.threads
            if merged is None:
                merged = one  # the process's fields (python, warnings, pool...): the first readable thread's
        if merged is None:
            raise Unsupported(threads[0].error)
        merged.threads = threads
        return merged

    def close(self) -> None:
        self.core.close()
