"""Mixed stacks without gdb: unwind from CFI, read Python frames, name the frames.

``tfnative stack`` (``take``) holds the threads itself; at a breakpoint hit
(``of_stopped``) gdb holds them and gives their registers.  Starting gdb,
attaching and giving it CFI and symbols for TensorFlow's libraries costs
more than everything a stack needs, read directly (docs/benchmarks.md, "Speed and memory of attach and stack"):

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
import contextlib
import errno
import gc
import itertools
import os
import re
import struct
import sys
import threading
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

from ..core import cxxexc, kstate, locks, procfs, ranks, sourcelines
from ..core.cfi import DWARF_REGS, RSP, CfiError, Frame, Unwinder
from ..core.elfindex import ElfError, data_symbols, display_names
from ..core.executors import pool_summary, unnamed_workers
from ..core.memory import USER_SPACE_END, Memory, UnwindMemory
from ..core.model import Capture, NativeFrame, Op, Thread
from ..core.opkernel import FrameContext, OpKernelReader, inherit_device_ops, op_frames, op_of_frame
from ..core.pyframes import NO_RUNTIME, PythonReader, ThreadPy, open_reader
from ..core.threadnames import registry_symbols, thread_names
from ..core.threads import SIGNAL_FRAME, PythonThreads, Threads, select_threads, thread_entry, unwound
from ..errors import HasDebugInfo, PtraceRefused, Unsupported
from ..sources.base import Source, ThreadRegs
from ..sources.live import LiveSource
from ..sources.modules import Library, Mappings, segments, shared
from ..sources.ptrace import PAGE, REGISTERS, Frozen, read_exact
from ..sources.ptrace import Memory as LiveMemory
from ..sources.vmread import Batch, spare

__all__ = ["add_memory_facts", "of_stopped", "stacks", "take", "take_nonblocking"]

_COLLECTIVE_RE = re.compile(r"TFE_EnableCollectiveOps|Collective")
MAX_NATIVE_FRAMES = 1 << 16  # a bound on the walk: more than an 8 MiB stack of small frames holds
PY_SYMBOLS = ("_PyRuntime", "Py_Version", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type")


# One process held at a time: threads that snapshot several processes share the GIL, so holds that
# overlap would each last as long as all of them; the rest of a snapshot (its /proc reads, the report,
# the waits between samples, gdb) runs concurrently.
_HOLD = threading.Lock()


class _Alongside:
    """A batch read by a thread of its own in the hold, while the hold's thread computes and copies the stacks:
    ``process_vm_readv`` runs without the GIL, so the two copies overlap on two CPUs.  ``with`` it around the
    hold: the thread waits before, is woken by ``start`` (the switch interval is cut meanwhile, so that it
    gets the GIL at once), and ``finish`` says whether it read the batch."""

    def __init__(self, batch: Batch, fd: int) -> None:
        self.batch, self.fd = batch, fd
        self.go = threading.Event()
        self.done = threading.Event()
        self.ok = False
        self.interval: Optional[float] = None  # the switch interval before ``start`` (taken under _HOLD)
        self.thread = threading.Thread(target=self._run, name="tfnative-copy", daemon=True)

    def __enter__(self) -> _Alongside:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()
        self.done.set()  # never started (an error before): the thread ends without reading
        self.go.set()
        self.thread.join(5.0)

    def _restore(self) -> None:
        if self.interval is not None:
            sys.setswitchinterval(self.interval)
            self.interval = None

    def _run(self) -> None:
        self.go.wait()
        try:
            if not self.done.is_set():
                self.batch.read(self.fd)
                self.ok = True
        finally:
            self.done.set()

    def start(self) -> None:
        self.interval = sys.getswitchinterval()
        sys.setswitchinterval(0.0001)
        self.go.set()

    def finish(self) -> bool:
        """Whether the thread read the batch (waited for 10 s at most: the copy then comes from the hold's
        thread)."""
        ok = self.done.wait(10.0) and self.ok
        self._restore()
        return ok


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """No cyclic garbage collection during a hold: a collection over a snapshot's objects takes longer than
    the hold's own work, and the target would wait for it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _link_map_names(memory: Memory, libs: List[Library], exe: Optional[str]) -> None:
    """Name each library as the dynamic loader (and gdb) does: by its ``link_map`` path.

    ``/proc/PID/maps`` shows the file behind the link (``libstdc++.so.6.0.30``);
    the loader's list has the name it was loaded by (``libstdc++.so.6``).  The
    list is found through the executable's (``exe``, its path on this host)
    ``DT_DEBUG`` entry (``r_debug``).
    """
    if exe is None:
        return
    main = next((lib for lib in libs if lib.path == exe), None)
    if main is None:
        return
    try:
        dynamic = next(vaddr for p_type, vaddr in segments(exe) if p_type == 2)  # PT_DYNAMIC
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


def _python_reader(memory: Memory, libs: List[Library], warnings: List[str]) -> Optional[PythonReader]:
    """The reader of the interpreter whose file (executable or libpython) defines ``_PyRuntime``."""
    for lib in libs:
        if not re.match(r"(lib)?python\d", lib.name):
            continue
        try:
            syms = shared(lib.path, "pysyms", lambda path: data_symbols(path, PY_SYMBOLS))
        except (OSError, ElfError, ValueError):
            continue
        if "_PyRuntime" not in syms:
            continue
        at = {k: v + lib.bias for k, v in syms.items()}
        reader, why = open_reader(memory, at.get, _named_as(lib.name))
        if reader is None:
            warnings.append(why or "no Python runtime in %s" % lib.name)
        return reader
    warnings.append(NO_RUNTIME)
    return None


def _named_as(name: str) -> Callable[[int], str]:
    """A symbolizer that names every address by one library's name (where the interpreter is)."""
    return lambda _addr: name


def _constant(value: Optional[int]) -> Callable[[], Optional[int]]:
    """``value``, asked for lazily (a thread's ``fs_base``)."""
    return lambda: value


def _is_interpreter(lib: Library) -> bool:
    """The python executable, libpython, or one of the interpreter's own extension modules.

    Their frames are shown as Python frames or hidden as glue, so their DWARF
    (pyenv builds everything with -g) is no reason to ask gdb.
    """
    return bool(re.match(r"(lib)?python\d", lib.name)) or "/lib-dynload/" in lib.path


def _native_frames(frames: List[Frame[Library]]) -> List[NativeFrame]:
    out = []
    for level, fr in enumerate(frames):
        lib = fr.module
        out.append(NativeFrame(function="??", library=lib.name if lib else None, address="0x%016x" % fr.pc,
                               level=level, recovered=fr.recovered or None))
    return out


def _name_frames(threads: List[Tuple[List[Frame[Library]], List[NativeFrame]]]) -> None:
    """Name every native frame from the symbol indexes (one demangling pass for all)."""
    todo: List[Tuple[NativeFrame, str]] = []
    for frames, named in threads:
        for level, (fr, d) in enumerate(zip(frames, named)):
            lib = fr.module
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


def _ops(memory: Memory, frames: List[Frame[Library]], named: List[NativeFrame], kernels: OpKernelReader) -> None:
    for d, device in op_frames(named):
        level = d.level or 0
        regs = _named(frames[level].regs)
        caller = _named(frames[level + 1].regs) if level + 1 < len(frames) else {}
        high = 0
        for k in (level + 2, level + 1):
            if not high and k < len(frames):
                high = frames[k].regs.get(7, 0)
        op = op_of_frame(kernels, FrameContext(d.start or 0, frames[level].pc, level, regs, caller,
                                               regs.get("rsp") or 0, high), device=device)
        if op:
            d.op = Op.from_json(op)
    inherit_device_ops(named)


def _named(regs: Dict[int, int]) -> Dict[str, int]:
    return {DWARF_REGS[i]: v for i, v in regs.items() if i < len(DWARF_REGS)}


STACK_COPY = 256 << 10  # the most of each thread's stack copied while held, from its stack pointer up
RED_ZONE = 128  # x86-64: a leaf function's data below its stack pointer
STACK_GUESS = 12 << 10  # the live stack of a thread, for the buffer made before the hold (1,000 idle Python
# threads: 6 KiB each; more goes to memory touched in the hold)


def _open_live(pid: int) -> LiveSource:
    """``pid``'s memory and files; ``PtraceRefused`` where reading it is not allowed, ``Unsupported`` else."""
    try:
        return LiveSource(pid)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise PtraceRefused("open /proc/%d/mem: %s" % (pid, exc.strerror)) from None
        raise Unsupported("cannot open /proc/%d/mem: %s" % (pid, exc.strerror)) from None


def take(pid: int, which: Threads = Threads.PYTHON, variables: bool = False) -> Capture:
    """The mixed stacks of ``pid``'s threads (``which``: ``PYTHON`` or ``ALL``), as ``-tfnative-capture``.

    Copy, then let go: the threads are held with ptrace only while their
    registers, the live part of each stack (``STACK_COPY`` at most, up to its
    mapping's end) and the Python thread states and frames are copied; the
    unwind, the symbols and the ops come from that copy after the process runs
    again.  A thread whose unwind needed a page outside the copy (read from the
    running process) is marked ``after_release``; ``held_ms`` is the hold.
    Raises ``Unsupported`` (the caller uses gdb) when any thread cannot be
    unwound from CFI alone or runs in a library with its own DWARF.
    """
    source = _open_live(pid)
    try:
        # Before the hold, which is kept short: /proc/PID/maps, the files, what does not change as it runs.
        prep = _prepare(source, variables)
        letters = kstate.states(pid)  # before the hold, which makes every thread "t"
        inner = source.namespace_tids()
        memory = source.memory
        # One walk of the Python threads as the process runs learns which pages hold them (thread states,
        # frames, code objects): the hold copies those pages, and the walk is done again from the copy.
        python_pages = memory.plan_pages(prep.learn_python_pages(inner))
        learned = set(procfs.tids(pid))
        source.mappings()  # sorted before the hold, which looks each stack up in them
        stacks_buffer = spare(len(learned) * STACK_GUESS)
        if memory.pages is not None:
            memory.pages.clear()  # nothing read before the hold stands for the held process
        alongside = _Alongside(python_pages, memory.fd)

        def copy(frozen: Frozen) -> None:
            """The hold itself, on the thread that holds the process: the copies, then the thread list."""
            alongside.start()
            with frozen.words() as words:
                stack_copy = _stack_batch(pid, source.mappings(), words, stacks_buffer)
            memory.fetch(stack_copy)
            if alongside.finish():
                memory.adopt(python_pages)
            else:  # a buffer of its own: the other thread may still write into the first one
                memory.fetch(Batch(pid, python_pages.ranges, whole=True).without(stack_copy.ranges))
            if set(frozen.order) != learned or prep.list_changed(memory.fd):
                prep.copy_thread_list()  # threads started or ended since the walk: their states as held

        frozen = Frozen(pid)
        with _HOLD, _no_gc(), alongside:
            frozen.hold(copy)
        memory.released()
        regs = [(tid, frozen.regs[tid]) for tid in frozen.tids]
        held = frozen.held_s
        prep.python_threads(inner)  # from the copy: a page it lacks marks the thread (after_release)
        source.registers = [(tid, frozen.thread_name(tid), r) for tid, r in regs]
        result = stacks(source, which, variables=variables, prepared=prep)
        result.held_ms = round(held * 1000, 1)
    finally:
        source.close()
    kstate.annotate(result.threads, letters, {tid: regs for tid, _name, regs in source.registers})
    return result


def take_nonblocking(pid: int, which: Threads = Threads.PYTHON, variables: bool = False) -> Capture:
    """``stack --no-pause``: the stacks of ``pid`` read without stopping it at all (no ptrace).

    A thread's registers cannot be read while it runs: for one blocked in the
    kernel ``/proc/PID/task/TID/syscall`` gives its user stack pointer and
    program counter, the unwind starts there and stops at the first frame
    whose CFA needs another register (``rbp``...); a thread running on a CPU
    gets its Python frames alone.  Everything is read twice: a thread whose
    registers, copied stack or Python frames differ between the two reads is
    marked ``consistent: false`` (its first reading is shown, flagged, never
    a mix of the two), the others ``consistent: true``.
    """
    source = _open_live(pid)
    source.nonblocking = True
    source.partial_stacks = True  # a cut native stack is shown cut: no gdb, which would stop the process
    try:
        try:
            tids = procfs.tids(pid)
        except OSError:
            raise Unsupported("process %d is gone" % pid) from None
        letters = kstate.states(pid)
        first = {tid: _user_regs(pid, tid) for tid in tids}
        prep = _prepare(source, variables)
        memory = source.memory
        if memory.pages is not None:
            memory.pages.clear()
        spans = {tid: _copy_stack(source, r["rsp"]) for tid, r in first.items() if r}
        inner = source.namespace_tids()
        pythreads = prep.python_threads(inner)
        frames1 = {t.tstate: _py_key(t) for t in pythreads.states}
        # the second reading: registers, the same stack bytes, the Python frames
        changed = {tid for tid in tids if _user_regs(pid, tid) != first[tid]}
        for tid, (start, data) in spans.items():
            if data and _read_raw(memory, start, len(data)) != data:
                changed.add(tid)
        check = _python_reader(_Uncached(memory.fd), prep.libs, [])
        if check is not None:
            for t in PythonThreads(check, Capture(), inner, names=False).states:
                check.read_frames(t)
                if frames1.get(t.tstate) != _py_key(t):
                    host = inner_to_host(t.native_id, inner)
                    if host is not None:
                        changed.add(host)
        memory.released()
        source.registers = [(tid, procfs.comm(pid, tid), r or {}) for tid, r in first.items()]
        result = stacks(source, which, variables=variables, prepared=prep)
    finally:
        source.close()
    kstate.annotate(result.threads, letters, {tid: r for tid, _name, r in source.registers if r})
    result.held_ms = 0.0
    result.nonblocking = True
    for thread in result.threads:
        thread.consistent = thread.tid not in changed
        if not thread.consistent:
            torn = "its stack changed while it was read (--no-pause): the frames shown are the first reading"
            thread.error = "%s; %s" % (thread.error, torn) if thread.error else torn
        thread.after_release = False  # nothing was held: every read is of the running process
    return result


def inner_to_host(native_id: Optional[int], inner: Dict[int, int]) -> Optional[int]:
    """The host thread id of a thread id seen inside the process's PID namespace."""
    if not inner or native_id is None:
        return native_id
    return next((host for host, ns in inner.items() if ns == native_id), native_id)


class _Uncached(Memory):
    """Reads straight from the process (the second reading of --no-pause): ``fd``, its ``/proc/PID/mem``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, addr: int, size: int) -> bytes:
        return read_exact(self.fd, addr, size)


def _read_raw(memory: LiveMemory, start: int, size: int) -> bytes:
    try:
        return _Uncached(memory.fd).read(start, size)
    except MemoryError:
        return b""


def _py_key(thread: ThreadPy) -> Tuple[Any, ...]:
    """What two readings of a thread's Python frames must agree on."""
    return tuple((f.function, f.file, f.line) for g in thread.groups for f in g), thread.error


def _user_regs(pid: int, tid: int) -> Optional[Dict[str, int]]:
    """The user stack pointer and program counter of a thread blocked in the kernel, without stopping it
    (``/proc/PID/task/TID/syscall``: "NR ARGS... SP PC", or "-1 SP PC" outside a system call); None
    for a thread running on a CPU ("running") or unreadable."""
    fields = procfs.syscall(pid, tid)
    if fields is None or len(fields) < 3 or fields[0] == "running":
        return None
    try:
        sp, pc = int(fields[-2], 16), int(fields[-1], 16)
    except ValueError:
        return None
    if not (sp and pc):
        return None
    regs = {"rsp": sp, "rip": pc}
    if fields[0] not in ("-1", "running") and fields[0].lstrip("-").isdigit():
        regs["orig_rax"] = int(fields[0])  # the system call it waits in, as kstate reads it from ptrace
    return regs


def _thread_stack(mapping: Callable[[int], Optional[Tuple[int, int]]], rsp: int,
                  fs_base: int) -> List[Tuple[int, int]]:
    """What to copy of a held thread's stack, page-aligned, from its rsp and fs_base: the live part at its
    stack pointer (from just below it to its mapping's end, ``STACK_COPY`` at most) and, where the stack
    pointer is outside the thread's own stack (oneDNN's JIT kernels move it to a buffer of their own), the
    top of its own stack (below its thread pointer, ``fs_base``), where the frames that called the kernel
    are."""
    if not rsp:
        return []
    out: List[Tuple[int, int]] = []
    span = mapping(rsp)
    start = rsp - RED_ZONE
    end = min(span[1], rsp + STACK_COPY) if span else rsp + PAGE
    if 0 < start < end <= USER_SPACE_END:
        out.append((start - start % PAGE, -(-end // PAGE) * PAGE))
    if not fs_base or (span is not None and span[0] < fs_base <= span[1]):
        return out  # the usual case: the stack pointer is in the thread's own stack
    own = mapping(fs_base - 1)
    if own is not None and not own[0] <= rsp < own[1] and span != own:
        low = max(own[0], fs_base - STACK_COPY)
        out.append((low - low % PAGE, -(-min(own[1], fs_base) // PAGE) * PAGE))
    return out


_RSP, _FS_BASE = REGISTERS.index("rsp"), REGISTERS.index("fs_base")


def _stack_batch(pid: int, mappings: Mappings, words: memoryview, buffer: bytearray) -> Batch:
    """Every held thread's ``_thread_stack``, as one batch, from the registers read in the hold
    (``Frozen.words``: ``len(REGISTERS)`` words a thread).  Run in the hold, where each microsecond a thread
    costs is a millisecond of pause for a thousand: the usual case (the stack pointer in the thread's own
    stack, its thread pointer at that stack's top) is computed here, with the mappings looked up by
    ``bisect`` for all threads at once; the rest goes to ``_thread_stack``."""
    count = len(REGISTERS)
    rsps, bases = words[_RSP::count].tolist(), words[_FS_BASE::count].tolist()
    spans = mappings.spans
    ranges: List[Tuple[int, int]] = []
    add = ranges.append
    for rsp, fs_base, k in zip(rsps, bases, map(bisect.bisect_right, itertools.repeat(mappings.starts), rsps)):
        lo, hi = spans[k - 1] if k else (0, 0)
        if lo < fs_base <= hi and RED_ZONE < rsp < hi:
            start, end = rsp - RED_ZONE, rsp + STACK_COPY
            add((start - start % PAGE, hi if end >= hi else -(-end // PAGE) * PAGE))
        else:
            ranges.extend(_thread_stack(mappings, rsp, fs_base))
    return Batch(pid, ranges, buffer=buffer)


def _copy_stack(source: LiveSource, rsp: int) -> Tuple[int, bytes]:
    """Copy the live part of one thread's stack (the first range ``_thread_stack`` gives for it); (its first
    page's address, the bytes copied)."""
    ranges = _thread_stack(source.mapping_of, rsp, 0)
    pages = source.memory.pages
    if not ranges or pages is None:
        return 0, b""
    base, end = ranges[0]
    taken = source.memory.copy(base, end)
    return base, b"".join(pages.get(base + k, b"") for k in range(0, taken, PAGE))


def of_stopped(pid: int, threads: List[ThreadRegs], which: Threads,
               selected: Optional[int] = None, variables: bool = False) -> Capture:
    """The same, for a process that gdb holds stopped: gdb gives the registers, we do the rest.

    ``threads``: (tid, name, registers) of each thread; ``which`` may also be
    ``SELECTED`` (only ``selected``, the thread that stopped).
    """
    try:
        source = LiveSource(pid, threads)
    except OSError as exc:
        raise Unsupported("cannot open /proc/%d/mem: %s" % (pid, exc.strerror)) from None
    try:
        result = stacks(source, which, selected, variables=variables)
    finally:
        source.close()
    if selected is not None:
        result.selected_tid = selected
    return result


class _Prepared:
    """What ``stacks`` reads of a source before its threads: the libraries, the unwinder, the Python reader
    and (``python_threads``) the interpreter's thread states with their frames.  ``copy``: the memory
    ``take`` copies in its hold (the pages ``learn_python_pages`` records); None for a source read as it is."""

    def __init__(self, source: Source, variables: bool, copy: Optional[LiveMemory] = None) -> None:
        memory = source.memory
        self.warnings: List[str] = []
        libs = source.libraries()
        _link_map_names(memory, libs, source.executable)
        self.libs = libs = libs + source.extra_code()
        self.unwinder = Unwinder(libs, memory.read, source.mapping_of)
        self.reader = _python_reader(memory, libs, self.warnings)
        if self.reader is not None:
            self.reader.want_variables = variables
        self.memory = memory
        self.copy = copy
        self.walked: Dict[int, Tuple[ThreadPy, Set[int]]] = {}  # learn_python_pages: tstate -> (state, pages)
        self.before: Dict[int, bytes] = {}
        # learn_python_pages: each interpreter's threads.head field -> its value (None: could not be read)
        self.heads: Optional[Dict[int, bytes]] = {}
        self.pythreads: Optional[PythonThreads] = None
        self.named = False
        self.inner: Dict[int, int] = {}
        self.result = Capture(pid=source.pid, via="cfi")
        self.result.warnings.extend(self.warnings)

    def python_threads(self, inner: Dict[int, int], learn: bool = False) -> PythonThreads:
        """The interpreter's thread states and each one's frames; threading's names are read later
        (``names``).  A state whose frames needed a page the hold's copy lacks is marked
        ``after_release``."""
        if self.pythreads is None:
            memory = self.memory
            self.inner = inner
            late = memory.late_reads
            self.pythreads = PythonThreads(self.reader, self.result, inner, names=False)
            if memory.late_reads != late:
                self.result.warnings.append("the Python thread list was read partly after the process was let "
                                            "go (threads started or ended meanwhile)")
            copy = self.copy
            if self.reader is not None and learn and copy is not None:
                # before the hold: each state's frames and the pages read
                for state in self.pythreads.states:
                    touched: Set[int] = set()
                    copy.track(touched)
                    try:
                        self.reader.read_frames(state)
                    finally:
                        copy.track(None)
                    self.walked[state.tstate] = (state, touched)
            elif self.reader is not None:
                for state in self.pythreads.states:
                    if self._reuse(state):
                        continue
                    late = memory.late_reads
                    self.reader.read_frames(state)
                    if memory.late_reads != late:
                        state.after_release = True
        return self.pythreads

    def _reuse(self, state: ThreadPy) -> bool:
        """Take a state's frames from the walk before the hold where none of the pages that walk read of
        it changed in the copy: reading them again would give the same frames."""
        before = self.walked.get(state.tstate)
        pages = self.copy.pages if self.copy is not None else None
        if before is None or pages is None:
            return False
        old, touched = before
        if any(pages.get(p) != self.before.get(p) for p in touched):
            return False
        state.groups, state.entries, state.error = old.groups, old.entries, old.error
        state.frames_read = True
        return True

    def copy_thread_list(self) -> None:
        """Walk the interpreter's list of thread states (a few reads a thread) so that every state is in
        the copy, those of threads started since ``learn_python_pages`` included: the walk from the
        copy then finds the threads as they were held.  Their frames, where new, are read after the
        release (and marked).  Run in the hold only where the list may have changed (``list_changed``)."""
        if self.reader is None:
            return
        try:
            self.reader.thread_states()
        except MemoryError:
            pass

    def list_changed(self, fd: int) -> bool:
        """Whether a thread state may have been added since ``learn_python_pages``: the head of an
        interpreter's list (read now, through ``fd``) holds another state than the walk found there."""
        if self.heads is None:
            return True  # the walk could not read a list head: the list may have changed
        for addr, head in self.heads.items():
            try:
                if read_exact(fd, addr, 8) != head:
                    return True
            except MemoryError:
                return True
        return False

    def learn_python_pages(self, inner: Dict[int, int]) -> List[int]:
        """Walk the Python threads once (the process running): the pages the walk read, which the hold
        copies; the walk is forgotten (``python_threads`` walks again, from the copy)."""
        memory = self.copy
        pages = memory.pages if memory is not None else None
        if self.reader is None or memory is None or pages is None:
            return []
        pages.clear()
        try:
            self.heads = {addr: memory.read(addr, 8) for addr in self.reader.thread_list_heads()}
        except MemoryError:
            self.heads = None
        self.python_threads(inner, learn=True)
        self.before = dict(pages)  # the bytes the walk read: a state whose pages the hold finds unchanged is kept
        self.pythreads = None
        self.result.python = None
        self.result.warnings[:] = self.warnings
        self.result.finalizing = False
        return list(pages)

    def names(self) -> None:
        if self.pythreads is not None and not self.named:
            self.named = True
            self.pythreads.read_names()


def _prepare(source: LiveSource, variables: bool) -> _Prepared:
    return _Prepared(source, variables, source.memory)


def stacks(source: Source, which: Threads, selected: Optional[int] = None, variables: bool = False,
           prepared: Optional[_Prepared] = None) -> Capture:
    """Mixed stacks of a source's stopped threads (``sources/base.py``) from their registers and its memory.

    ``which``: the threads shown (``SELECTED``: only ``selected``);
    ``variables``: read each Python frame's arguments and locals (``--locals``);
    ``prepared``: what ``take`` read while it held the threads.
    Raises ``HasDebugInfo`` when a library on a stack has its own DWARF, and
    ``Unsupported`` when a thread cannot be unwound from CFI alone (unless the
    source shows such stacks cut, ``partial_stacks``).
    """
    prep = prepared or _Prepared(source, variables)
    result = prep.result
    pythreads = prep.python_threads(source.namespace_tids())  # a process in another PID namespace (a container)
    prep.names()
    if prep.inner:
        result.ns_pid = prep.inner.get(source.pid)
    listed = source.threads()
    found, late_tids = _unwind_all(source, prep.unwinder, pythreads, listed, which, selected)
    _name_frames([(s.frames, s.named) for s in found])
    _add_threads(source.memory, prep, pythreads, listed, found, late_tids)
    if prep.reader is not None and any(_COLLECTIVE_RE.search(f.function or "") for t in result.threads
                                       for f in t.frames if isinstance(f, NativeFrame)):
        try:  # the cluster a worker waits for, where the program set TF_CONFIG itself
            result.tf_config = prep.reader.objects.environ_value(ranks.TF_CONFIG)
        except (MemoryError, OSError, struct.error):
            pass
    if which is not Threads.SELECTED:
        tf_names = None
        if unnamed_workers(result.threads):
            tf_names = thread_names(_HeldRegistry(source.memory, prep.libs),  # core/threadnames.py
                                    {tid: regs.get("fs_base") for tid, _n, regs in listed}, _HeldRegistry.symbols)
        result.pool = pool_summary(result.threads, tf_names)
    result.threads = select_threads(result.threads, which)
    return result


class _Unwound(NamedTuple):
    """One thread's native stack as ``stacks`` unwound it: the CFI frames, their model frames (unnamed yet),
    its Python state, and why the stack is cut (None: whole)."""

    tid: int
    name: str
    frames: List[Frame[Library]]
    named: List[NativeFrame]
    py: Optional[ThreadPy]
    cut: Optional[str]


def _unwind_all(source: Source, unwinder: Unwinder[Library], pythreads: PythonThreads, listed: List[ThreadRegs],
                which: Threads, selected: Optional[int]) -> Tuple[List[_Unwound], Set[int]]:
    """The threads ``which`` selects, unwound (``stacks``), and the threads whose unwind read pages the copy
    lacks, from the running process."""
    memory = source.memory
    found: List[_Unwound] = []
    late_tids: Set[int] = set()
    main_name = next((name for tid, name, _regs in listed if tid == source.pid), None)
    for tid, name, regs in listed:
        if which is Threads.SELECTED and tid != selected:
            continue
        py = pythreads.find(tid, _constant(regs.get("fs_base")))
        if pythreads.states and not unwound(which, py is not None, name, main_name):
            continue
        late = memory.late_reads
        frames, cut, checked = _unwind_thread(source, unwinder, tid, regs, py)
        if checked and memory.late_reads != late:
            late_tids.add(tid)
        found.append(_Unwound(tid, name, frames, _native_frames(frames), py, cut))
    return found, late_tids


def _unwind_thread(source: Source, unwinder: Unwinder[Library], tid: int, regs: Dict[str, int],
                   py: Optional[ThreadPy]) -> Tuple[List[Frame[Library]], Optional[str], bool]:
    """(frames, why the stack is cut or None, whether its frames were checked for DWARF) of one thread.

    Raises ``HasDebugInfo`` where a frame's library has DWARF for it, ``Unsupported`` where CFI cannot
    unwind the thread (unless the source shows such stacks cut)."""
    if not regs:  # --no-pause: a thread running on a CPU, whose registers cannot be read
        return [], ("no native frames: the thread ran on a CPU (--no-pause reads registers only of threads "
                    "blocked in the kernel)"), False
    cut = None
    try:
        frames = unwinder.unwind(regs, MAX_NATIVE_FRAMES)
    except CfiError as exc:
        if source.nonblocking:  # only rsp and rip: the unwind stops where they end
            return (exc.frames or [],
                    "native unwinding stopped at the last frame shown (--no-pause: rsp and rip only): %s" % exc,
                    False)
        if not source.partial_stacks or py is None:
            raise Unsupported("thread %d: %s" % (tid, exc)) from None
        # memory or files missing: the innermost frame and the Python frames still count
        frames = exc.frames or unwinder.unwind(regs, 1)
        cut = "native unwinding stopped at the last frame shown: %s" % exc
    for fr in frames:
        lib = fr.module
        # only where the library's own DWARF describes the frame's code (a return address: pc - 1 too)
        if isinstance(lib, Library) and not _is_interpreter(lib) and lib.has_dwarf() \
                and (lib.dwarf_at(fr.pc) or lib.dwarf_at(fr.pc - 1)):
            raise HasDebugInfo("%s has debug info: gdb gives its source lines" % lib.path)
    return frames, cut, True


def _add_threads(memory: UnwindMemory, prep: _Prepared, pythreads: PythonThreads, listed: List[ThreadRegs],
                 found: List[_Unwound], late_tids: Set[int]) -> None:
    """The unwound threads, with their ops, lock waits and C++ exceptions, into ``prep.result``."""
    reader, inner = prep.reader, prep.inner
    kernels = OpKernelReader(memory)
    tids = [tid for tid, _name, _regs in listed]
    idents = locks.thread_idents(pythreads.states)
    regs_of = {tid: regs for tid, _name, regs in listed}
    runtimes = _cxx_runtimes(prep.libs)
    thread_pointers = {tid: regs.get("fs_base") for tid, _n, regs in listed}
    for tid, name, frames, named, py, cut in found:
        _ops(memory, frames, named, kernels)
        thread = thread_entry(tid, name, named, reader, py, [fr.regs.get(RSP) for fr in frames])
        thread.lock_wait = _after_release(memory, _lock_wait, memory, reader, thread, py, regs_of[tid], tids, idents)
        thread.cxx_exception = _after_release(memory, _cxx_exception, memory, runtimes, thread_pointers.get(tid),
                                              frames, named)
        if len(frames) >= MAX_NATIVE_FRAMES:
            cut = "native unwinding stopped after %d frames (the limit)" % MAX_NATIVE_FRAMES
        if tid in inner:
            thread.ns_tid = inner[tid]
        if cut and thread.merge == "mismatch":  # no eval-loop frames to put them in: after #0
            thread.frames = thread.frames + (thread.python_frames or [])
            thread.merge, thread.python_frames, thread.merge_detail = "partial", None, None
        if cut:
            thread.error = "%s; %s" % (thread.error, cut) if thread.error else cut
        if tid in late_tids or (py is not None and py.after_release):
            thread.after_release = True
        prep.result.threads.append(thread)


def _after_release(memory: UnwindMemory, read: Callable[..., Optional[Dict[str, Any]]], *args: Any
                   ) -> Optional[Dict[str, Any]]:
    """``read(*args)``'s fact (a lock wait, a C++ exception), marked ``"read_after_release": true`` where reading it
    took memory the hold's copy lacks (heap, other threads' data): read from the running process, after the
    release, never mixed silently with what the hold saw."""
    before = memory.late_reads
    found = read(*args)
    if found is not None and memory.late_reads != before:
        found = dict(found, read_after_release=True)
    return found


def _lock_wait(memory: Memory, reader: Optional[PythonReader], thread: Thread, py: Optional[ThreadPy],
               regs: Dict[str, int], tids: List[int], idents: Dict[int, int]) -> Optional[Dict[str, Any]]:
    """The lock the thread waits for, where memory records who holds it (``core/locks.py``)."""
    found = locks.mutex_wait(memory.read, thread.frames, regs, tids) or locks.child_wait(regs)
    if found is not None or reader is None or py is None:
        return found
    frame = locks.waits_in_python_lock(thread.frames)
    inner = py.frames[0] if py.frames else None
    if frame is None or inner is None or inner.line != frame.line or inner.file != frame.file:
        return None
    return locks.python_lock_wait(reader.objects, inner.function, inner.code, inner.address,
                                  sourcelines.line(frame.file, frame.line), idents)


def _cxx_runtimes(libs: List[Library]) -> List[Tuple[Library, cxxexc.CxxRuntime]]:
    """The libstdc++ copies mapped, each with its exception runtime (``core/cxxexc.py``)."""
    out = []
    for lib in libs:
        if not lib.name.startswith("libstdc++"):
            continue
        try:
            runtime = shared(lib.path, "cxxruntime", cxxexc.runtime_of)
        except (OSError, ElfError, ValueError):
            continue
        if runtime is not None:
            out.append((lib, runtime))
    return out


def _cxx_exception(memory: Memory, runtimes: List[Tuple[Library, cxxexc.CxxRuntime]],
                   thread_pointer: Optional[int], frames: List[Frame[Library]], named: List[NativeFrame]
                   ) -> Optional[Dict[str, Optional[str]]]:
    """The C++ exception a thread has in flight (``{"type", "what", "state"}``), read from libstdc++'s
    per-thread globals (or, stopped at ``__cxa_throw``'s entry, its arguments); None for none.  A few
    reads per thread: done for every thread."""
    if not frames:
        return None
    sps = [fr.regs.get(RSP) or 0 for fr in frames]
    at_throw = bool(named) and named[0].function == "__cxa_throw" and named[0].start == frames[0].pc
    return _cxx_exception_of(memory, runtimes, thread_pointer, (sps[0], max(sps)) if sps[0] else None,
                             [v for fr in frames for v in fr.regs.values()], frames[0].regs if at_throw else None,
                             [(d.function, d.library) for d in named])


def _cxx_exception_of(memory: Memory, runtimes: List[Tuple[Library, cxxexc.CxxRuntime]],
                      thread_pointer: Optional[int], stack: Optional[Tuple[int, int]], registers: List[int],
                      entry_regs: Optional[Dict[int, int]], named: List[Tuple[Optional[str], Optional[str]]]
                      ) -> Optional[Dict[str, Optional[str]]]:
    """``_cxx_exception`` from a thread's pointer, stack span, register values, (stopped at
    ``__cxa_throw``'s entry) its registers by DWARF number, and its frames' (function, library)."""
    if not thread_pointer or not runtimes:
        return None
    throw_args = None
    if entry_regs is not None:
        throw_args = (entry_regs.get(5) or 0, entry_regs.get(4) or 0)  # rdi, rsi (DWARF 5, 4)
    for lib, runtime in runtimes:
        exc = cxxexc.thread_exception(memory.read, runtime, lib.bias, thread_pointer, stack, throw_args, registers)
        if exc is not None:
            if exc.state == "caught" and cxxexc.terminating(named):
                exc.state = "terminate"
            return exc.to_json()
    return None


def add_memory_facts(memory: Memory, libs: List[Library], registers: Dict[int, Dict[str, int]],
                     result: Capture) -> None:
    """What ``stacks`` reads from memory beside the frames, for a capture gdb took (``registers``: tid ->
    ptrace's register names, ``fs_base`` and ``orig_rax`` included): each thread's C++ exception in flight and
    the lock it waits for where memory records the holder."""
    _add_lock_waits(memory, libs, registers, result)
    _add_cxx_exceptions(memory, libs, registers, result)


def _add_lock_waits(memory: Memory, libs: List[Library], registers: Dict[int, Dict[str, int]],
                    result: Capture) -> None:
    reader = _python_reader(memory, libs, [])
    states: Dict[int, ThreadPy] = {}
    if reader is not None:
        try:
            for state in reader.thread_states():
                if state.native_id:
                    states[state.native_id] = reader.read_frames(state)
        except MemoryError:
            pass
    idents = locks.thread_idents(list(states.values()))
    tids = list(registers)
    for t in result.threads:
        if t.lock_wait is None and t.tid in registers:
            t.lock_wait = _lock_wait(memory, reader, t, states.get(t.tid), registers[t.tid], tids, idents)


def _add_cxx_exceptions(memory: Memory, libs: List[Library], registers: Dict[int, Dict[str, int]],
                        result: Capture) -> None:
    runtimes = _cxx_runtimes(libs)
    if not runtimes:
        return
    index = {name: i for i, name in enumerate(DWARF_REGS)}
    for t in result.threads:
        regs = registers.get(t.tid)
        if not regs or t.cxx_exception:
            continue
        first = t.frames[0] if t.frames else None
        at_throw = isinstance(first, NativeFrame) and (first.function or "").split("(")[0] == "__cxa_throw"
        dwarf = {index[k]: v for k, v in regs.items() if k in index}
        sp = regs.get("rsp") or 0
        t.cxx_exception = _cxx_exception_of(memory, runtimes, regs.get("fs_base"),
                                            (sp, sp + cxxexc.STACK_SCAN) if sp else None,
                                            [v for k, v in regs.items() if k in index],
                                            dwarf if at_throw else None,
                                            [(f.function, f.library) for f in t.frames if isinstance(f, NativeFrame)])


class _HeldRegistry:
    """The held process as ``core/threadnames.py`` reads it: its memory (ptrace's), its mapped libraries and
    their biases; no symbol addresses beyond the files' own."""

    def __init__(self, memory: Memory, libs: List[Library]) -> None:
        self.read = memory.read
        self.biases: Dict[str, int] = {}
        for lib in libs:
            self.biases.setdefault(lib.path, lib.bias)

    def files(self) -> List[str]:
        return list(self.biases)

    def bias(self, path: str) -> Optional[int]:
        return self.biases.get(path)

    def symbol_address(self, name: str) -> Optional[int]:
        return None

    @staticmethod
    def symbols(path: str) -> Dict[str, int]:
        """The registry's symbols in ``path``, read once per file for the whole process (``shared``)."""
        found: Dict[str, int] = shared(path, "tfthreadnames", registry_symbols)
        return found
