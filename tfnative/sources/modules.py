"""The files mapped into a process as snapshot modules: code ranges, load bias, symbols, CFI, DWARF.

A source (``/proc/PID/maps``, a core's ``NT_FILE``) gives the mappings;
``modules_of`` makes them ``Library`` objects, shared by every snapshot of
this process (what a file gives, by file: ``shared``).  The vDSO
(``Vdso``) and executable memory no file backs (``Anonymous``) are modules
too.  The snapshot path (``tfnative/snapshot/pipeline.py``) names and unwinds frames
with them; the sources build them.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..core import procfs
from ..core.binary import dwarfcover, vdso
from ..core.binary.cfaprogram import CfiError
from ..core.binary.cfi import Module
from ..core.binary.debugfiles import find_debug_files
from ..core.binary.elf import ElfError, ElfFile, ElfTruncated, elf_header, first_load_vaddr
from ..core.binary.mapfile import map_file, read_head
from ..core.binary.symindex import ElfIndex
from ..core.memory import Memory


class Library(Module):
    """A mapped file with what naming its frames needs (opened on first use)."""

    def __init__(self, path: str, bias: int, ranges: List[Tuple[int, int]]) -> None:
        super().__init__(path, bias, ranges)
        self.name = os.path.basename(path)
        self._index: Optional[List[ElfIndex]] = None
        self._dwarf: Optional[bool] = None

    def indexes(self) -> List[ElfIndex]:
        """The symbol index of the file, then of its separate debug file when the file is stripped."""
        if self._index is None:
            self._index = shared(self.path, "index", _open_indexes)
        return self._index

    def has_dwarf(self) -> bool:
        """Whether the file's own DWARF describes its code (``dwarfcover``; not a separate debug file).

        A library that only carries a few units of the toolchain's runtime
        (TensorFlow 2.16 to 2.20) has none in this sense.
        """
        if self._dwarf is None:
            self._dwarf = shared(self.path, "dwarf", _file_has_dwarf)
        return self._dwarf

    def dwarf_at(self, pc: int) -> bool:
        """Whether gdb would give a source line for the code at run-time address ``pc`` (the file's own DWARF)."""
        if not self.has_dwarf():
            return False
        return dwarfcover.cover(self.path).describes(pc - self.bias)

    def open_cfi(self) -> Any:
        return shared(self.path, "cfi", lambda path: Module.open_cfi(self))


def _open_indexes(path: str) -> List[ElfIndex]:
    out: List[ElfIndex] = []
    try:
        idx = ElfIndex.open(path)
    except (OSError, ElfError, ValueError):
        return out
    out.append(idx)
    if idx.table != ".symtab":
        # the one search rule (``debugfiles``): by build-id, and where that finds none, by the debuglink
        found = find_debug_files(path, idx.build_id)
        if not found:
            cov = dwarfcover.cover(path)
            if cov.debuglink_plausible:
                found = find_debug_files(path, None, cov.debuglink)
        for debug in found:
            try:
                out.insert(0, ElfIndex.open(debug))
                break
            except (OSError, ElfError, ValueError):
                pass
    return out


def _file_has_dwarf(path: str) -> bool:
    return dwarfcover.cover(path).describes_code


# What a file gives regardless of where it is mapped (its symbol index, its CFI with the rows found so
# far, whether it has DWARF), by (path, size, mtime, inode): the processes of one ``stack`` call, mapping
# the same libraries at other addresses, share it.  One lock: threads snapshotting processes at the same
# time open each file once.
_FILES: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
_FILES_LOCK = threading.Lock()


def shared(path: str, what: str, make: Callable[[str], Any]) -> Any:
    """``make(path)``, once per file and ``what``; an exception is raised again to every caller."""
    try:
        st = os.stat(path)
        key: Tuple[Any, ...] = (path, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
    except OSError:
        key = (path,)
    with _FILES_LOCK:
        entry = _FILES.setdefault(key, {})
        if what not in entry:
            try:
                entry[what] = (make(path), None)
            except Exception as exc:  # noqa: BLE001 - kept and raised again, as a fresh open would
                entry[what] = (None, exc)
        value, error = entry[what]
    if error is not None:
        raise error
    return value


class _Vdso(Library):
    """The vDSO: CFI and symbols from its image in the target's memory (``vdso.py``)."""

    def __init__(self, image: mmap.mmap, base: int) -> None:
        super().__init__(vdso.VDSO, base, [(base, base + vdso.code_size(image))])
        self._image = image
        self._dwarf = False

    def open_cfi(self) -> Any:
        return vdso.cfi(self._image)

    def indexes(self) -> List[ElfIndex]:
        if self._index is None:
            self._index = vdso.symbols(self._image)
        return self._index


class Anonymous(Library):
    """Executable memory no file backs (JIT code): no CFI, no symbols; named as the maps name it."""

    def __init__(self, name: str, ranges: List[Tuple[int, int]]) -> None:
        super().__init__(name, 0, ranges)
        self._index = []
        self._dwarf = False

    def open_cfi(self) -> Any:
        raise CfiError("no CFI in %s (JIT-generated code)" % self.name)


def anonymous_code(rows: List[procfs.Mapping]) -> List[Library]:
    """The executable mappings that no file backs, as one module per name (``[anon:jit]``)."""
    by_name: Dict[str, List[Tuple[int, int]]] = {}
    for m in rows:
        if "x" not in m.perms:
            continue
        label = m.path
        if label.startswith(("/dev/zero", "/memfd:")):  # shared anonymous memory (Python's mmap, memfd)
            label = ""
        elif label and not label.startswith("[anon:") or m.inode != 0:
            continue  # [vdso], [vsyscall], [stack], files: not JIT code
        by_name.setdefault(label or "[anon:jit]", []).append((m.start, m.end))
    return [Anonymous(name, ranges) for name, ranges in by_name.items()]


class Mappings:
    """The target's mappings, sorted: ``mappings(address)`` is the (start, end) of the one holding an
    address (None: none); ``starts`` and ``spans`` are there for a caller that looks up many addresses in
    a loop of its own (the hold's stack copy)."""

    def __init__(self, rows: List[procfs.Mapping]) -> None:
        self.spans = sorted((m.start, m.end) for m in rows)
        self.starts = [lo for lo, _ in self.spans]

    def __call__(self, addr: int) -> Optional[Tuple[int, int]]:
        k = bisect.bisect_right(self.starts, addr) - 1
        return self.spans[k] if k >= 0 and addr < self.spans[k][1] else None


def vdso_of(pid: int, memory: Memory) -> List[Library]:
    """The target's vDSO as a module (empty when it has none or it cannot be read)."""
    try:
        base = vdso.auxv_vdso_base(procfs.auxv(pid))
    except OSError:
        return []
    if base is None:
        return []
    image = vdso.image_of(memory.read, base)
    if image is None:
        return []
    key = (vdso.VDSO, base, bytes(image))
    lib = _KNOWN.get(key)
    if lib is None:
        lib = _KNOWN[key] = _Vdso(image, base)
    else:
        image.close()
    return [lib]


# Libraries already opened, by (path, inode, where mapped): a session's later
# stops reuse their symbol index, CFI and the FDEs parsed so far.
_KNOWN: Dict[Tuple[Any, ...], Library] = {}


def of_pid(pid: int, mappings: Optional[List[procfs.Mapping]] = None) -> List[Library]:
    """Each file mapped into ``pid`` with executable code: path, load bias, code ranges (``mappings``:
    its ``/proc/PID/maps`` where the caller has read it already)."""
    root = file_root(pid)
    if mappings is None:
        mappings = procfs.maps(pid)
    rows = [(root + m.path, m.start, m.end, m.offset, "x" in m.perms, str(m.inode)) for m in mappings
            if m.path.startswith("/") and not m.path.endswith(" (deleted)")]
    return modules_of(rows)


def file_root(pid: int) -> str:
    """``/proc/PID/root`` when ``pid`` lives in another mount namespace (a container), else ``""``.

    The paths ``pid`` sees (its maps, its executable) are read on this host
    under that prefix: the kernel resolves them in the target's own mounts.
    """
    return "/proc/%d/root" % pid if procfs.other_namespace(pid, "mnt") else ""


def modules_of(rows: List[Tuple[str, int, int, int, bool, str]]) -> List[Library]:
    """Libraries from file mappings (path on this host, start, end, file offset, executable, identity).

    The source of a snapshot (``/proc/PID/maps``, a core's ``NT_FILE``) gives
    the rows; a library is a file with executable code mapped at offset 0.
    """
    by_path: Dict[str, Dict[str, Any]] = {}
    for path, lo, hi, offset, executable, inode in rows:
        entry = by_path.setdefault(path, {"first": None, "ranges": [], "inode": inode})
        if offset == 0 and entry["first"] is None:
            entry["first"] = lo
        if executable:
            entry["ranges"].append((lo, hi))
    libs = []
    for path, e in by_path.items():
        if not e["ranges"] or e["first"] is None:
            continue
        key = (path, e["inode"], e["first"], tuple(e["ranges"]))
        lib = _KNOWN.get(key)
        if lib is None:
            lib = _KNOWN[key] = Library(path, e["first"] - _first_load_vaddr(path), e["ranges"])
        libs.append(lib)
    return libs


def segments(path: str) -> List[Tuple[int, int]]:
    """(p_type, p_vaddr) of each program header of an ELF file (empty if it is none or unreadable)."""
    try:
        with map_file(path) as mm:
            return [(seg[0], seg[3]) for seg in ElfFile(mm, path, sections=False).segments]
    except (OSError, ValueError, ElfError, struct.error):
        return []


def _first_load_vaddr(path: str) -> int:
    """The page-aligned vaddr of the first PT_LOAD (0 for shared libraries and PIEs; 0 if unreadable).

    Parsed (``elf.elf_header``, ``program_headers``) from the first page of the file, where every linker
    puts the ELF and program headers: a stack of a TF process opens some 150 files for it, and a read of one
    page costs less than a mapping; a table past the first page is read from the mapped file."""
    try:
        head = read_head(path, 4096)
        try:
            return first_load_vaddr(head, elf_header(head, path), path)
        except ElfTruncated:
            with map_file(path) as mm:
                return ElfFile(mm, path, sections=False).first_load_vaddr()
    except (OSError, ValueError, ElfError, struct.error):
        return 0
