"""``tfnative core`` on damaged cores and on cores that name odd files: one line or a report, never a crash.

One real core, made once per session (a small Python program that aborts, ``RLIMIT_CORE`` raised, in a
temporary directory: core_pattern writes ``core`` in its cwd), is the seed of every case:

- its ``NT_FILE`` note pointed at odd files (empty, one byte, a sparse 100 GB file, ``/proc/self/mem``,
  ``/dev/zero``, a directory, a FIFO, a symbolic link loop, a locale file): the file is skipped as unreadable,
  named in a warning, and the report goes on (exit 0);
- the same odd files given as the core or as the executable: one ``tfnative: error:`` line;
- structured damage to its notes (sizes, types, ``NT_FILE``'s count, page size, entries and paths, a cut
  ``NT_PRSTATUS``) and program headers (offsets and sizes past the end, huge counts), truncations at many
  points and random byte flips: a report or one line, within the time and RSS bounds.

Every run goes through ``harness.run_bounded`` (no traceback, no exit 70, no hang, no blow-up, one line).
"""

from __future__ import annotations

import glob
import os
import resource
import struct
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import pytest

from .harness import Budget, FuzzFailure, Outcome, run_bounded

RSS_MB = 600.0
TIMEOUT = 60.0
PT_LOAD, PT_NOTE = 1, 4
NT_PRSTATUS, NT_PRPSINFO, NT_AUXV, NT_SIGINFO, NT_FILE = 1, 3, 6, 0x53494749, 0x46494C45

# The crash runs through functions whose code says it came from odd files (a FIFO, /dev/zero, /proc/self/mem, a
# sparse 100 GB file, a directory, a symbolic link loop): the report reads the source lines of the frames it
# shows, and must never block on, or read without end, a file a core names.
PROGRAM = r"""
import os
here = os.getcwd()
os.mkfifo(os.path.join(here, "fifo.py"))
os.symlink("loop.py", os.path.join(here, "loop.py"))
with open(os.path.join(here, "sparse.py"), "wb") as f:
    f.truncate(100 << 30)
names = [os.path.join(here, "fifo.py"), "/dev/zero", "/proc/self/mem", os.path.join(here, "sparse.py"), here,
         os.path.join(here, "loop.py")]
ns = {"os": os}
for i, name in enumerate(names):
    call = "g%d()" % (i + 1) if i + 1 < len(names) else "os.abort()"
    exec(compile("def g%d():\n    %s\n" % (i, call), name, "exec"), ns)
ns["g0"]()
"""


def _raise_core_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


@dataclass
class Note:
    offset: int  # of its header in the core
    name: bytes
    type: int
    desc: bytes


class CoreImage:
    """A core's bytes with its program headers and notes parsed (x86-64, little endian), to damage and write."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.phoff, = struct.unpack_from("<Q", data, 32)
        self.phentsize, self.phnum = struct.unpack_from("<HH", data, 54)
        self.note_phdr = next(i for i in range(self.phnum) if self.phdr(i)[0] == PT_NOTE)
        _t, _f, off, _v, _p, filesz, _m, _a = self.phdr(self.note_phdr)
        self.notes: List[Note] = []
        at = off
        while at + 12 <= off + filesz:
            namesz, descsz, ntype = struct.unpack_from("<III", data, at)
            name = data[at + 12:at + 12 + namesz]
            desc_at = at + 12 + ((namesz + 3) & ~3)
            self.notes.append(Note(at, name, ntype, data[desc_at:desc_at + descsz]))
            at = desc_at + ((descsz + 3) & ~3)

    def phdr_at(self, i: int) -> int:
        return self.phoff + i * self.phentsize

    def phdr(self, i: int) -> Tuple[int, ...]:
        return struct.unpack_from("<IIQQQQQQ", self.data, self.phdr_at(i))

    def note(self, ntype: int) -> Note:
        return next(n for n in self.notes if n.type == ntype)

    def with_notes(self, notes: List[Tuple[bytes, int, bytes]], sizes: Optional[Dict[int, Tuple[int, int]]] = None
                   ) -> bytes:
        """The core with its notes replaced by ``notes`` (name, type, desc), written at its end and its PT_NOTE
        pointed there; ``sizes``: note index -> (namesz, descsz) written in place of the true ones."""
        blob = bytearray()
        for i, (name, ntype, desc) in enumerate(notes):
            namesz, descsz = (sizes or {}).get(i, (len(name), len(desc)))
            blob += struct.pack("<III", namesz, descsz, ntype)
            blob += name + b"\0" * (-len(name) % 4) + desc + b"\0" * (-len(desc) % 4)
        out = bytearray(self.data)
        at = len(out)
        out += blob
        struct.pack_into("<QQ", out, self.phdr_at(self.note_phdr) + 8, at, 0)  # p_offset (p_vaddr 0)
        struct.pack_into("<Q", out, self.phdr_at(self.note_phdr) + 32, len(blob))  # p_filesz
        return bytes(out)

    def plain_notes(self) -> List[Tuple[bytes, int, bytes]]:
        return [(n.name, n.type, n.desc) for n in self.notes]


def nt_file_decode(desc: bytes) -> Tuple[int, List[Tuple[int, int, int]], List[bytes]]:
    count, page = struct.unpack_from("<QQ", desc, 0)
    entries = [struct.unpack_from("<QQQ", desc, 16 + 24 * i) for i in range(count)]
    names = desc[16 + 24 * count:].split(b"\0")[:count]
    return page, entries, names


def nt_file_encode(page: int, entries: List[Tuple[int, int, int]], names: List[bytes],
                   count: Optional[int] = None) -> bytes:
    out = struct.pack("<QQ", len(entries) if count is None else count, page)
    out += b"".join(struct.pack("<QQQ", *e) for e in entries)
    return out + b"".join(n + b"\0" for n in names)


@dataclass
class Seed:
    path: str  # the core
    image: CoreImage
    workdir: str
    python: str  # the interpreter that dumped it (as the core names it)


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Seed:
    d = str(tmp_path_factory.mktemp("fuzzcore"))
    prog = os.path.join(d, "crash.py")
    with open(prog, "w") as f:
        f.write(PROGRAM)
    proc = subprocess.run([sys.executable, "-S", prog], cwd=d, preexec_fn=_raise_core_limit, capture_output=True,
                          timeout=60)
    assert proc.returncode < 0, proc.stderr[-2000:]
    cores = glob.glob(os.path.join(d, "core*"))
    assert cores, "no core in %s (core_pattern?)" % d
    path = os.path.join(d, "core")
    os.rename(cores[0], path)
    with open(path, "rb") as f:
        image = CoreImage(f.read())
    # The seed itself reads, with no warning about its notes or headers: a damaged copy's failures are the damage's.
    out = run_bounded(["core", path], timeout=TIMEOUT, rss_mb=RSS_MB, expect_ok=True)
    assert path + ":" not in out.stdout + out.stderr, out.describe()
    assert all("g%d at " % i in out.stdout for i in range(6)), out.stdout
    return Seed(path, image, d, os.path.realpath(sys.executable))


@pytest.fixture(scope="module")
def odd_files(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """Files no process maps as code: each kind once (the sparse one takes no disk)."""
    d = str(tmp_path_factory.mktemp("odd"))
    out: Dict[str, str] = {}

    def make(name: str, content: bytes) -> str:
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(content)
        return p

    out["empty"] = make("empty.so", b"")
    out["one byte"] = make("one.so", b"\x7f")
    out["elf magic only"] = make("magic.so", b"\x7fELF\x02\x01\x01")
    out["text"] = make("text.so", b"this is not a library\n" * 10)
    sparse = os.path.join(d, "sparse.so")
    with open(sparse, "wb") as f:
        f.truncate(100 << 30)
    out["sparse 100 GB"] = sparse
    out["/proc/self/mem"] = "/proc/self/mem"
    out["/proc/self/maps"] = "/proc/self/maps"
    out["/dev/zero"] = "/dev/zero"
    out["directory"] = d
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    out["FIFO"] = fifo
    loop = os.path.join(d, "loop")
    os.symlink(loop, loop)
    out["symlink loop"] = loop
    out["missing"] = os.path.join(d, "missing.so")
    for locale_file in ("/usr/lib/locale/C.utf8/LC_CTYPE", "/usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache"):
        if os.path.isfile(locale_file):
            out[os.path.basename(locale_file)] = locale_file
    return out


def tfnative_core(seed: Seed, data: bytes, *extra: str, expect_ok: Optional[bool] = None,
                  name: str = "damaged") -> Outcome:
    path = os.path.join(seed.workdir, name)
    with open(path, "wb") as f:
        f.write(data)
    try:
        return run_bounded(["core", path, *extra], timeout=TIMEOUT, rss_mb=RSS_MB, expect_ok=expect_ok)
    except FuzzFailure as exc:
        raise FuzzFailure("%s\n(the damaged core: %s)" % (exc, path)) from None


def _paths_of(image: CoreImage) -> List[bytes]:
    _page, _entries, names = nt_file_decode(image.note(NT_FILE).desc)
    return list(dict.fromkeys(names))


def _pointed(image: CoreImage, which: Callable[[bytes], bool], to: str) -> bytes:
    """The core with the NT_FILE paths that ``which`` picks replaced by ``to``."""
    page, entries, names = nt_file_decode(image.note(NT_FILE).desc)
    names = [to.encode() if which(n) else n for n in names]
    notes = [(n, t, nt_file_encode(page, entries, names) if t == NT_FILE else d) for n, t, d in image.plain_notes()]
    return image.with_notes(notes)


# ------------------------------------------------------------------------------------------------------------
# The files a core names


@pytest.mark.parametrize("target", ["libc", "python", "every file"])
def test_nt_file_paths_at_odd_files_are_skipped(seed: Seed, odd_files: Dict[str, str], target: str,
                                                budget: Budget) -> None:
    """Each odd file in place of libc, the interpreter, or every mapped file: the report goes on (exit 0) and a
    warning names what was not read."""
    picks: Dict[str, Callable[[bytes], bool]] = {
        "libc": lambda n: os.path.basename(n).startswith(b"libc.so"),
        "python": lambda n: os.path.realpath(n) == seed.python.encode() or n.endswith(b"/python3.11"),
        "every file": lambda n: n.startswith(b"/"),
    }
    assert any(picks[target](n) for n in _paths_of(seed.image)), _paths_of(seed.image)
    kinds = list(odd_files)
    if target != "libc" and not budget.on_demand:  # every kind for libc; a few for the others under CI
        kinds = budget.rng(target).sample(kinds, 4)
    for kind in kinds:
        path = odd_files[kind]
        # With every file unreadable the interpreter is too: no thread may unwind (one line), or the report
        out = tfnative_core(seed, _pointed(seed.image, picks[target], path),
                            expect_ok=None if target == "every file" else True)
        if out.returncode == 0:
            assert "core of pid" in out.stdout, (kind, out.describe())
            if kind not in ("missing",):
                assert path in out.stderr + out.stdout, (kind, out.describe())


@pytest.mark.parametrize("kind", ["empty", "one byte", "elf magic only", "text", "sparse 100 GB", "/proc/self/mem",
                                  "/dev/zero", "directory", "symlink loop", "missing", "LC_CTYPE"])
def test_odd_files_as_the_core_are_one_line(seed: Seed, odd_files: Dict[str, str], kind: str) -> None:
    if kind not in odd_files:
        pytest.skip("no %s on this host" % kind)
    out = run_bounded(["core", odd_files[kind]], timeout=TIMEOUT, rss_mb=RSS_MB, expect_ok=False)
    assert odd_files[kind] in out.stderr, out.describe()


def test_an_elf_file_that_is_no_core_is_one_line(seed: Seed) -> None:
    out = run_bounded(["core", seed.python], timeout=TIMEOUT, rss_mb=RSS_MB, expect_ok=False)
    assert "not an ELF core" in out.stderr, out.describe()


@pytest.mark.parametrize("kind", ["empty", "one byte", "elf magic only", "text", "sparse 100 GB", "/proc/self/mem",
                                  "/dev/zero", "directory", "FIFO", "symlink loop", "missing", "LC_CTYPE"])
def test_odd_files_as_the_executable_are_one_line(seed: Seed, odd_files: Dict[str, str], kind: str) -> None:
    if kind not in odd_files:
        pytest.skip("no %s on this host" % kind)
    out = run_bounded(["core", seed.path, odd_files[kind]], timeout=TIMEOUT, rss_mb=RSS_MB, expect_ok=False)
    assert odd_files[kind] in out.stderr, out.describe()


# ------------------------------------------------------------------------------------------------------------
# Damaged notes and program headers


def _nt_file_cases(image: CoreImage) -> Dict[str, bytes]:
    page, entries, names = nt_file_decode(image.note(NT_FILE).desc)
    big = 1 << 63
    n = len(entries)

    def entry(i: int, start: Optional[int] = None, end: Optional[int] = None, pgoff: Optional[int] = None
              ) -> List[Tuple[int, int, int]]:
        e = list(entries)
        s0, e0, p0 = e[i]
        e[i] = (s0 if start is None else start, e0 if end is None else end, p0 if pgoff is None else pgoff)
        return e

    return {
        "page size 2**63": nt_file_encode(big, entries, names),
        "page size 2**64-1": nt_file_encode((1 << 64) - 1, entries, names),
        "page size 0": nt_file_encode(0, entries, names),
        "page size 1": nt_file_encode(1, entries, names),
        "count 2**64-1": nt_file_encode(page, entries, names, count=(1 << 64) - 1),
        "count 2**32": nt_file_encode(page, entries, names, count=1 << 32),
        "count 0": nt_file_encode(page, entries, names, count=0),
        "count one more": nt_file_encode(page, entries, names, count=n + 1),
        "no names": nt_file_encode(page, entries, []),
        "entry offset huge": nt_file_encode(page, entry(0, pgoff=1 << 60), names),
        "every offset huge": nt_file_encode(page, [(s, e, (1 << 52) + i) for i, (s, e, _p) in enumerate(entries)],
                                            names),
        "entry ends past 2**64": nt_file_encode(page, entry(1, end=(1 << 64) - 1), names),
        "entry ends before it starts": nt_file_encode(page, entry(2, end=entries[2][0] - 4096), names),
        "entry of 2**63 bytes": nt_file_encode(page, entry(0, start=0, end=big), names),
        "every entry empty": nt_file_encode(page, [(s, s, p) for s, _e, p in entries], names),
        "entries overlapping": nt_file_encode(page, [(entries[0][0], entries[-1][1], p) for _s, _e, p in entries],
                                              names),
        "path 1 MB": nt_file_encode(page, entries, [b"/" + b"a" * (1 << 20)] + names[1:]),
        "paths relative and odd": nt_file_encode(page, entries, [b"", b"lib.so", b"..", b"/", b"\xff\xfe"]
                                                 + names[5:]),
        "desc cut in an entry": nt_file_encode(page, entries, names)[:16 + 24 * (n // 2) + 7],
        "desc of 8 bytes": struct.pack("<Q", n),
    }


def _note_cases(image: CoreImage) -> Dict[str, bytes]:
    notes = image.plain_notes()
    prstatus = [i for i, (_n, t, _d) in enumerate(notes) if t == NT_PRSTATUS]
    nt_file = next(i for i, (_n, t, _d) in enumerate(notes) if t == NT_FILE)
    cases: Dict[str, bytes] = {}
    for label, desc in _nt_file_cases(image).items():
        cases["NT_FILE " + label] = image.with_notes([(n, t, desc if i == nt_file else d)
                                                      for i, (n, t, d) in enumerate(notes)])
    cut = [(n, t, d[:60] if t == NT_PRSTATUS else d) for n, t, d in notes]
    cases["NT_PRSTATUS cut to 60 bytes"] = image.with_notes(cut)
    cases["first NT_PRSTATUS cut"] = image.with_notes([(n, t, d[:150] if i == prstatus[0] else d)
                                                      for i, (n, t, d) in enumerate(notes)])
    cases["no NT_PRSTATUS"] = image.with_notes([x for x in notes if x[1] != NT_PRSTATUS])
    cases["only NT_PRSTATUS"] = image.with_notes([x for x in notes if x[1] == NT_PRSTATUS])
    cases["no notes"] = image.with_notes([])
    cases["descsz 2**32-1"] = image.with_notes(notes, sizes={0: (len(notes[0][0]), (1 << 32) - 1)})
    cases["namesz 2**32-1"] = image.with_notes(notes, sizes={1: ((1 << 32) - 1, len(notes[1][2]))})
    cases["NT_FILE descsz one more than its note"] = image.with_notes(
        notes, sizes={nt_file: (len(notes[nt_file][0]), len(notes[nt_file][2]) + 8)})
    cases["every note an NT_FILE"] = image.with_notes([(n, NT_FILE, d) for n, _t, d in notes])
    cases["every note an NT_PRSTATUS"] = image.with_notes([(n, NT_PRSTATUS, d) for n, _t, d in notes])
    cases["NT_AUXV of garbage"] = image.with_notes([(n, t, b"\xff" * len(d) if t == NT_AUXV else d)
                                                   for n, t, d in notes])
    cases["NT_SIGINFO cut"] = image.with_notes([(n, t, d[:10] if t == NT_SIGINFO else d) for n, t, d in notes])
    cases["NT_PRPSINFO of garbage"] = image.with_notes([(n, t, b"\xff" * len(d) if t == NT_PRPSINFO else d)
                                                       for n, t, d in notes])
    cases["200000 empty notes"] = image.with_notes(notes + [(b"", 0, b"")] * 200000)
    cases["4000 threads"] = image.with_notes(notes + [notes[prstatus[0]]] * 4000)
    cases["100000 short NT_PRSTATUS"] = image.with_notes(notes + [(b"CORE", NT_PRSTATUS, bytes(8))] * 100000)
    return cases


def _phdr_cases(image: CoreImage) -> Dict[str, bytes]:
    data = image.data
    size = len(data)
    loads = [i for i in range(image.phnum) if image.phdr(i)[0] == PT_LOAD]
    cases: Dict[str, bytes] = {}

    def patch(label: str, edits: List[Tuple[int, str, int]]) -> None:
        out = bytearray(data)
        for at, fmt, value in edits:
            struct.pack_into(fmt, out, at, value)
        cases[label] = bytes(out)

    note = image.phdr_at(image.note_phdr)
    patch("PT_NOTE offset past the end", [(note + 8, "<Q", size + 4096)])
    patch("PT_NOTE offset 2**64-1", [(note + 8, "<Q", (1 << 64) - 1)])
    patch("PT_NOTE size 2**63", [(note + 32, "<Q", 1 << 63)])
    patch("PT_NOTE size past the end", [(note + 32, "<Q", size)])
    for k, i in enumerate([loads[0], loads[len(loads) // 2]]):
        at = image.phdr_at(i)
        patch("PT_LOAD %d offset past the end" % k, [(at + 8, "<Q", size + (1 << 40))])
        patch("PT_LOAD %d filesz 2**63" % k, [(at + 32, "<Q", 1 << 63), (at + 40, "<Q", 1 << 63)])
        patch("PT_LOAD %d vaddr near 2**64" % k, [(at + 16, "<Q", (1 << 64) - 4096)])
        patch("PT_LOAD %d memsz 0" % k, [(at + 40, "<Q", 0)])
    patch("every PT_LOAD at vaddr 0", [(image.phdr_at(i) + 16, "<Q", 0) for i in loads])
    patch("every PT_LOAD offset 0", [(image.phdr_at(i) + 8, "<Q", 0) for i in loads])
    patch("e_phnum 65535", [(56, "<H", 0xFFFF)])
    patch("e_phnum 0", [(56, "<H", 0)])
    patch("e_phentsize 0", [(54, "<H", 0)])
    patch("e_phentsize 1", [(54, "<H", 1)])
    patch("e_phoff past the end", [(32, "<Q", size)])
    patch("e_phoff 2**64-8", [(32, "<Q", (1 << 64) - 8)])
    patch("e_type ET_EXEC", [(16, "<H", 2)])
    patch("e_machine aarch64", [(18, "<H", 183)])
    patch("ELFCLASS32", [(4, "<B", 1)])
    patch("big endian", [(5, "<B", 2)])
    return cases


def test_damaged_notes_are_a_report_or_one_line(seed: Seed) -> None:
    for label, data in _note_cases(seed.image).items():
        try:
            tfnative_core(seed, data)
        except FuzzFailure as exc:
            raise FuzzFailure("%s: %s" % (label, exc)) from None


def test_damaged_program_headers_are_a_report_or_one_line(seed: Seed) -> None:
    for label, data in _phdr_cases(seed.image).items():
        try:
            tfnative_core(seed, data)
        except FuzzFailure as exc:
            raise FuzzFailure("%s: %s" % (label, exc)) from None


def test_truncations(seed: Seed, budget: Budget) -> None:
    """Cut at the edges of its headers and notes, in its first segments, then at random points."""
    data = seed.image.data
    image = seed.image
    note_off, note_size = image.phdr(image.note_phdr)[2], image.phdr(image.note_phdr)[5]
    points = [0, 1, 4, 16, 52, 63, 64, image.phoff + image.phentsize // 2, image.phoff + image.phentsize * 3,
              image.phoff + image.phentsize * image.phnum - 1, note_off, note_off + 12, note_off + note_size // 2,
              note_off + note_size - 1, image.note(NT_FILE).offset + 20, note_off + note_size + 100]
    rng = budget.rng("truncate")
    points += sorted(rng.randrange(note_off + note_size, len(data)) for _ in range(4 if not budget.on_demand else 200))
    for cut in points:
        tfnative_core(seed, data[:cut])


def _memory_regions(image: CoreImage) -> Tuple[Tuple[int, int], List[Tuple[int, int]]]:
    """(file offset, size) in the core of the crashed thread's stack page(s) around its rsp, and of the
    writable memory the core holds (heap, the interpreter's data: where the Python frames and objects are)."""
    regs = image.note(NT_PRSTATUS).desc
    rsp, = struct.unpack_from("<Q", regs, 112 + 19 * 8)  # pr_reg, user_regs_struct's rsp
    stack = (0, 0)
    writable = []
    for i in range(image.phnum):
        p_type, p_flags, p_offset, p_vaddr, _p, p_filesz, _m, _a = image.phdr(i)
        if p_type != PT_LOAD or not p_filesz:
            continue
        if p_vaddr <= rsp < p_vaddr + p_filesz:
            lo = max(p_vaddr, rsp - 4096)
            stack = (p_offset + lo - p_vaddr, min(p_vaddr + p_filesz, rsp + 16384) - lo)
        elif p_flags & 2:
            writable.append((p_offset, p_filesz))
    return stack, writable


def test_random_damage(seed: Seed, budget: Budget) -> None:
    """Seeded byte flips: in the headers and notes (where a flip changes what is read), in the crashed thread's
    stack (the unwinder), in the writable memory (the Python frames and objects), anywhere."""
    import time

    rng = budget.rng("flips")
    image = seed.image
    note_off, note_size = image.phdr(image.note_phdr)[2], image.phdr(image.note_phdr)[5]
    head = note_off + note_size
    stack, writable = _memory_regions(image)
    assert stack[1] > 0 and writable
    deadline = time.monotonic() + budget.seconds(12)
    runs = 0
    while time.monotonic() < deadline or runs < 5:
        data = bytearray(image.data)
        where = rng.random()
        for _ in range(rng.choice([1, 2, 4, 16, 64])):
            if where < 0.5:
                at = rng.randrange(head)
            elif where < 0.7:
                at = stack[0] + rng.randrange(stack[1])
            elif where < 0.9:
                off, size = rng.choice(writable)
                at = off + rng.randrange(size)
            else:
                at = rng.randrange(len(data))
            data[at] = rng.choice([0, 0xFF, rng.randrange(256), data[at] ^ (1 << rng.randrange(8))])
        tfnative_core(seed, bytes(data))
        runs += 1
