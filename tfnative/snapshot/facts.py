"""Facts read from memory beside the stacks: which lock a thread waits for and who holds it, the C++
exception in flight on a thread, and TensorFlow's thread-name registry as the held process has it.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ..core import cxxexc, locks, sourcelines
from ..core.binary.cfi import DWARF_REGS, RSP, Frame
from ..core.binary.elf import ElfError
from ..core.memory import Memory, UnwindMemory
from ..core.model import Capture, NativeFrame, Thread
from ..core.python.pyframes import PythonReader, ThreadPy
from ..core.tensorflow.threadnames import registry_symbols
from ..sources.modules import Library, shared
from .linkmap import python_reader


def after_release(memory: UnwindMemory, read: Callable[..., Optional[Dict[str, Any]]], *args: Any
                   ) -> Optional[Dict[str, Any]]:
    """``read(*args)``'s fact (a lock wait, a C++ exception), marked ``"read_after_release": true`` where reading it
    took memory the hold's copy lacks (heap, other threads' data): read from the running process, after the
    release, never mixed silently with what the hold saw."""
    before = memory.late_reads
    found = read(*args)
    if found is not None and memory.late_reads != before:
        found = dict(found, read_after_release=True)
    return found


def lock_wait(memory: Memory, reader: Optional[PythonReader], thread: Thread, py: Optional[ThreadPy],
              regs: Dict[str, int], tids: List[int], idents: Dict[int, int],
              unwound: Optional[Tuple[List[NativeFrame], List[Frame[Library]]]] = None) -> Optional[Dict[str, Any]]:
    """The lock the thread waits for, where memory records who holds it (``core/locks.py``); ``unwound``: the
    thread's native frames as tfnative's unwinder found them (names, registers), for an absl::Mutex's address."""
    found = locks.mutex_wait(memory.read, thread.frames, regs, tids) or locks.child_wait(regs)
    if found is None and unwound is not None:
        found = _absl_wait(memory, *unwound)
    if found is not None or reader is None or py is None:
        return found
    frame = locks.waits_in_python_lock(thread.frames)
    inner = py.frames[0] if py.frames else None
    if frame is None or inner is None or inner.line != frame.line or inner.file != frame.file:
        return None
    return locks.python_lock_wait(reader.objects, inner.function, inner.code, inner.address,
                                  sourcelines.line(frame.file, frame.line), idents)


def _absl_wait(memory: Memory, named: List[NativeFrame], frames: List[Frame[Library]]) -> Optional[Dict[str, Any]]:
    """An absl::Mutex wait read by tfnative's own unwinder: its frames have no DWARF (else gdb takes the stack),
    so no lock object says who holds it."""
    found = locks.absl_mutex_wait(memory.read, named, [fr.regs for fr in frames])
    if found is None:
        return None
    at = locks.absl_lock_frames(named)
    caller = named[at] if at is not None and at < len(named) else None
    lib = caller.library if caller is not None and caller.library else "its caller's library"
    found["evidence"] += "; %s is built without DWARF, so the holder cannot be read from the frames" % lib
    return found


def cxx_runtimes(libs: List[Library]) -> List[Tuple[Library, cxxexc.CxxRuntime]]:
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


def cxx_exception_on(memory: Memory, runtimes: List[Tuple[Library, cxxexc.CxxRuntime]],
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
    """``cxx_exception_on`` from a thread's pointer, stack span, register values, (stopped at
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
    reader = python_reader(memory, libs, [])
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
            t.lock_wait = lock_wait(memory, reader, t, states.get(t.tid), registers[t.tid], tids, idents)


def _add_cxx_exceptions(memory: Memory, libs: List[Library], registers: Dict[int, Dict[str, int]],
                        result: Capture) -> None:
    runtimes = cxx_runtimes(libs)
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


class HeldRegistry:
    """The held process as ``core/tensorflow/threadnames.py`` reads it: its memory (ptrace's), its mapped libraries and
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
