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
  (``tfnative.core.python.pyframes``), merged the same way (``tfnative.core.python.mixed``);
* frames are named from the cached symbol index (``symindex.py``), with the
  separate debug file (``/usr/lib/debug/.build-id``) where a library is
  stripped, and kernel frames get their op (``tfnative.core.tensorflow.opkernel``).

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

Its parts by job: the hold and the unwind here; the link map (``linkmap.py``), stack-copy planning
(``stackcopy.py``), naming frames and their ops (``naming.py``), lock, C++ exception and thread-name facts
(``facts.py``).
"""

from __future__ import annotations

import contextlib
import errno
import gc
import re
import struct
import sys
import threading
from typing import Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

from ..core import kstate, locks, procfs, ranks
from ..core.binary.cfaprogram import CfiError
from ..core.binary.cfi import RSP, Frame, Unwinder
from ..core.memory import UnwindMemory
from ..core.model import Capture, NativeFrame
from ..core.python.pyframes import PythonReader, ThreadPy
from ..core.tensorflow.executors import pool_summary, unnamed_workers
from ..core.tensorflow.opkernel import OpKernelReader
from ..core.tensorflow.threadnames import thread_names
from ..core.tensorflow.wrapperargs import read_wrapper_args
from ..core.threads import PythonThreads, Threads, select_threads, thread_entry, unwound
from ..errors import HasDebugInfo, PtraceRefused, Unsupported
from ..sources.base import Source, ThreadRegs
from ..sources.live import LiveSource
from ..sources.modules import Library
from ..sources.procmem import Memory as LiveMemory
from ..sources.procmem import read_exact
from ..sources.ptrace import Frozen
from ..sources.vmread import Batch, spare
from .facts import HeldRegistry, add_memory_facts, after_release, cxx_exception_on, cxx_runtimes, lock_wait
from .linkmap import link_map_names, python_reader
from .naming import add_ops, constant, is_interpreter, name_frames, native_frames
from .stackcopy import (
    STACK_GUESS,
    Uncached,
    copy_stack,
    inner_to_host,
    py_key,
    read_raw,
    stack_batch,
    user_regs,
)

__all__ = ["add_memory_facts", "of_stopped", "stacks", "take", "take_nonblocking"]

_COLLECTIVE_RE = re.compile(r"TFE_EnableCollectiveOps|Collective")
MAX_NATIVE_FRAMES = 1 << 16  # a bound on the walk: more than an 8 MiB stack of small frames holds


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
                stack_copy = stack_batch(pid, source.mappings(), words, stacks_buffer)
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
        first = {tid: user_regs(pid, tid) for tid in tids}
        prep = _prepare(source, variables)
        memory = source.memory
        if memory.pages is not None:
            memory.pages.clear()
        spans = {tid: copy_stack(source, r["rsp"]) for tid, r in first.items() if r}
        inner = source.namespace_tids()
        pythreads = prep.python_threads(inner)
        frames1 = {t.tstate: py_key(t) for t in pythreads.states}
        # the second reading: registers, the same stack bytes, the Python frames
        changed = {tid for tid in tids if user_regs(pid, tid) != first[tid]}
        for tid, (start, data) in spans.items():
            if data and read_raw(memory, start, len(data)) != data:
                changed.add(tid)
        check = python_reader(Uncached(memory.fd), prep.libs, [])
        if check is not None:
            for t in PythonThreads(check, Capture(), inner, names=False).states:
                check.read_frames(t)
                if frames1.get(t.tstate) != py_key(t):
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


def of_stopped(pid: int, threads: List[ThreadRegs], which: Threads,
               selected: Optional[int] = None, variables: bool = False, dwarf_aside: bool = True) -> Capture:
    """The same, for a process that gdb holds stopped: gdb gives the registers, we do the rest.

    ``threads``: (tid, name, registers) of each thread; ``which`` may also be
    ``SELECTED`` (only ``selected``, the thread that stopped); ``dwarf_aside``: as ``stacks``.
    """
    try:
        source = LiveSource(pid, threads)
    except OSError as exc:
        raise Unsupported("cannot open /proc/%d/mem: %s" % (pid, exc.strerror)) from None
    try:
        result = stacks(source, which, selected, variables=variables, dwarf_aside=dwarf_aside)
    finally:
        source.close()
    if selected is not None:
        result.selected_tid = selected
    return result


def code_and_reader(source: Source, warnings: List[str]) -> Tuple[List[Library], Optional[PythonReader]]:
    """What every read of a source's Python begins with: its libraries named as its link map names them, with
    the code no file backs, and the interpreter's reader over them (None: no interpreter found; why, in
    ``warnings``)."""
    libs = source.libraries()
    link_map_names(source.memory, libs, source.executable)
    libs = libs + source.extra_code()
    return libs, python_reader(source.memory, libs, warnings)


class _Prepared:
    """What ``stacks`` reads of a source before its threads: the libraries, the unwinder, the Python reader
    and (``python_threads``) the interpreter's thread states with their frames.  ``copy``: the memory
    ``take`` copies in its hold (the pages ``learn_python_pages`` records); None for a source read as it is."""

    def __init__(self, source: Source, variables: bool, copy: Optional[LiveMemory] = None) -> None:
        memory = source.memory
        self.warnings: List[str] = []
        libs, self.reader = code_and_reader(source, self.warnings)
        self.libs = libs
        self.unwinder = Unwinder(libs, memory.read, source.mapping_of)
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
           prepared: Optional[_Prepared] = None, dwarf_aside: bool = True) -> Capture:
    """Mixed stacks of a source's stopped threads (``sources/base.py``) from their registers and its memory.

    ``which``: the threads shown (``SELECTED``: only ``selected``);
    ``variables``: read each Python frame's arguments and locals (``--locals``);
    ``prepared``: what ``take`` read while it held the threads.
    Raises ``HasDebugInfo`` when a library on a stack has its own DWARF (unless ``dwarf_aside`` is False:
    where no gdb can take over, such frames are named from the symbol table, without source lines, and a
    warning says so), and ``Unsupported`` when a thread cannot be unwound from CFI alone (unless the
    source shows such stacks cut, ``partial_stacks``).
    """
    prep = prepared or _Prepared(source, variables)
    result = prep.result
    pythreads = prep.python_threads(source.namespace_tids())  # a process in another PID namespace (a container)
    prep.names()
    if prep.inner:
        result.ns_pid = prep.inner.get(source.pid)
    listed = source.threads()
    found, late_tids = _unwind_all(source, prep.unwinder, pythreads, listed, which, selected, dwarf_aside)
    if not dwarf_aside:
        lined = sorted({fr.module.path for s in found for fr in s.frames if _described(fr) and fr.module})
        result.warnings.extend("%s has debug info only gdb reads: its frames are named from its symbol table, "
                               "without source lines" % path for path in lined)
    name_frames([(s.frames, s.named) for s in found])
    _add_threads(source.memory, prep, pythreads, listed, found, late_tids, selected)
    if prep.reader is not None and any(_COLLECTIVE_RE.search(f.function or "") for t in result.threads
                                       for f in t.frames if isinstance(f, NativeFrame)):
        try:  # the cluster a worker waits for, where the program set TF_CONFIG itself
            result.tf_config = prep.reader.objects.environ_value(ranks.TF_CONFIG)
        except (MemoryError, OSError, struct.error):
            pass
    if which is not Threads.SELECTED:
        tf_names = None
        if unnamed_workers(result.threads):
            tf_names = thread_names(HeldRegistry(source.memory, prep.libs),  # core/tensorflow/threadnames.py
                                    {tid: regs.get("fs_base") for tid, _n, regs in listed}, HeldRegistry.symbols)
        result.pool = pool_summary(result.threads, tf_names)
    result.threads = select_threads(result.threads, which)
    result.libraries = {fr.module.name: fr.module.path for s in found for fr in s.frames
                        if isinstance(fr.module, Library) and fr.module.path}
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
                which: Threads, selected: Optional[int], dwarf_aside: bool = True) -> Tuple[List[_Unwound], Set[int]]:
    """The threads ``which`` selects, unwound (``stacks``), and the threads whose unwind read pages the copy
    lacks, from the running process."""
    memory = source.memory
    found: List[_Unwound] = []
    late_tids: Set[int] = set()
    main_name = next((name for tid, name, _regs in listed if tid == source.pid), None)
    for tid, name, regs in listed:
        if which is Threads.SELECTED and tid != selected:
            continue
        py = pythreads.find(tid, constant(regs.get("fs_base")))
        if pythreads.states and not unwound(which, py is not None, name, main_name):
            continue
        late = memory.late_reads
        frames, cut, checked = _unwind_thread(source, unwinder, tid, regs, py, dwarf_aside)
        if checked and memory.late_reads != late:
            late_tids.add(tid)
        found.append(_Unwound(tid, name, frames, native_frames(frames), py, cut))
    return found, late_tids


def _unwind_thread(source: Source, unwinder: Unwinder[Library], tid: int, regs: Dict[str, int],
                   py: Optional[ThreadPy], dwarf_aside: bool = True
                   ) -> Tuple[List[Frame[Library]], Optional[str], bool]:
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
        if dwarf_aside and _described(fr) and fr.module is not None:
            raise HasDebugInfo("%s has debug info: gdb gives its source lines" % fr.module.path)
    return frames, cut, True


def _described(fr: Frame[Library]) -> bool:
    """Whether the frame's library has its own DWARF for the frame's code (a return address: pc - 1 too)."""
    lib = fr.module
    return isinstance(lib, Library) and not is_interpreter(lib) and lib.has_dwarf() \
        and bool(lib.dwarf_at(fr.pc) or lib.dwarf_at(fr.pc - 1))


def _add_threads(memory: UnwindMemory, prep: _Prepared, pythreads: PythonThreads, listed: List[ThreadRegs],
                 found: List[_Unwound], late_tids: Set[int], selected: Optional[int] = None) -> None:
    """The unwound threads, with their ops, lock waits and C++ exceptions, into ``prep.result``; the
    innermost kernel of the thread that stopped (``selected``: a crash, a core's signal) with its inputs."""
    reader, inner = prep.reader, prep.inner
    kernels = OpKernelReader(memory)
    tids = [tid for tid, _name, _regs in listed]
    idents = locks.thread_idents(pythreads.states)
    regs_of = {tid: regs for tid, _name, regs in listed}
    runtimes = cxx_runtimes(prep.libs)
    thread_pointers = {tid: regs.get("fs_base") for tid, _n, regs in listed}
    for tid, name, frames, named, py, cut in found:
        add_ops(memory, frames, named, kernels, inputs=tid == selected)
        if tid == selected and py is not None and reader is not None and not any(
                d.op is not None and d.op.inputs is not None for d in named):
            read_wrapper_args(reader, py.frames)  # no kernel frame gave the inputs: the op's Python wrapper's
        thread = thread_entry(tid, name, named, reader, py, [fr.regs.get(RSP) for fr in frames])
        thread.lock_wait = after_release(memory, lock_wait, memory, reader, thread, py, regs_of[tid], tids, idents,
                                         (named, frames))
        thread.cxx_exception = after_release(memory, cxx_exception_on, memory, runtimes, thread_pointers.get(tid),
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


