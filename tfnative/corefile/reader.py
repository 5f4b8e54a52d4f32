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

from ..core.elfindex import ElfError, ElfFile, ElfTruncated
from ..core.memory import UnwindMemory
from ..errors import CoreError
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


@dataclass
class Mapping:
    """One file mapping from ``NT_FILE``: [start, end) of the target's memory, file offset, path as seen."""

    start: int
    end: int
    offset: int
    path: str
    executable: bool = False
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


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def parse_notes(buf: bytes) -> Notes:
    """Parse the notes of an x86-64 core (little endian); a note cut short ends the walk (``truncated``)."""
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
            break
        d = buf[desc:desc + descsz]
        off = nxt
        if ntype == NT_PRSTATUS and len(d) >= PRSTATUS_REGS + 8 * len(REGISTERS):
            cursig, = struct.unpack_from("<H", d, 12)
            tid, = struct.unpack_from("<I", d, 32)
            regs = dict(zip(REGISTERS, struct.unpack_from("<%dQ" % len(REGISTERS), d, PRSTATUS_REGS)))
            notes.threads.append(Thread(tid, cursig, regs))
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
        elif ntype == NT_FILE and len(d) >= 16:
            notes.files = _parse_nt_file(d)
        elif ntype == NT_AUXV:
            for i in range(0, len(d) - 15, 16):
                key, value = struct.unpack_from("<QQ", d, i)
                if key == 0:
                    break
                notes.auxv[key] = value
    return notes


def _parse_nt_file(d: bytes) -> List[Mapping]:
    count, page = struct.unpack_from("<QQ", d, 0)
    count = min(count, (len(d) - 16) // 24)
    names = d[16 + 24 * count:].split(b"\0")
    out = []
    for i in range(count):
        start, end, pgoff = struct.unpack_from("<QQQ", d, 16 + 24 * i)
        name = names[i].decode("utf-8", "replace") if i < len(names) else ""
        out.append(Mapping(start, end, pgoff * page, name))
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
            self._file: IO[bytes] = _decompress(path) or open(path, "rb")
        except FileNotFoundError:
            raise CoreError("%s: no such file" % path) from None
        except IsADirectoryError:
            raise CoreError("%s: is a directory" % path) from None
        except PermissionError:
            raise CoreError("%s: permission denied" % path) from None
        try:
            self.size = os.fstat(self._file.fileno()).st_size
            if self.size < 64:
                raise CoreError("%s: not an ELF core (too short)" % path)
            self.mm = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            self._file.close()
            raise CoreError("%s: cannot read: %s" % (path, exc)) from None
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        self.locate: Callable[[str], Optional[str]] = lambda p: p
        self._files: Dict[str, Optional[IO[bytes]]] = {}
        self.missing: List[Tuple[int, int]] = []

    def _open(self) -> None:
        try:
            elf = ElfFile(self.mm, self.path)
        except ElfError as exc:
            if not isinstance(exc, ElfTruncated):
                raise CoreError("%s: not an ELF core" % self.path) from None
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
        for p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz, _align in elf.segments:
            if p_type == PT_NOTE:
                notes += self.mm[p_offset:p_offset + p_filesz]
            elif p_type == PT_LOAD:
                self.segments.append(Segment(p_vaddr, p_memsz, p_offset, p_filesz, p_flags))
        self.segments.sort(key=lambda s: s.vaddr)
        self._starts = [s.vaddr for s in self.segments]
        self.notes = parse_notes(notes)
        if not self.notes.threads:
            raise CoreError("%s: the core holds no thread (truncated before its notes?)" % self.path)
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
                self._files[m.path] = open(host, "rb") if host else None
            except OSError:
                self._files[m.path] = None
        f = self._files[m.path]
        if f is None:
            return None
        f.seek(m.offset + addr - m.start)
        data = f.read(size)
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
                raise MemoryError("0x%x is not mapped in the core" % at)
            rel = at - seg.vaddr
            n = min(size - len(out), seg.vaddr + seg.memsz - at)
            if rel < seg.filesz and seg.offset + rel < self.size:
                n = min(n, seg.filesz - rel, self.size - seg.offset - rel)
                out += self.mm[seg.offset + rel:seg.offset + rel + n]
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
