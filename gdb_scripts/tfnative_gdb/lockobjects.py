"""The lock objects in every thread's frames, as gdb reads them with DWARF (``-tfnative-lock-objects``).

For the wait-for graph (``tfnative/core/locks.py``'s ``lock_objects_wait``): which mutex a thread is locking
(the ``this`` of the lock function it is in: ``tsl::mutex::lock``, ``std::mutex::lock``...), and which
mutexes its frames hold through a guard object (``mutex_lock``, ``std::lock_guard``, ``std::unique_lock``,
``absl::MutexLock``...).  A guard counts as held where the frame's line is past the line that declares it (at
that line, it is being constructed: the lock it takes is the one waited for).  Frames without DWARF have no
block and say nothing.  Bounded: ``MAX_FRAMES`` frames a thread, ``MAX_SYMBOLS`` symbols a frame.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence

import gdb

from .capture import each_thread, register_value

MAX_FRAMES = 64
MAX_SYMBOLS = 256
MAX_WAIT_LEVEL = 16  # a lock function deeper than this is no lock the thread waits in
# guard types (typedefs stripped) -> the field that points at (or refers to) their mutex
_GUARDS = ((re.compile(r"^(tsl|tensorflow)::(mutex_lock|tf_shared_lock)$"), "mu_"),
           (re.compile(r"^absl::(lts_\w+::)?(MutexLock|ReaderMutexLock|WriterMutexLock|MutexLockMaybe)$"), "mu_"),
           (re.compile(r"^std::(lock_guard|unique_lock|scoped_lock|shared_lock)<"), "_M_device"),
           (re.compile(r"^std::(lock_guard|unique_lock|scoped_lock|shared_lock)<"), "_M_pm"))
_LOCKING = re.compile(r"^((tsl|tensorflow)::mutex::(lock|lock_shared)|std::(__)?(mutex|recursive_mutex|"
                      r"timed_mutex|shared_mutex)(_base)?::(lock|lock_shared)|absl::(lts_\w+::)?Mutex::"
                      r"(lock|Lock|ReaderLock|WriterLock|lock_shared))$")

# the frames between a lock function and the code that locks: the guard's constructor, gthread's wrapper
_CONSTRUCTING = re.compile(_LOCKING.pattern + r"|::(mutex_lock|tf_shared_lock|lock_guard|unique_lock|scoped_lock|"
                           r"MutexLock)(<.*>)?::\w+$|^__gthread_")


def _address(value: gdb.Value) -> Optional[int]:
    """The address a pointer or a reference field gives."""
    try:
        if value.type.strip_typedefs().code == gdb.TYPE_CODE_REF:
            return int(value.referenced_value().address)
        return int(value)
    except (gdb.error, RuntimeError, ValueError, TypeError):
        return None


# the keyword C's type printer puts before a class's name where the current language is C (an innermost frame
# in libc's assembly or C: ``class tsl::mutex_lock``)
_KEYWORD = re.compile(r"^(class|struct|union|enum)\s+")


def type_name(t: gdb.Type) -> str:
    """A type's name, typedefs stripped, the same whatever language gdb's current frame has (``str`` of a type
    follows it: in a C frame it reads ``class tsl::mutex_lock``)."""
    t = t.strip_typedefs().unqualified()
    return _KEYWORD.sub("", t.name or t.tag or str(t))


def _guard(value: gdb.Value) -> Optional[int]:
    """The mutex a guard object holds (None: no guard, or one that holds nothing)."""
    try:
        name = type_name(value.type)
    except (gdb.error, RuntimeError):
        return None
    for pattern, field in _GUARDS:
        if not pattern.search(name):
            continue
        try:
            if name.startswith("std::unique_lock<") and not bool(value["_M_owns"]):
                return None
            addr = _address(value[field])
        except (gdb.error, RuntimeError):
            continue
        if addr:
            return addr
    return None


def _where(frame: gdb.Frame) -> Dict[str, Any]:
    sal = frame.find_sal()
    name = frame.name() or "??"
    out: Dict[str, Any] = {"function": name.split("(", 1)[0], "line": sal.line if sal.symtab else None,
                           "file": sal.symtab.filename if sal.symtab else None}
    base = out["file"].rsplit("/", 1)[-1] if out["file"] else None
    out["where"] = "%s at %s:%s" % (out["function"], base, out["line"]) if base else out["function"]
    return out


def _frame_objects(frame: gdb.Frame) -> List[Dict[str, Any]]:
    """The guards a frame holds: its block's variables, up to the function's block."""
    try:
        block = frame.block()
    except RuntimeError:
        return []
    here = frame.find_sal()
    line = here.line if here.symtab else None
    out: List[Dict[str, Any]] = []
    seen = 0
    while block is not None and seen < MAX_SYMBOLS:
        for sym in block:
            seen += 1
            if seen > MAX_SYMBOLS:
                break
            if not sym.is_variable or sym.is_argument:
                continue
            if line is None or not sym.line or sym.line >= line:
                continue  # not constructed yet, or being constructed on this line
            try:
                addr = _guard(sym.value(frame))
            except (gdb.error, RuntimeError, TypeError):
                continue
            if addr:
                out.append({"mutex": addr, "variable": sym.name, "type": type_name(sym.type).split("<")[0]})
        if block.function is not None:
            break
        block = block.superblock
    return out


def _acquiring(frame: gdb.Frame) -> Optional[int]:
    """The mutex a frame of a lock function locks (its ``this``), where DWARF gives it."""
    name = (frame.name() or "").split("(", 1)[0]
    if not _LOCKING.search(name):
        return None
    try:
        return _address(frame.read_var("this"))
    except (gdb.error, RuntimeError, ValueError):
        return None


# The callee-saved registers of a thread's innermost frames, for the threads asked (absl's slow path keeps the
# mutex it locks in one: ``tfnative/core/locks.py``, ``absl_slow_path_wait``)
_CALLEE_SAVED = {"rbx": 3, "rbp": 6, "r12": 12, "r13": 13, "r14": 14, "r15": 15}


def _frame_registers(frame: gdb.Frame, level: int) -> Dict[str, Any]:
    regs = {number: register_value(frame, reg) for reg, number in _CALLEE_SAVED.items()}
    return {"level": level, "regs": {str(n): v for n, v in regs.items() if v is not None}}


def _look_at(frame: gdb.Frame, level: int, entry: Dict[str, Any], registers: bool) -> None:
    """What one frame says: the mutex it locks (the innermost lock function's, its caller named), the guards
    it holds, with ``registers`` its callee-saved registers."""
    if registers and level < MAX_WAIT_LEVEL:
        entry["frames"].append(_frame_registers(frame, level))
    if entry["acquiring"] is None and not entry["held"] and level < MAX_WAIT_LEVEL:
        addr = _acquiring(frame)
        if addr:
            caller = frame.older()
            while caller is not None and _CONSTRUCTING.search((caller.name() or "").split("(", 1)[0]):
                caller = caller.older()
            entry["acquiring"] = {"mutex": addr, "where": _where(caller or frame)["where"]}
    for obj in _frame_objects(frame):
        obj["where"] = _where(frame)["where"]
        entry["held"].append(obj)


def lock_objects(registers_of: Sequence[int] = ()) -> Dict[str, Any]:
    """``{"threads": [{"tid", "acquiring": {"mutex", "where"} or None, "held": [...], "frames": [{"level",
    "regs"}...]}]}`` for every thread; ``frames`` (the innermost frames' callee-saved registers) only for the
    threads ``registers_of`` names."""
    result: Dict[str, Any] = {"threads": []}
    for th in each_thread():
        entry: Dict[str, Any] = {"tid": th.ptid[1], "acquiring": None, "held": [], "frames": []}
        frame: Optional[gdb.Frame] = gdb.newest_frame()
        level = 0
        while frame is not None and level < MAX_FRAMES:
            try:
                _look_at(frame, level, entry, th.ptid[1] in registers_of)
                frame = frame.older()
            except (gdb.error, RuntimeError):  # a frame gdb cannot read: the walk of this thread ends there
                break
            level += 1
        result["threads"].append(entry)
    return result
