"""Capture mixed stacks inside gdb: native unwind + Python frames, merged.

This is the one place where gdb is asked for frames.  ``capture()`` returns a
``model.Capture``; ``-tfnative-capture`` (MI) sends its JSON, ``tf-bt`` (CLI)
prints it.
"""

from __future__ import annotations

import copy
import os
import re
from contextlib import contextmanager
from functools import partial
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import gdb

from tfnative.core import procfs
from tfnative.core.binary import dwarfcover
from tfnative.core.binary.cxxnames import display_names
from tfnative.core.binary.debugfiles import DEBUG_DIR, find_debug_file
from tfnative.core.binary.elf import ElfError
from tfnative.core.binary.libfacts import links_tensorflow
from tfnative.core.binary.loadbase import load_base
from tfnative.core.binary.symindex import ElfIndex
from tfnative.core.frameclass import library_class
from tfnative.core.memory import USER_SPACE_END, Memory
from tfnative.core.model import Capture, NativeFrame, Op, Thread
from tfnative.core.python.pyframes import PythonReader, open_reader
from tfnative.core.tensorflow.executors import pool_summary, unnamed_workers
from tfnative.core.tensorflow.opdefs import op_with_inputs
from tfnative.core.tensorflow.opkernel import CALLEE_SAVED, FrameContext, OpKernelReader, inherit_device_ops, op_frames
from tfnative.core.tensorflow.threadnames import thread_names
from tfnative.core.threads import (
    SIGNAL_FRAME,
    PythonThreads,
    Threads,
    namespace_tids,
    select_threads,
    thread_entry,
    unwound,
)

MAX_NATIVE_FRAMES = 1 << 16  # as tfnative/snapshot/pipeline.py


class GdbMemory(Memory):
    """The target's memory as gdb's inferior gives it (``core.memory.Memory``)."""

    def __init__(self, inferior: gdb.Inferior) -> None:
        self.inferior = inferior

    def read(self, addr: int, size: int) -> bytes:
        if addr <= 0 or addr >= USER_SPACE_END:
            raise MemoryError("bad address 0x%x" % addr)
        try:
            data: bytes = self.inferior.read_memory(addr, size).tobytes()
        except gdb.error as exc:  # gdb.MemoryError is a gdb.error
            raise MemoryError(str(exc)) from None
        return data


def symbol_address(name: str) -> Optional[int]:
    """Address of a (minimal) symbol; works with .dynsym alone."""
    try:
        return int(gdb.parse_and_eval("(unsigned long)&'%s'" % name))
    except gdb.error:
        return None


def _objfile_name_for(addr: int) -> str:
    try:
        lib = gdb.solib_name(addr)
    except gdb.error:
        lib = None
    return lib or gdb.current_progspace().filename or ""


def _interpreter_debug_files() -> None:
    """Give gdb the separate debug file of a stripped interpreter (``python3.X``, ``libpython3.X``) that
    keeps it under its own prefix (``debugfiles``), where gdb's ``debug-file-directory`` does not look:
    its static functions (``_PyEval_EvalFrameDefault.cold``, where GCC puts the eval loop's calls) are
    then named, and the merge finds the eval frames.  Once per objfile; a failure only leaves it as is."""
    for objfile in gdb.objfiles():
        name = os.path.basename(objfile.filename or "")
        if not re.match(r"(lib)?python3\.\d+", name) or objfile.filename in _DEBUG_TRIED:
            continue
        _DEBUG_TRIED.add(objfile.filename)
        build_id = getattr(objfile, "build_id", None)
        if getattr(objfile, "owner", None) is not None:
            continue
        if any(o.owner is objfile for o in gdb.objfiles() if getattr(o, "owner", None) is not None):
            continue  # gdb found one itself
        cov = dwarfcover.cover(objfile.filename)  # its debuglink, read as doctor and stack read it
        debug = find_debug_file(objfile.filename, build_id, cov.debuglink if cov.debuglink_plausible else None)
        if debug and not debug.startswith(DEBUG_DIR + "/"):
            try:
                objfile.add_separate_debug_file(debug)
            except gdb.error:
                pass


_DEBUG_TRIED: Set[str] = set()


def python_reader(inferior: Optional[gdb.Inferior] = None) -> Tuple[Optional[PythonReader], Optional[str]]:
    """A PythonReader for the target, or (None, reason)."""
    inferior = inferior or gdb.selected_inferior()
    _interpreter_debug_files()
    return open_reader(GdbMemory(inferior), symbol_address, _objfile_name_for)


_PATHS: Dict[str, str] = {}  # a frame's library's name -> its path, as gdb names it


def _library(pc: int) -> Optional[str]:
    try:
        lib = gdb.solib_name(pc)
    except gdb.error:
        lib = None
    if lib is None:
        lib = gdb.current_progspace().filename
    if not lib:
        return None
    path = str(lib)
    if not path.startswith("/"):
        path = _absolute(pc, path)
    name = os.path.basename(path)
    _PATHS[name] = path
    return name


def _absolute(pc: int, path: str) -> str:
    """A library's path as the program named it to dlopen (``./zero_out.so``, relative to its directory
    then), made absolute: gdb's file for the address, else the path under the live process's cwd."""
    try:
        objfile = gdb.current_progspace().objfile_for_address(pc)
        if objfile is not None and objfile.filename and objfile.filename.startswith("/"):
            return str(objfile.filename)
    except (AttributeError, gdb.error):  # gdb before 13 has no objfile_for_address
        pass
    try:
        pid = gdb.selected_inferior().pid
        return os.path.normpath(os.path.join(os.readlink("/proc/%d/cwd" % pid), path)) if pid else path
    except (OSError, gdb.error):
        return path


def _libraries(threads: List[Thread]) -> Dict[str, str]:
    """The path of each library on the frames of ``threads`` (the capture's ``libraries``)."""
    names = {f.library for t in threads for f in t.frames if isinstance(f, NativeFrame) and f.library}
    return {n: _PATHS[n] for n in sorted(names) if n in _PATHS}


MAX_VARIABLES = 32  # a native frame's arguments and locals shown (--locals)
MAX_VALUE = 200  # characters of each value
_USERS: Dict[str, bool] = {}  # a library's path -> whether it is the user's own (frameclass.library_class)


def _is_users(path: Optional[str]) -> bool:
    if not path:
        return False
    if path not in _USERS:
        _USERS[path] = library_class(path, partial(links_tensorflow, path)) == "user"
    return _USERS[path]


def frame_variables(frame: gdb.Frame) -> List[Dict[str, Any]]:
    """A native frame's arguments, then its locals, as gdb reads them from DWARF (``--locals`` on the
    frames of the user's own libraries): ``{"name", "repr", "arg"}`` each, at most ``MAX_VARIABLES``, each
    value printed shallow (gdb's ``format_string``: 8 elements, 2 levels) and cut to ``MAX_VALUE``."""
    try:
        block: Optional[gdb.Block] = frame.block()
    except (RuntimeError, gdb.error):
        return []
    out: List[Dict[str, Any]] = []
    seen: Set[str] = set()
    while block is not None and len(out) < MAX_VARIABLES:
        for sym in block:
            if not (sym.is_argument or sym.is_variable) or sym.name in seen or len(out) >= MAX_VARIABLES:
                continue
            seen.add(sym.name)
            try:
                text = sym.value(frame).format_string(max_elements=8, max_depth=2, repeat_threshold=10)
            except (gdb.error, RuntimeError, TypeError, ValueError) as exc:
                text = "<unreadable: %s>" % exc
            text = " ".join(text.split())
            out.append({"name": sym.name, "repr": text[:MAX_VALUE - 3] + "..." if len(text) > MAX_VALUE else text,
                        "arg": bool(sym.is_argument)})
        if block.function is not None:
            break  # the function's own block: its arguments; the blocks above are the file's
        block = block.superblock
    return sorted(out, key=lambda v: not v["arg"])


def native_frames(limit: int = MAX_NATIVE_FRAMES, stack: Optional[List[Optional[int]]] = None,
                  variables: bool = False) -> Tuple[List[NativeFrame], Optional[str]]:
    """The selected thread's frames, innermost first; ``stack`` (a list) gets each one's stack pointer;
    ``variables``: a frame of the user's own code with DWARF gets its arguments and locals."""
    frames: List[NativeFrame] = []
    error: Optional[str] = None
    try:
        f = gdb.newest_frame()
    except gdb.error as exc:
        return frames, str(exc)
    level = 0
    while f is not None and len(frames) < limit:
        pc = f.pc()
        if pc == 0 and frames:
            break  # gdb's "frame" at address 0 below a thread's first one (clone3): the stack ends there
        entry = NativeFrame(function=f.name() or "??", library=_library(pc), address="0x%016x" % pc, level=level)
        level += 1
        if f.type() == gdb.SIGTRAMP_FRAME:
            entry.function = SIGNAL_FRAME
        elif f.type() == gdb.INLINE_FRAME:
            entry.inline = True
        elif f.type() == gdb.TAILCALL_FRAME:
            # not on the stack: gdb infers the function that tail-called the
            # next frame from DWARF call-site information
            entry.tailcall = True
        try:
            sal = f.find_sal()
            if sal.symtab is not None and sal.line:
                entry.file = sal.symtab.fullname() or sal.symtab.filename
                entry.line = sal.line
        except gdb.error:
            pass
        if variables and entry.file and _is_users(_PATHS.get(entry.library or "")):
            entry.variables = frame_variables(f) or None
        frames.append(entry)
        if stack is not None:
            try:
                stack.append(int(f.read_register("rsp")))
            except (gdb.error, ValueError):
                stack.append(None)
        try:
            f = f.older()
        except gdb.error as exc:
            error = "unwinding stopped: %s" % exc
            break
    return frames, error


def _pthread_id(thread: gdb.InferiorThread) -> Optional[int]:
    try:
        handle = thread.handle()
        return int.from_bytes(handle, "little")
    except Exception:
        try:
            return int(gdb.parse_and_eval("$fs_base"))
        except gdb.error:
            return None


@contextmanager
def _selection_kept() -> Iterator[Optional[gdb.InferiorThread]]:
    """Switch threads freely inside: the thread and frame selected before are selected again after."""
    original = gdb.selected_thread()
    try:
        original_frame = gdb.selected_frame()
    except gdb.error:
        original_frame = None
    try:
        yield original
    finally:
        if original is not None and original.is_valid():
            original.switch()
            if original_frame is not None and original_frame.is_valid():
                original_frame.select()


def frame_registers(frame: Optional[gdb.Frame], names: Tuple[str, ...]) -> Dict[str, int]:
    """The registers ``names`` as gdb unwinds them for ``frame`` (unreadable ones left out; none for None)."""
    if frame is None:
        return {}
    values = {r: register_value(frame, r) for r in names}
    return {r: v for r, v in values.items() if v is not None}


def capture(which: Threads = Threads.SELECTED, tids: Optional[List[int]] = None, variables: bool = False) -> Capture:
    """Mixed stacks of ``which`` threads."""
    inferior = gdb.selected_inferior()
    result = Capture(pid=inferior.pid)
    reader, why = python_reader(inferior)
    if why is not None:  # no reader, and why not
        result.warnings.append(why)
    if reader is not None:
        reader.want_variables = variables
    connection = getattr(inferior, "connection", None)
    live = inferior.pid and (connection is None or connection.type == "native")  # a core's pid is not ours
    inner = namespace_tids(inferior.pid) if live else {}
    if inner:
        result.ns_pid = inner.get(inferior.pid)
    pythreads = PythonThreads(reader, result, inner)

    with _selection_kept() as original:
        threads = _threads(inferior, which, original, result)
        if which is Threads.PYTHON and pythreads.states:
            # Unwind only the threads that have a Python thread state (and those that may be
            # TensorFlow's pool workers): the others would be filtered out anyway, and unwinding
            # them is most of the cost.
            main_name = next((t.name or "" for t in inferior.threads() if t.ptid[1] == inferior.pid), None)
            threads = [t for t in threads if unwound(which, pythreads.find(t.ptid[1], partial(_pthread_id, t))
                                                     is not None, t.name or "", main_name)]
        if tids:
            threads = [t for t in threads if t.ptid[1] in tids]
        out = []
        for th in threads:
            th.switch()
            lwp = th.ptid[1]
            py = pythreads.find(lwp, partial(_pthread_id, th))
            stack: List[Optional[int]] = []
            native, err = native_frames(stack=stack, variables=variables)
            entry = thread_entry(lwp, th.name or "", native, reader, py, stack)
            entry.gdb_thread = th.num
            if lwp in inner:
                entry.ns_tid = inner[lwp]
            if err:
                entry.error = (entry.error + "; " if entry.error else "") + err
            out.append(entry)
    if which is Threads.SELECTED:
        result.threads = select_threads(out, which)
        result.libraries = _libraries(result.threads)
        return result
    # The pools are told apart by their frames: those in libraries gdb only has a surrogate for (TensorFlow's)
    # are named from tfnative's index first (as the report names them afterwards, gdb/symbols.py's symbolize).
    maps = _LiveMaps(inferior.pid) if live else None
    seen = [_named_copy(t, maps) for t in out] if maps is not None else out
    tf_names = (thread_names(_InferiorRegistry(inferior, maps), {t.ptid[1]: _pthread_id(t) for t in threads})
                if unnamed_workers(seen) else None)  # core/tensorflow/threadnames.py
    result.pool = pool_summary(seen, tf_names)
    keep = [t.tid for t in select_threads(seen, which)]
    by_tid = {t.tid: t for t in out}
    result.threads = [by_tid[tid] for tid in keep]
    result.libraries = _libraries(result.threads)
    return result


class _LiveMaps:
    """A live target's mapped files (``/proc/PID/maps``): which file an address is in, its load bias, and
    tfnative's symbol index of it (the cached one gdb/symbols.py made), each opened once."""

    def __init__(self, pid: int) -> None:
        try:
            self.rows = [(m[0], m[1], m[6]) for m in procfs.maps(pid) if m[6].startswith("/")]
        except OSError:
            self.rows = []
        self.pid = pid
        self.bias: Dict[str, Optional[int]] = {}
        self.index: Dict[str, Optional[ElfIndex]] = {}

    def path_of(self, addr: int) -> Optional[str]:
        return next((path for lo, hi, path in self.rows if lo <= addr < hi), None)

    def bias_of(self, path: str) -> Optional[int]:
        if path not in self.bias:
            try:
                self.bias[path] = load_base(self.pid, path)
            except (OSError, LookupError, ElfError):
                self.bias[path] = None
        return self.bias[path]

    def name_of(self, addr: int) -> Optional[str]:
        path = self.path_of(addr)
        bias = self.bias_of(path) if path else None
        if path is None or bias is None:
            return None
        if path not in self.index:
            try:
                self.index[path] = ElfIndex.open(path)
            except (OSError, ElfError, ValueError):
                self.index[path] = None
        idx = self.index[path]
        hit = idx.symbolize(addr - bias) if idx is not None else None
        return display_names([hit[0]])[0] if hit else None


def _named_copy(thread: Thread, maps: _LiveMaps) -> Thread:
    """``thread`` with its frames that gdb could not name named from the index (a shallow copy; the capture's
    own frames are left as gdb gave them)."""
    if not any((f.function or "??") == "??" for f in thread.frames if isinstance(f, NativeFrame)):
        return thread
    frames = []
    for f in thread.frames:
        if isinstance(f, NativeFrame) and (f.function or "??") == "??" and f.address:
            name = maps.name_of(int(f.address, 16))
            if name:
                f = copy.copy(f)
                f.function = name
        frames.append(f)
    named = copy.copy(thread)
    named.frames = frames
    return named


class _InferiorRegistry(GdbMemory):
    """The inferior as ``core/tensorflow/threadnames.py`` reads it: its memory, the files gdb loaded and the process
    maps (their biases from the maps), and gdb's own symbol addresses."""

    def __init__(self, inferior: gdb.Inferior, maps: Optional[_LiveMaps]) -> None:
        super().__init__(inferior)
        self.maps = maps

    def files(self) -> Set[str]:
        paths = {objfile.filename or "" for objfile in gdb.objfiles()}
        if self.maps is not None:
            paths |= {path for _lo, _hi, path in self.maps.rows}
        return paths

    def bias(self, path: str) -> Optional[int]:
        return self.maps.bias_of(path) if self.maps is not None else None

    def symbol_address(self, name: str) -> Optional[int]:
        return symbol_address(name)


def each_thread() -> Iterator[gdb.InferiorThread]:
    """Every thread of the selected inferior in gdb's order, each selected in turn (the selection restored
    once the iteration ends)."""
    with _selection_kept() as original:
        for th in _threads(gdb.selected_inferior(), Threads.ALL, original, None):
            th.switch()
            yield th


def _threads(inferior: gdb.Inferior, which: Threads, original: Optional[gdb.InferiorThread],
             result: Optional[Capture]) -> List[gdb.InferiorThread]:
    """The threads to look at, in gdb's order (only the user's selected one for ``SELECTED``).

    Notes the selected thread's LWP in ``result`` (``selected_tid``), where one is given.
    """
    if original is not None and result is not None:
        result.selected_tid = original.ptid[1]
    if which is Threads.SELECTED and original is not None:
        return [original]
    return sorted(inferior.threads(), key=lambda t: t.num)


# ``orig_rax``: the system call a thread is in (its first argument in ``rdi``): the lock or child it waits for.
REGISTERS = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
             "r14", "r15", "rip", "fs_base", "orig_rax")


def registers(which: Threads = Threads.SELECTED) -> Dict[str, Any]:
    """Each thread's registers in its newest frame (for tfnative's own unwinder, ``tfnative/snapshot/pipeline.py``)."""
    inferior = gdb.selected_inferior()
    result: Dict[str, Any] = {"pid": inferior.pid, "threads": []}
    with _selection_kept() as original:
        if original is not None:
            result["selected_tid"] = original.ptid[1]
        for th in _threads(inferior, which, original, None):
            th.switch()
            result["threads"].append({"tid": th.ptid[1], "name": th.name or "",
                                      "regs": frame_registers(gdb.newest_frame(), REGISTERS)})
    return result


def _function_start(frame: gdb.Frame) -> Optional[int]:
    """Entry address of the function a frame runs, from gdb's symbols (full or minimal)."""
    try:
        block = frame.block()
        while block.function is None and block.superblock is not None:
            block = block.superblock
        if block.function is not None:
            start: int = block.start
            return start
    except RuntimeError:
        pass
    found = info_symbol(frame.pc())
    return frame.pc() - found[1] if found else None


def info_symbol(addr: int) -> Optional[Tuple[str, int]]:
    """(name, offset) of the minimal symbol gdb knows at ``addr`` (``info symbol``), or None."""
    try:
        text = gdb.execute("info symbol 0x%x" % addr, to_string=True)
    except gdb.error:
        return None
    if " in section " not in text or text.startswith("No symbol"):
        return None
    head = text.split(" in section ")[0]
    m = re.match(r"(.*) \+ (\d+)$", head)
    return (m.group(1).strip(), int(m.group(2))) if m else (head.strip(), 0)


def register_value(frame: gdb.Frame, name: str) -> Optional[int]:
    try:
        return int(frame.read_register(name)) & ((1 << 64) - 1)
    except (gdb.error, ValueError):
        return None


def op_context(lwp: int, level: int, start: int, device: bool = False,
               kernels: Optional[OpKernelReader] = None, inputs: bool = False) -> Optional[Dict[str, Any]]:
    """``{"type", "name", "kernel"}`` of the op a native frame runs, or None.

    ``start`` is the entry address of the frame's function (0: ask gdb).
    For a kernel's ``Compute``, the OpKernel is the object whose vtable holds
    that function; for a device's ``Compute`` (``device``), it is the first
    argument at the function's entry (``rsi``); ``inputs``: a kernel's inputs too (``core/tensorflow/kernelinputs.py``).
    """
    thread = next((t for t in gdb.selected_inferior().threads() if t.ptid[1] == lwp), None)
    if thread is None:
        return None
    kernels = kernels or OpKernelReader(GdbMemory(gdb.selected_inferior()))
    with _selection_kept():
        thread.switch()
        return _op_of(kernels, level, start, device, inputs)


def _op_of(kernels: OpKernelReader, level: int, start: int, device: bool, inputs: bool) -> Optional[Dict[str, Any]]:
    """``op_context`` for frame ``level`` of the selected thread."""
    try:
        frame = gdb.newest_frame()
        for _ in range(level):
            frame = frame.older()
            if frame is None:
                return None
        if not start:
            start = _function_start(frame) or 0
        caller = frame.older()
        outer = caller.older() if caller is not None else None
        high = 0
        for fr in (outer, caller):
            if fr is not None and not high:
                high = register_value(fr, "rsp") or 0
        names = CALLEE_SAVED + ("rdi", "rsi")
        context = FrameContext(start, frame.pc(), level, frame_registers(frame, names),
                               frame_registers(caller, names), register_value(frame, "rsp") or 0, high)
        return op_with_inputs(kernels, context, device, inputs)
    except (gdb.error, RuntimeError):
        return None


def annotate_ops(result: Capture) -> None:
    """Set ``op`` on the kernel and device frames of a capture whose names gdb knows (tf-bt)."""
    kernels = OpKernelReader(GdbMemory(gdb.selected_inferior()))
    for t in result.threads:
        for f, device in op_frames(t.frames):
            assert f.level is not None  # op_frames gives only frames with a level
            op = op_context(t.tid, f.level, 0, device=device, kernels=kernels)
            if op:
                f.op = Op.from_json(op)
        inherit_device_ops(t.frames)


STACK_SCAN_LIMIT = 4 << 20


def code_on_stacks(code: List[Tuple[int, int]], stacks: List[Tuple[int, int]]) -> List[int]:
    """Indices of the ``code`` ranges ``(lo, hi)`` that some thread may be running or return into.

    For each thread: its pc, and every word of its stack (from its stack
    pointer to the end of the ``stacks`` mapping that holds it) that points
    into a code range.  A return address is always such a word, so the
    libraries of every frame are among the answer (and a few more, from
    stale words): what a snapshot must give gdb CFI for.
    """
    import bisect
    import struct

    ranges = sorted((lo, hi, i) for i, (lo, hi) in enumerate(code))
    los = [c[0] for c in ranges]
    found: Set[int] = set()

    def note(value: int) -> None:
        k = bisect.bisect_right(los, value) - 1
        if k >= 0 and value < ranges[k][1]:
            found.add(ranges[k][2])

    inferior = gdb.selected_inferior()
    memory = GdbMemory(inferior)
    with _selection_kept():
        for th in inferior.threads():
            th.switch()
            frame = gdb.newest_frame()
            pc = frame.pc()
            note(pc)
            sp = register_value(frame, "rsp")
            if sp is None:
                continue
            end = next((hi for lo, hi in stacks if lo <= sp < hi), None)
            if end is None:
                continue
            end = min(end, sp + STACK_SCAN_LIMIT)
            pos = sp - sp % 8
            while pos < end:
                size = min(256 << 10, end - pos)
                try:
                    raw = memory.read(pos, size)
                except MemoryError:
                    break
                for value in struct.unpack("<%dQ" % (len(raw) // 8), raw):
                    if value >= los[0]:
                        note(value)
                pos += size
    return sorted(found)
