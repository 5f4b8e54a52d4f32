"""Mixed stacks without gdb: unwind from CFI, read Python frames, name the frames.

``tfnative stack`` (``take``) holds the threads itself; at a breakpoint hit
(``of_stopped``) gdb holds them and gives their registers.  Starting gdb,
attaching and giving it CFI and symbols for TensorFlow's libraries costs
more than everything a stack needs, read directly (README, "Speed and memory"):

* the threads are held with ptrace (``ptrace.py``): registers of each, and
  ``/proc/PID/mem`` for the rest;
* each thread is unwound from ``.eh_frame`` through ``.eh_frame_hdr``
  (``cfi.py``), a binary search per frame instead of gdb's parse of the whole
  ``.eh_frame`` of ``libtensorflow_cc.so.2``;
* the Python frames come from the same reader gdb runs
  (``tfnative.core.pyframes``), merged the same way (``tfnative.core.mixed``);
* frames are named from the cached symbol index (``elfindex.py``), with the
  separate debug file (``/usr/lib/debug/.build-id``) where a library is
  stripped, and kernel frames get their op (``tfnative.core.opkernel``).

The result is a ``model.Capture``, as ``-tfnative-capture``'s, so the report is
the same.  What this path does not do, it refuses with ``Unsupported``, and the
caller asks gdb instead:

* a frame without CFI whose caller cannot be recovered (``jit.py`` finds
  it by frame pointer or stack scan and marks it; the vDSO's CFI is read from
  its image, ``vdso.py``; a thread caught just after ``clone3`` ends there);
* a frame in a library that carries its own DWARF (a debug build of
  TensorFlow from ``build/``): there the user wants gdb's source lines and
  inlined frames.  The interpreter and its lib-dynload modules are the
  exception: their frames are shown as Python frames, or hidden as glue.

Source lines and inlined frames from separate debug files (``libc6-dbg``) are
left out: frames there are named from the debug file's symbols.
"""

from __future__ import annotations

import bisect
import errno
import mmap
import os
import re
import struct
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from .core import kstate, procfs, vdso
from .core.cfi import DWARF_REGS, CfiError, Frame, Module, Unwinder
from .core.elfindex import ElfError, ElfFile, ElfIndex, data_symbols, display_names
from .core.executors import pool_summary
from .core.model import Capture, NativeFrame
from .core.opkernel import OpKernelReader, inherit_device_ops, op_frames, op_of_frame
from .core.pyframes import NO_RUNTIME, PythonReader, open_reader
from .core.threads import SIGNAL_FRAME, PythonThreads, namespace_tids, select_threads, thread_entry, unwound
from .sources.ptrace import Frozen, Memory, PtraceRefused, Unsupported

__all__ = ["HasDebugInfo", "Unsupported", "of_stopped", "stacks", "take"]


class HasDebugInfo(Unsupported):
    """A library on a stack has its own DWARF: gdb gives its source lines and inlined frames."""

MAX_NATIVE_FRAMES = 1 << 16  # a bound on the walk: more than an 8 MiB stack of small frames holds
DEBUG_ROOT = "/usr/lib/debug/.build-id"
PY_SYMBOLS = ("_PyRuntime", "Py_Version", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type")


class _Lib(Module):
    """A mapped file with what naming its frames needs (opened on first use)."""

    def __init__(self, path: str, bias: int, ranges: List[Tuple[int, int]]) -> None:
        super().__init__(path, bias, ranges)
        self.name = os.path.basename(path)
        self._index: Optional[List[ElfIndex]] = None
        self._dwarf: Optional[bool] = None

    def indexes(self) -> List[ElfIndex]:
        """The symbol index of the file, then of its separate debug file when the file is stripped."""
        if self._index is None:
            self._index = _shared(self.path, "index", _open_indexes)
        return self._index

    def has_dwarf(self) -> bool:
        """Whether the file itself carries DWARF (not counting a separate debug file)."""
        if self._dwarf is None:
            self._dwarf = _shared(self.path, "dwarf", _file_has_dwarf)
        return self._dwarf

    def open_cfi(self) -> Any:
        return _shared(self.path, "cfi", lambda path: Module.open_cfi(self))


def _open_indexes(path: str) -> List[ElfIndex]:
    out: List[ElfIndex] = []
    try:
        idx = ElfIndex.open(path)
    except (OSError, ElfError, ValueError):
        return out
    out.append(idx)
    if idx.table != ".symtab" and idx.build_id:
        debug = os.path.join(DEBUG_ROOT, idx.build_id[:2], idx.build_id[2:] + ".debug")
        if os.path.exists(debug):
            try:
                out.insert(0, ElfIndex.open(debug))
            except (OSError, ElfError, ValueError):
                pass
    return out


def _file_has_dwarf(path: str) -> bool:
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            sec = ElfFile(mm, path).section(".debug_info")
            return sec is not None and sec.size > 0 and sec.type != 8
    except (OSError, ElfError, ValueError):
        return False


# What a file gives regardless of where it is mapped (its symbol index, its CFI with the rows found so
# far, whether it has DWARF), by (path, size, mtime, inode): the processes of one ``stack`` call, mapping
# the same libraries at other addresses, share it.  One lock: threads snapshotting processes at the same
# time open each file once.
_FILES: Dict[tuple, Dict[str, Any]] = {}
_FILES_LOCK = threading.Lock()
# One process held at a time: threads that snapshot several processes share the GIL, so holds that
# overlap would each last as long as all of them; the rest of a snapshot (its /proc reads, the report,
# the waits between samples, gdb) runs concurrently.
_HOLD = threading.Lock()


def _shared(path: str, what: str, make: Callable[[str], Any]) -> Any:
    """``make(path)``, once per file and ``what``; an exception is raised again to every caller."""
    try:
        st = os.stat(path)
        key: tuple = (path, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
    except OSError:
        key = (path,)
    with _FILES_LOCK:
        entry = _FILES.setdefault(key, {})
        if what not in entry:
            try:
                entry[what] = (make(path), None)
            except Exception as exc:  # noqa: BLE001 - kept and raised again, as a fresh open would
                entry[what] = (None, exc)
        value, exc = entry[what]
    if exc is not None:
        raise exc
    return value


class _Vdso(_Lib):
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


class _Anon(_Lib):
    """Executable memory no file backs (JIT code): no CFI, no symbols; named as the maps name it."""

    def __init__(self, name: str, ranges: List[Tuple[int, int]]) -> None:
        super().__init__(name, 0, ranges)
        self._index = []
        self._dwarf = False

    def open_cfi(self) -> Any:
        raise CfiError("no CFI in %s (JIT-generated code)" % self.name)


def _anonymous_code(rows: List[procfs.Mapping]) -> List[_Lib]:
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
    return [_Anon(name, ranges) for name, ranges in by_name.items()]


def _mapping_of(rows: List[procfs.Mapping]) -> Callable[[int], Optional[Tuple[int, int]]]:
    """``mapping(address)``: the (start, end) of the mapping holding an address (None: none)."""
    spans = sorted((m.start, m.end) for m in rows)
    los = [lo for lo, _ in spans]

    def mapping(addr: int) -> Optional[Tuple[int, int]]:
        k = bisect.bisect_right(los, addr) - 1
        return spans[k] if k >= 0 and addr < spans[k][1] else None

    return mapping


def _vdso(pid: int, memory: Memory) -> List[_Lib]:
    """The target's vDSO as a module (empty when it has none or it cannot be read)."""
    try:
        with open("/proc/%d/auxv" % pid, "rb") as f:
            base = vdso.auxv_vdso_base(f.read())
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
_KNOWN: Dict[tuple, _Lib] = {}


def _modules(pid: int) -> List[_Lib]:
    """Each file mapped into ``pid`` with executable code: path, load bias, code ranges."""
    rows = []
    root = file_root(pid)
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].startswith("/"):
                continue
            path = parts[5].rstrip("\n")
            if path.endswith(" (deleted)"):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            rows.append((root + path, lo, hi, int(parts[2], 16), "x" in parts[1], parts[4]))
    return modules_of(rows)


def file_root(pid: int) -> str:
    """``/proc/PID/root`` when ``pid`` lives in another mount namespace (a container), else ``""``.

    The paths ``pid`` sees (its maps, its executable) are read on this host
    under that prefix: the kernel resolves them in the target's own mounts.
    """
    try:
        if os.readlink("/proc/%d/ns/mnt" % pid) != os.readlink("/proc/self/ns/mnt"):
            return "/proc/%d/root" % pid
    except OSError:
        pass
    return ""


def modules_of(rows: List[Tuple[str, int, int, int, bool, str]]) -> List[_Lib]:
    """Libraries from file mappings (path on this host, start, end, file offset, executable, identity).

    The source of a snapshot (``/proc/PID/maps``, a core's ``NT_FILE``) gives
    the rows; a library is a file with executable code mapped at offset 0.
    """
    by_path: Dict[str, dict] = {}
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
            lib = _KNOWN[key] = _Lib(path, e["first"] - _first_load_vaddr(path), e["ranges"])
        libs.append(lib)
    return libs


def _segments(path: str) -> List[Tuple[int, int]]:
    """(p_type, p_vaddr) of each program header of an ELF file (empty if it is none or unreadable)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return [(seg[0], seg[3]) for seg in ElfFile(mm, path, sections=False).segments]
    except (OSError, ValueError, ElfError, struct.error):
        return []


def _first_load_vaddr(path: str) -> int:
    """The page-aligned vaddr of the first PT_LOAD (0 for shared libraries and PIEs)."""
    return next((vaddr & ~0xFFF for p_type, vaddr in _segments(path) if p_type == 1), 0)


def _link_map_names(memory: Memory, libs: List[_Lib], pid: int, exe: Optional[str] = None) -> None:
    """Name each library as the dynamic loader (and gdb) does: by its ``link_map`` path.

    ``/proc/PID/maps`` shows the file behind the link (``libstdc++.so.6.0.30``);
    the loader's list has the name it was loaded by (``libstdc++.so.6``).  The
    list is found through the executable's ``DT_DEBUG`` entry (``r_debug``).
    """
    try:
        exe = exe or file_root(pid) + os.path.realpath("/proc/%d/exe" % pid)
    except OSError:
        return
    main = next((lib for lib in libs if lib.path == exe), None)
    if main is None:
        return
    try:
        dynamic = next(vaddr for p_type, vaddr in _segments(exe) if p_type == 2)  # PT_DYNAMIC
        addr = dynamic + main.bias
        r_debug = 0
        for _ in range(512):
            tag, value = struct.unpack("<qQ", memory.read(addr, 16))
            if tag == 0:
                break
            if tag == 21:  # DT_DEBUG
                r_debug = value
                break
            addr += 16
        if not r_debug:
            return
        by_bias = {lib.bias: lib for lib in libs}
        link = struct.unpack("<Q", memory.read(r_debug + 8, 8))[0]
        for _ in range(4096):
            if not link:
                break
            l_addr, l_name, _l_ld, l_next = struct.unpack("<QQQQ", memory.read(link, 32))
            lib = by_bias.get(l_addr)
            if lib is not None and l_name and lib is not main:
                raw = memory.read(l_name, 512)
                name = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
                if name:
                    lib.name = os.path.basename(name)
            link = l_next
    except (OSError, MemoryError, StopIteration, struct.error):
        return


def _python_reader(memory: Memory, libs: List[_Lib], warnings: List[str]) -> Optional[PythonReader]:
    """The reader of the interpreter whose file (executable or libpython) defines ``_PyRuntime``."""
    for lib in libs:
        if not re.match(r"(lib)?python\d", lib.name):
            continue
        try:
            syms = _shared(lib.path, "pysyms", lambda path: data_symbols(path, PY_SYMBOLS))
        except (OSError, ElfError, ValueError):
            continue
        if "_PyRuntime" not in syms:
            continue
        at = {k: v + lib.bias for k, v in syms.items()}
        reader, why = open_reader(memory, at.get, lambda _addr, lib=lib: lib.name)
        if reader is None:
            warnings.append(why)
        return reader
    warnings.append(NO_RUNTIME)
    return None


def _is_interpreter(lib: _Lib) -> bool:
    """The python executable, libpython, or one of the interpreter's own extension modules.

    Their frames are shown as Python frames or hidden as glue, so their DWARF
    (pyenv builds everything with -g) is no reason to ask gdb.
    """
    return bool(re.match(r"(lib)?python\d", lib.name)) or "/lib-dynload/" in lib.path


def _native_frames(frames: List[Frame]) -> List[NativeFrame]:
    out = []
    for level, fr in enumerate(frames):
        lib: Optional[_Lib] = fr.module  # type: ignore[assignment]
        out.append(NativeFrame(function="??", library=lib.name if lib else None, address="0x%016x" % fr.pc,
                               level=level, recovered=fr.recovered or None))
    return out


def _name_frames(threads: List[Tuple[List[Frame], List[NativeFrame]]]) -> None:
    """Name every native frame from the symbol indexes (one demangling pass for all)."""
    todo: List[Tuple[NativeFrame, str]] = []
    for frames, named in threads:
        for level, (fr, d) in enumerate(zip(frames, named)):
            lib: Optional[_Lib] = fr.module  # type: ignore[assignment]
            if fr.signal:
                d.function = SIGNAL_FRAME  # as gdb names it
                continue
            if lib is None:
                continue
            # A caller's pc is a return address: name the call, which may be a
            # function's last instruction (a call to a noreturn function).
            look = fr.pc - (1 if level and not frames[level - 1].signal else 0)
            for idx in lib.indexes():
                hit = idx.symbolize(look - lib.bias)
                if hit is not None:
                    d.start = look - hit[1]
                    todo.append((d, hit[0]))
                    break
    for (d, _), name in zip(todo, display_names([m for _, m in todo])):
        d.function = name


def _ops(memory: Memory, frames: List[Frame], named: List[NativeFrame], kernels: OpKernelReader) -> None:
    for d, device in op_frames(named):
        level = d.level or 0
        regs = _named(frames[level].regs)
        caller = _named(frames[level + 1].regs) if level + 1 < len(frames) else {}
        high = 0
        for k in (level + 2, level + 1):
            if not high and k < len(frames):
                high = frames[k].regs.get(7, 0)
        op = op_of_frame(kernels, d.start or 0, frames[level].pc, level, regs, caller,
                         regs.get("rsp") or 0, high, device=device)
        if op:
            d.op = op
    inherit_device_ops(named)


def _named(regs: Dict[int, int]) -> Dict[str, int]:
    return {DWARF_REGS[i]: v for i, v in regs.items() if i < len(DWARF_REGS)}


def take(pid: int, which: str = "python", variables: bool = False) -> Capture:
    """The mixed stacks of ``pid``'s threads (``which``: "python" or "all"), as ``-tfnative-capture``.

    The threads are held with ptrace while they are read.  Raises
    ``Unsupported`` (the caller uses gdb) when any thread cannot be unwound
    from CFI alone or runs in a library with its own DWARF.
    """
    try:
        memory = Memory(pid, cache=True)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise PtraceRefused("open /proc/%d/mem: %s" % (pid, exc.strerror)) from None
        raise Unsupported("cannot open /proc/%d/mem: %s" % (pid, exc.strerror)) from None
    try:
        libs = _modules(pid)
        letters = kstate.states(pid)  # before the hold, which makes every thread "t"
        with _HOLD, Frozen(pid) as frozen:
            threads = [(tid, frozen.thread_name(tid), frozen.regs[tid]) for tid in frozen.tids]
            result = stacks(pid, memory, libs, threads, which, variables=variables)
    finally:
        memory.close()
    kstate.annotate(result.threads, letters, {tid: regs for tid, _name, regs in threads})
    return result


def of_stopped(pid: int, threads: List[Tuple[int, str, Dict[str, int]]], which: str,
               selected: Optional[int] = None, variables: bool = False) -> Capture:
    """The same, for a process that gdb holds stopped: gdb gives the registers, we do the rest.

    ``threads``: (tid, name, registers) of each thread; ``which`` may also be
    "selected" (only ``selected``, the thread that stopped).
    """
    try:
        memory = Memory(pid, cache=True)
    except OSError as exc:
        raise Unsupported("cannot open /proc/%d/mem: %s" % (pid, exc.strerror)) from None
    try:
        result = stacks(pid, memory, _modules(pid), threads, which, selected, variables=variables)
    finally:
        memory.close()
    if selected is not None:
        result.selected_tid = selected
    return result


def stacks(pid: int, memory: Memory, libs: List[_Lib], threads: List[Tuple[int, str, Dict[str, int]]],
           which: str, selected: Optional[int] = None, exe: Optional[str] = None,
           live: bool = True, variables: bool = False) -> Capture:
    """Mixed stacks of stopped threads from their registers and the process's memory.

    ``memory`` is any source with ``read(addr, size)`` raising ``MemoryError``
    (``/proc/PID/mem``, a core); ``exe``: the executable's path on this host
    (default: ``/proc/PID/exe``); ``live``: ``pid`` is a running process whose
    ``/proc`` entries (maps, auxv) may be read (False for a core: then
    ``memory.mapping_of(addr)``, where the source has it, gives the mappings);
    ``variables``: read each Python frame's arguments and locals (``--locals``).
    """
    result = Capture(pid=pid, via="cfi")
    _link_map_names(memory, libs, pid, exe)
    rows: List[procfs.Mapping] = []
    if live:
        try:
            rows = procfs.maps(pid)
        except OSError:
            rows = []
        libs = libs + _vdso(pid, memory) + _anonymous_code(rows)
    mapping = _mapping_of(rows) if live else getattr(memory, "mapping_of", _mapping_of(rows))
    unwinder = Unwinder(libs, memory.read, mapping)  # type: ignore[arg-type]
    reader = _python_reader(memory, libs, result.warnings)
    if reader is not None:
        reader.want_variables = variables
    inner = namespace_tids(pid) if live else {}  # a process in another PID namespace (a container)
    if inner:
        result.ns_pid = inner.get(pid)
    pythreads = PythonThreads(reader, result, inner)
    found = []
    for tid, name, regs in threads:
        if which == "selected" and tid != selected:
            continue
        py = pythreads.find(tid, lambda regs=regs: regs.get("fs_base"))
        if pythreads.states and not unwound(which, py is not None, name):
            continue
        cut = None
        try:
            frames = unwinder.unwind(regs, MAX_NATIVE_FRAMES)
        except CfiError as exc:
            if live or py is None:
                raise Unsupported("thread %d: %s" % (tid, exc)) from None
            # a core lacking memory or files: the innermost frame and the Python frames still count
            frames = getattr(exc, "frames", None) or unwinder.unwind(regs, 1)
            cut = "native unwinding stopped at the last frame shown: %s" % exc
        for fr in frames:
            lib = fr.module
            if lib is not None and not _is_interpreter(lib) and lib.has_dwarf():
                raise HasDebugInfo("%s has debug info: gdb gives its source lines" % lib.path)
        found.append((tid, name, frames, _native_frames(frames), py, cut))
    _name_frames([(s[2], s[3]) for s in found])
    kernels = OpKernelReader(memory)
    for tid, name, frames, named, py, cut in found:
        _ops(memory, frames, named, kernels)
        thread = thread_entry(tid, name, named, reader, py)
        if len(frames) >= MAX_NATIVE_FRAMES:
            cut = "native unwinding stopped after %d frames (the limit)" % MAX_NATIVE_FRAMES
        if tid in inner:
            thread.ns_tid = inner[tid]
        if cut and thread.merge == "mismatch":  # no eval-loop frames to put them in: after #0
            thread.frames = thread.frames + (thread.python_frames or [])
            thread.merge, thread.python_frames, thread.merge_detail = "partial", None, None
        if cut:
            thread.error = "%s; %s" % (thread.error, cut) if thread.error else cut
        result.threads.append(thread)
    if which != "selected":
        result.pool = pool_summary(result.threads)
    result.threads = select_threads(result.threads, which)
    return result
