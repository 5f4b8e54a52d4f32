"""The ELF core reader: threads' registers, the signal, the mapped files and the memory of a core dump.

A core is an ELF file of type ``ET_CORE``: a ``PT_NOTE`` segment (one
``NT_PRSTATUS`` per thread, the first being the thread that took the signal;
``NT_PRPSINFO``; ``NT_SIGINFO``; ``NT_FILE``; ``NT_AUXV``) and one ``PT_LOAD``
per mapping.  Pages the kernel left out (``p_filesz`` shorter than
``p_memsz``: file-backed read-only code and data under the default
``coredump_filter``) are read from the mapped file at the offset ``NT_FILE``
gives, through ``locate`` (the host path of a path as the target saw it).

Compressed cores (systemd-coredump's ``.zst``, ``.lz4``, ``.xz``) are
decompressed into an unlinked temporary file first, so nothing is left behind.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import tempfile
from dataclasses import dataclass, field
from typing import IO, Callable, Dict, List, Optional, Tuple

from ..core.binary.elf import ElfError, ElfFile, ElfTruncated
from ..core.binary.mapfile import FileUnusable, map_fd, map_file
from ..core.memory import UnwindMemory
from ..errors import CoreError, InputError
from ..files import open_input
from ..progress import progress
from ..sources.ptrace import REGISTERS

ET_CORE = 4
EM_X86_64 = 62
PT_LOAD = 1
PT_NOTE = 4
PF_X = 1
NT_PRSTATUS = 1
NT_PRPSINFO = 3
NT_AUXV = 6
NT_SIGINFO = 0x53494749
NT_FILE = 0x46494C45
SI_USER, SI_QUEUE, SI_TKILL = 0, -1, -6  # si_code of a signal a process sent (siginfo.h)
PRSTATUS_REGS = 112  # offset of pr_reg in x86-64's elf_prstatus
MAX_NOTES = 1 << 20
MAX_READ = 1 << 26
DROP_BYTES = 1 << 20  # a read of the core of at least this many bytes gives its pages back (``_drop``)
MAX_THREADS = 1 << 16  # NT_PRSTATUS notes read (the kernel's own limit on threads is lower in practice)
MAX_NT_FILE = 1 << 18  # NT_FILE entries read (a process has at most vm.max_map_count mappings: 65530 by default)
USER_END = 1 << 56  # no x86-64 user address reaches this (57-bit paging's user half ends at 2**56)
MAX_FILE_OFFSET = 1 << 48  # an NT_FILE offset beyond this is no file's


@dataclass
class Mapping:
    """One file mapping from ``NT_FILE``: [start, end) of the target's memory, file offset, path as seen."""

    start: int
    end: int
    offset: int
    path: str
    executable: bool = False  # its PT_LOAD is; where none covers it, the file's own headers say (``CoreSource``)
    has_header: bool = True  # a PT_LOAD covers it (gdb's gcore writes none for the file mappings it leaves out)


@dataclass
class Segment:
    """One ``PT_LOAD``: ``filesz`` bytes at ``offset`` in the core, then ``memsz - filesz`` not dumped."""

    vaddr: int
    memsz: int
    offset: int
    filesz: int
    flags: int


@dataclass
class Thread:
    """One ``NT_PRSTATUS``: the thread id, its current signal and its registers (ptrace's names)."""

    tid: int
    cursig: int
    regs: Dict[str, int]


@dataclass
class Notes:
    """What the ``PT_NOTE`` segments say (see ``parse_notes``)."""

    threads: List[Thread] = field(default_factory=list)
    pid: Optional[int] = None
    fname: str = ""
    psargs: str = ""
    signal: Optional[int] = None
    signal_code: Optional[int] = None
    fault_address: Optional[int] = None
    sender_pid: Optional[int] = None
    files: List[Mapping] = field(default_factory=list)
    auxv: Dict[int, int] = field(default_factory=dict)
    truncated: bool = False
    problems: List[str] = field(default_factory=list)  # what was wrong in them and left out (warnings)


MAX_PROBLEMS = 20  # what is wrong in a core, said one by one (a damaged core may repeat one fault a million times)


def _say(problems: List[str], text: str) -> None:
    if len(problems) < MAX_PROBLEMS:
        problems.append(text)
    elif len(problems) == MAX_PROBLEMS:
        problems.append("more damage, not listed")


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def parse_notes(buf: bytes) -> Notes:
    """Parse the notes of an x86-64 core (little endian); a note cut short ends the walk (``truncated``).

    Every size is checked against what ``buf`` holds; what is wrong is left out and said in ``problems``."""
    notes = Notes()
    off = 0
    for _ in range(MAX_NOTES):
        if off + 12 > len(buf):
            notes.truncated = off != len(buf)
            break
        namesz, descsz, ntype = struct.unpack_from("<III", buf, off)
        desc = off + 12 + ((namesz + 3) & ~3)
        nxt = desc + ((descsz + 3) & ~3)
        if desc + descsz > len(buf):
            notes.truncated = True
            _say(notes.problems, "a note (type 0x%x) of %d bytes runs past the end of the notes (%d bytes)"
                 % (ntype, descsz, len(buf)))
            break
        d = buf[desc:desc + descsz]
        off = nxt
        if ntype == NT_PRSTATUS and len(notes.threads) >= MAX_THREADS:
            continue
        if ntype == NT_PRSTATUS and len(d) >= PRSTATUS_REGS + 8 * len(REGISTERS):
            cursig, = struct.unpack_from("<H", d, 12)
            tid, = struct.unpack_from("<I", d, 32)
            regs = dict(zip(REGISTERS, struct.unpack_from("<%dQ" % len(REGISTERS), d, PRSTATUS_REGS)))
            notes.threads.append(Thread(tid, cursig, regs))
        elif ntype == NT_PRSTATUS:
            _say(notes.problems, "a thread's NT_PRSTATUS note of %d bytes, too short for its registers (%d); "
                 "left out" % (len(d), PRSTATUS_REGS + 8 * len(REGISTERS)))
        elif ntype == NT_PRPSINFO and len(d) >= 136:
            notes.pid, = struct.unpack_from("<I", d, 24)
            notes.fname, notes.psargs = _cstr(d[40:56]), _cstr(d[56:136])
        elif ntype == NT_SIGINFO and len(d) >= 24 and notes.signal is None:
            # The first one: the kernel writes one, for the thread that took the signal; gdb's gcore
            # writes one per thread, the signalled thread's first.
            signo, _errno, code = struct.unpack_from("<iii", d, 0)
            notes.signal, notes.signal_code = signo, code
            if signo in (4, 5, 7, 8, 11):  # SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV carry si_addr
                notes.fault_address, = struct.unpack_from("<Q", d, 16)
            elif code in (SI_USER, SI_QUEUE, SI_TKILL):  # kill(), sigqueue(), tgkill(): si_pid, si_uid
                notes.sender_pid, = struct.unpack_from("<i", d, 16)
        elif ntype == NT_FILE and not notes.files:
            notes.files = _parse_nt_file(d, notes.problems)
        elif ntype == NT_AUXV:
            for i in range(0, len(d) - 15, 16):
                key, value = struct.unpack_from("<QQ", d, i)
                if key == 0:
                    break
                notes.auxv[key] = value
    return notes


def _parse_nt_file(d: bytes, problems: List[str]) -> List[Mapping]:
    """The mapped files of an ``NT_FILE`` note: its count, page size, entries and paths, each checked against
    the note's size and the address space; an entry that fails is left out and named in ``problems``."""
    if len(d) < 16:
        _say(problems, "NT_FILE: a note of %d bytes, too short for its header; the mapped files are not read"
             % len(d))
        return []
    count, page = struct.unpack_from("<QQ", d, 0)
    fits = (len(d) - 16) // 24
    if count > min(fits, MAX_NT_FILE):
        _say(problems, "NT_FILE: %d entries, where its %d bytes hold at most %d; the first %d are read"
             % (count, len(d), fits, min(fits, MAX_NT_FILE)))
        count = min(fits, MAX_NT_FILE)
    if page == 0 or page & (page - 1) or page > 1 << 30:
        _say(problems, "NT_FILE: a page size of %d; the mapped files are not read" % page)
        return []
    names = d[16 + 24 * count:].split(b"\0", count)
    out = []
    first_bad, bad = "", 0
    for i in range(count):
        start, end, pgoff = struct.unpack_from("<QQQ", d, 16 + 24 * i)
        name = names[i].decode("utf-8", "replace") if i < len(names) else ""
        why = ("ends past the end of the address space" if end > USER_END
               else "is empty" if end == start else "ends before it starts" if end < start
               else "maps offset 0x%x of its file" % (pgoff * page) if pgoff * page > MAX_FILE_OFFSET
               else "has no path" if not name.startswith("/") else None)
        if why is not None:
            first_bad = first_bad or "entry %d (0x%x-0x%x) %s" % (i, start, end, why)
            bad += 1
            continue
        out.append(Mapping(start, end, pgoff * page, name))
    if bad:
        _say(problems, "NT_FILE: %s%s; left out" % (first_bad, " and %d more" % (bad - 1) if bad > 1 else ""))
    return out


def _decompress(path: str) -> Optional[IO[bytes]]:
    """An unlinked temporary file with the decompressed core, or None when ``path`` is not compressed."""
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic[:4] == b"\x28\xb5\x2f\xfd":
        import zstandard
        opener: Callable[[IO[bytes]], IO[bytes]] = lambda f: zstandard.ZstdDecompressor().stream_reader(f)  # noqa: E731
    elif magic[:4] == b"\x04\x22\x4d\x18":
        import lz4.frame
        opener = lambda f: lz4.frame.LZ4FrameFile(f)  # noqa: E731
    elif magic == b"\xfd7zXZ\x00":
        import lzma
        opener = lambda f: lzma.LZMAFile(f)  # noqa: E731
    else:
        return None
    tmp = tempfile.TemporaryFile(prefix="tfnative-core-")  # unlinked at once: nothing survives us
    try:
        with open(path, "rb") as f, opener(f) as src, progress("decompressing %s" % path) as shown:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                tmp.write(chunk)
                shown.update("%d MB" % (tmp.tell() >> 20))
    except Exception as exc:  # noqa: BLE001 - any decoder error is "this file is damaged"
        tmp.close()
        raise CoreError("%s: cannot decompress: %s" % (path, exc)) from None
    tmp.flush()
    return tmp


class Core(UnwindMemory):
    """An open core file: ``notes``, ``segments``, and ``read(addr, size)`` of the target's memory.

    ``locate(path)`` gives where a mapped file is on this host (None when it
    is missing or must not be read, e.g. a build-id mismatch); pages the core
    left out are read from there.  ``missing`` collects the address ranges a
    read found neither in the core nor in a file (truncated cores).
    """

    late_reads = 0  # a core never runs on: nothing is read after a release

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            # files.open_input: never blocks (a FIFO), a directory or anything but a file is an error at once
            raw = open_input(path, seekable=True)
        except InputError as exc:
            raise CoreError("%s: %s" % (path, exc.reason)) from None
        try:
            self._file: IO[bytes] = _decompress(path) or os.fdopen(raw.detach(), "rb")
        except FileNotFoundError:
            raise CoreError("%s: no such file" % path) from None
        except IsADirectoryError:
            raise CoreError("%s: is a directory" % path) from None
        except PermissionError:
            raise CoreError("%s: permission denied" % path) from None
        except OSError as exc:  # a symbolic link loop, a file of /proc that cannot be read...
            raise CoreError("%s: cannot read: %s" % (path, exc.strerror or exc)) from None
        finally:
            raw.close()
        try:
            # The same checks as every file tfnative maps (mapfile.py): a regular file, none of /proc's...
            self.mm = map_fd(self._file.fileno(), path, max_size=None)  # a large job's core is larger than 64 GiB
            self.size = len(self.mm)
        except FileUnusable as exc:
            self._file.close()
            raise CoreError("%s: not a core: %s" % (path, exc.reason)) from None
        if self.size < 64:
            self.mm.close()
            self._file.close()
            raise CoreError("%s: not an ELF core (too short)" % path)
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        self.locate: Callable[[str], Optional[str]] = lambda p: p
        self._files: Dict[str, Optional[mmap.mmap]] = {}
        self.missing: List[Tuple[int, int]] = []

    def _open(self) -> None:
        if self.mm[:4] == b"\x7fELF" and self.mm[4:6] != b"\x02\x01":
            raise CoreError("%s: a core of another architecture (%s); tfnative reads x86-64 cores" % (
                self.path, "32-bit" if self.mm[4] == 1 else "big-endian" if self.mm[5] == 2 else
                "ELF class %d, data %d" % (self.mm[4], self.mm[5])))
        try:
            elf = ElfFile(self.mm, self.path)
        except ElfError as exc:
            if not isinstance(exc, ElfTruncated):
                why = str(exc)[len(self.path) + 2:] if str(exc).startswith(self.path + ": ") else str(exc)
                if self.mm[:4] != b"\x7fELF":
                    raise CoreError("%s: not an ELF core" % self.path) from None
                raise CoreError("%s: not an ELF core (%s)" % (self.path, why)) from None
            raise CoreError("%s: an ELF file cut short before the end of its headers (truncated core?)"
                            % self.path) from None
        except struct.error:
            raise CoreError("%s: an ELF file cut short before its program headers (truncated core?)"
                            % self.path) from None
        if elf.e_type != ET_CORE:
            raise CoreError("%s: not an ELF core (an ELF file of type %d)" % (self.path, elf.e_type))
        if not elf.is64 or elf.endian != "<" or elf.e_machine != EM_X86_64:
            raise CoreError("%s: a core of another architecture (e_machine %d); tfnative reads x86-64 cores"
                            % (self.path, elf.e_machine))
        self.segments: List[Segment] = []
        notes = b""
        problems: List[str] = []
        for i, (p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz, _align) in enumerate(elf.segments):
            if p_type == PT_NOTE:
                if p_offset >= self.size:
                    _say(problems, "program header %d: notes at offset 0x%x, past the end of the core (%d bytes)"
                         % (i, p_offset, self.size))
                    continue
                if p_offset + p_filesz > self.size:
                    _say(problems, "program header %d: notes of %d bytes run past the end of the core" % (i, p_filesz))
                room = MAX_READ - len(notes)
                if p_filesz > room:
                    _say(problems, "program header %d: notes past %d bytes in all; left out" % (i, MAX_READ))
                notes += self.mm[p_offset:min(p_offset + p_filesz, self.size, p_offset + max(room, 0))]
            elif p_type == PT_LOAD:
                if not p_memsz:
                    continue
                if p_vaddr + p_memsz > 1 << 64 or p_filesz > p_memsz:  # (the vsyscall page ends at 2**64 - 2**22)
                    _say(problems, "program header %d: memory 0x%x-0x%x%s; left out"
                         % (i, p_vaddr, p_vaddr + p_memsz, " with more bytes in the file than in memory"
                            if p_filesz > p_memsz else ", past the end of the address space"))
                    continue
                self.segments.append(Segment(p_vaddr, p_memsz, p_offset, p_filesz, p_flags))
        self.segments.sort(key=lambda s: s.vaddr)
        kept: List[Segment] = []
        for one in self.segments:  # each starts at or after the end of the one before, as the kernel writes them
            if kept and one.vaddr < kept[-1].vaddr + kept[-1].memsz:
                continue
            kept.append(one)
        if len(kept) < len(self.segments):
            _say(problems, "%d PT_LOAD program headers overlap others; left out" % (len(self.segments) - len(kept)))
            self.segments = kept
        self._starts = [s.vaddr for s in self.segments]
        self.notes = parse_notes(notes)
        self.notes.problems[:0] = problems
        if not self.notes.threads:
            why = "; ".join(self.notes.problems[:2])
            raise CoreError("%s: the core holds no thread (%s)" % (
                self.path, why or "truncated before its notes?"))
        # What the core should hold beyond its end: the kernel stopped writing (disk full, RLIMIT_CORE).
        self.truncated_at = next((s.vaddr + max(0, self.size - s.offset) for s in self.segments
                                  if s.filesz and s.offset + s.filesz > self.size), None)
        for m in self.notes.files:
            seg = self._segment(m.start)
            m.executable = bool(seg is not None and seg.flags & PF_X)
            m.has_header = seg is not None

    def _segment(self, addr: int) -> Optional[Segment]:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self.segments[i].vaddr + self.segments[i].memsz:
            return self.segments[i]
        return None

    def mapping_of(self, addr: int) -> Optional[Tuple[int, int]]:
        """The [start, end) of the target's mapping that holds ``addr`` (None: unmapped)."""
        seg = self._segment(addr)
        return (seg.vaddr, seg.vaddr + seg.memsz) if seg is not None else None

    def file_mapping(self, addr: int) -> Optional[Mapping]:
        """The mapped file (from the core's NT_FILE note) that holds ``addr``; None for anonymous memory."""
        for m in self.notes.files:
            if m.start <= addr < m.end:
                return m
        return None

    def _from_file(self, m: Mapping, addr: int, size: int) -> Optional[bytes]:
        if m.path not in self._files:
            host = self.locate(m.path)
            try:
                self._files[m.path] = map_file(host) if host else None
            except FileUnusable:
                self._files[m.path] = None
        mm = self._files[m.path]
        at = m.offset + addr - m.start
        if mm is None or at >= len(mm):
            return None
        data = mm[at:at + size]
        return data + b"\0" * (size - len(data))  # past the file's end the page reads as zeros

    @property
    def file_path(self) -> str:
        """A path another process (gdb) can open for the core as read: the decompressed copy's through
        ``/proc/PID/fd`` (it has no name)."""
        if isinstance(self._file.name, str):
            return self._file.name
        return "/proc/%d/fd/%d" % (os.getpid(), self._file.fileno())

    def dumped(self, addr: int, size: int) -> Optional[bytes]:
        """``size`` bytes at ``addr`` from the core itself (never from a mapped file); None where the core
        does not hold them all (pages left out, or cut off)."""
        seg = self._segment(addr)
        if seg is None or size < 0 or addr + size > seg.vaddr + seg.filesz:
            return None
        at = seg.offset + addr - seg.vaddr
        return self.mm[at:at + size] if at + size <= self.size else None

    def read(self, addr: int, size: int) -> bytes:
        """``size`` bytes at ``addr``; ``MemoryError`` where the core and the mapped files have none."""
        if addr <= 0 or size < 0 or size > MAX_READ or addr + size > 1 << 64:
            raise MemoryError("bad read of %d bytes at 0x%x" % (size, addr))
        out = bytearray()
        while len(out) < size:
            at = addr + len(out)
            seg = self._segment(at)
            if seg is None:
                # gdb's gcore writes no PT_LOAD for the read-only file mappings it leaves out (code, .rodata):
                # NT_FILE still has them, and the checked file holds their bytes
                m = self.file_mapping(at)
                data = self._from_file(m, at, min(size - len(out), m.end - at)) if m and not m.has_header else None
                if data is None:
                    raise MemoryError("0x%x is not mapped in the core" % at)
                out += data
                continue
            rel = at - seg.vaddr
            n = min(size - len(out), seg.vaddr + seg.memsz - at)
            if rel < seg.filesz and seg.offset + rel < self.size:
                n = min(n, seg.filesz - rel, self.size - seg.offset - rel)
                out += self.mm[seg.offset + rel:seg.offset + rel + n]
                if n >= DROP_BYTES:
                    self._drop(seg.offset + rel, n)
                continue
            m = self.file_mapping(at) if rel >= seg.filesz else None  # dumped pages cut off: the file's are stale
            if m is not None:
                n = min(n, m.end - at)
                data = self._from_file(m, at, n)
                if data is not None:
                    out += data
                    continue
            self.missing.append((at, at + n))
            raise MemoryError("0x%x is not in the core%s" % (at, " (the core is truncated)"
                                                             if seg.offset + rel >= self.size else ""))
        return bytes(out)

    def _drop(self, at: int, n: int) -> None:
        """A large read's pages of the core leave this process (``--repro``'s copy of a big input, 4 MiB at a
        time): they were copied, and the map would otherwise keep them all resident."""
        start = at - at % mmap.PAGESIZE
        try:
            self.mm.madvise(mmap.MADV_DONTNEED, start, at + n - start)
        except (AttributeError, OSError, ValueError):
            pass

    def close(self) -> None:
        for f in getattr(self, "_files", {}).values():
            if f is not None:
                f.close()
        if getattr(self, "mm", None) is not None:
            self.mm.close()
            self.mm = None  # type: ignore[assignment]
        self._file.close()

    def __enter__(self) -> Core:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
