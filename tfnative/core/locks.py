"""What a blocked thread waits for where memory records who holds it: a pthread mutex, a Python lock.

Read while the snapshot still has the target's memory (a held process, gdb at a stop, a core), for the wait-for
graph (``analysis/waitgraph.py``), which has only the event afterwards.

- **A pthread mutex.**  A thread blocked in ``pthread_mutex_lock`` sleeps in ``futex`` on the mutex's lock word;
  the call's first argument (``rdi`` while the thread is in the system call, ``orig_rax`` 202) is its address.
  glibc's ``pthread_mutex_t`` on x86-64 starts ``int __lock; unsigned __count; int __owner; unsigned __nusers;
  int __kind``: ``__owner`` is the thread id of the holder.  Trusted only where the word says locked, the kind
  is one glibc defines and the owner is a thread id (a positive int).
- **A Python lock.**  A thread blocked in ``lock.acquire()`` / ``with lock:`` (``rlock_acquire``,
  ``lock_PyThread_acquire_lock`` on its stack, a Python frame above) waits for the lock its innermost Python
  frame names on its current line (``with lock_b:``, ``lock_b.acquire()``, ``self.lock.acquire()``).  The name
  is looked up in that frame's locals (a closure's variable: the object in its cell), then in ``__main__``; an
  object of type ``_thread.RLock`` records its owner's thread ident (``pthread_self``, the owner's ``fs_base``)
  in the word after its lock (at +24 in CPython 3.10 to 3.14: ``rlock_owner``, then
  ``_PyRecursiveMutex.thread``) and the count after that; trusted where the ident is 0 (free) or a thread of
  the process, or, where it is neither, said to be held by a thread that is not in this process (a lock taken
  before ``fork()``).  A ``_thread.lock`` records no owner: only its name is given.
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .model import NativeFrame, PythonFrame

Reader = Callable[[int, int], bytes]

FUTEX = 202  # x86-64 system call number
# glibc's names for the frames of a thread locking a mutex (``__GI___lll_lock_wait``, ``___pthread_mutex_lock``,
# ``lll_mutex_lock_optimized``...)
_MUTEX_WAIT_RE = re.compile(r"lll_lock_wait|lll_mutex_lock|pthread_mutex_lock|pthread_mutex_cond_lock")
_LOCK_WAIT_NAMES = ("rlock_acquire", "lock_PyThread_acquire_lock", "acquire_timed", "_PyMutex_LockTimed",
                    "PyMutex_LockTimed", "_PyRecursiveMutex_LockTimed", "lock_acquire", "lock_PyThread_acquire_lock"
                    ".lto_priv.0")
MAX_MUTEX_KIND = 0x3FF  # glibc's kinds: 0-3, robust 16, PI 32, PP 64, shared 128, elision 256/512
RLOCK_OWNER_OFFSET = 24
CELL_REF_OFFSET = 16  # a cell object's ``ob_ref``, after its object header (CPython 3.11 to 3.14)
_NAME_RE = re.compile(r"\bwith\s+([A-Za-z_][\w.]*)\s*(?:[:,]|as\b)|([A-Za-z_][\w.]*)\.acquire\s*\(")
MAX_NAME_PARTS = 4  # self.a.b.lock


def _base(name: str) -> str:
    return re.sub(r"(\.(lto_priv|constprop|isra|part|cold|localalias)(\.\d+)?)+$", "",
                  name.split("(", 1)[0].strip())


WAIT4, WAITID = 61, 247  # x86-64 system call numbers
P_PID = 1  # waitid's idtype for one process


def child_wait(regs: Mapping[str, int]) -> Optional[Dict[str, Any]]:
    """``{"resource", "owner": None, "process", "evidence"}`` for a thread in ``wait4``/``waitid`` for one
    child process (its pid the call's first argument, or waitid's second with ``P_PID``); None otherwise."""
    call = regs.get("orig_rax")
    pid = None
    if call == WAIT4:
        pid = _signed(regs.get("rdi"))
    elif call == WAITID and regs.get("rdi") == P_PID:
        pid = _signed(regs.get("rsi"))
    if call not in (WAIT4, WAITID):
        return None
    if pid is None or pid <= 0:
        return {"resource": "a child process", "owner": None, "evidence": "in %s for any child" % (
            "wait4" if call == WAIT4 else "waitid")}
    return {"resource": "child process %d" % pid, "owner": None, "process": pid,
            "evidence": "in %s for pid %d" % ("wait4" if call == WAIT4 else "waitid", pid)}


def _signed(value: Optional[int]) -> Optional[int]:
    if value is None:
        return None
    value &= (1 << 64) - 1
    value = value - (1 << 64) if value >= 1 << 63 else value
    return value if -(1 << 31) <= value < 1 << 31 else None


def futex_address(regs: Mapping[str, int]) -> Optional[int]:
    """The futex word a thread sleeps on, from its registers while it is in ``futex`` (None otherwise)."""
    if regs.get("orig_rax") != FUTEX:
        return None
    return regs.get("rdi") or None


def mutex_owner(read: Reader, addr: int) -> Optional[int]:
    """The thread id that holds the pthread mutex at ``addr`` (its lock word), or None where the bytes there
    are no locked mutex of a kind glibc defines."""
    owner: int
    try:
        lock, _count, owner, _nusers, kind = struct.unpack("<iIiIi", read(addr, 20))
    except (OSError, MemoryError, struct.error):
        return None
    if lock == 0 or owner <= 0 or not 0 <= kind <= MAX_MUTEX_KIND:
        return None
    return owner


def waits_in_mutex(frames: Sequence[Any]) -> bool:
    """Whether the thread's innermost frames (before any Python frame) lock a pthread mutex."""
    for f in frames:
        if isinstance(f, PythonFrame):
            return False
        if isinstance(f, NativeFrame) and _MUTEX_WAIT_RE.search(_base(f.function or "")):
            return True
    return False


def waits_in_python_lock(frames: Sequence[Any]) -> Optional[PythonFrame]:
    """The innermost Python frame of a thread blocked acquiring a Python lock (None: it is not)."""
    seen = False
    for f in frames:
        if isinstance(f, PythonFrame):
            return f if seen else None
        if isinstance(f, NativeFrame) and _base(f.function or "") in _LOCK_WAIT_NAMES:
            seen = True
    return None


def lock_name(source: Optional[str]) -> Optional[str]:
    """The variable a line takes a lock through: ``with lock_b:`` -> ``lock_b``, ``self.lock.acquire()`` ->
    ``self.lock``; None where the line names none."""
    m = _NAME_RE.search(source or "")
    if m is None:
        return None
    name = m.group(1) or m.group(2)
    return name if name.count(".") < MAX_NAME_PARTS else None


def mutex_wait(read: Reader, frames: Sequence[Any], regs: Mapping[str, int], tids: Sequence[int]
               ) -> Optional[Dict[str, Any]]:
    """``{"resource", "owner", "evidence"}`` for a thread blocked locking a pthread mutex; ``owner`` None where
    the recorded holder is no thread of the process (``tids``)."""
    if not waits_in_mutex(frames):
        return None
    addr = futex_address(regs)
    if addr is None:
        return None
    owner = mutex_owner(read, addr)
    if owner is None:
        return None
    out: Dict[str, Any] = {"resource": "mutex 0x%x" % addr, "owner": owner if owner in tids else None, "mutex": addr,
                           "evidence": "futex on 0x%x, a pthread mutex whose __owner is %d" % (addr, owner)}
    if owner not in tids:
        out["evidence"] += ", no thread of this process (taken before a fork?)"
        out["lost_owner"] = owner
    return out


def python_lock_wait(objects: Any, function: str, frame_code: int, frame_addr: int, source: Optional[str],
                     idents: Mapping[int, int]) -> Optional[Dict[str, Any]]:
    """``{"resource", "owner", "evidence"}`` for the lock the frame ``function`` at ``frame_addr`` (running
    ``frame_code``) waits for on its line ``source``; ``objects``: the capture's ``pyobjects.ObjectReader``;
    ``idents``: thread ident (``pthread_self``) -> tid of the process's threads.  None where the line names no
    lock object.  In ``threading``'s ``Thread.join`` the owner is the joined thread (``self._ident``)."""
    r = objects.r
    if function == "Thread._wait_for_tstate_lock":  # Thread.join(): the lock the joined thread holds
        return _join_wait(objects, frame_code, frame_addr, idents)
    name = lock_name(source)
    if name is None:
        return None
    parts = name.split(".")
    try:
        obj = r.local_objects(frame_code, frame_addr, [parts[0]]).get(parts[0])
        if obj is not None and objects.type_name(obj) == "cell":  # a closure's variable: the object in its cell
            obj = r.u64(obj + CELL_REF_OFFSET) or None
        if obj is None:
            obj = objects.module_global("__main__", parts[0])
        for attr in parts[1:]:
            if obj is None:
                break
            obj = objects.attribute(obj, attr)
        if obj is None:
            return None
        kind = objects.type_name(obj)
    except (MemoryError, OSError, struct.error):
        return None
    if kind not in ("_thread.RLock", "_thread.lock"):
        return None
    short = "RLock" if kind == "_thread.RLock" else "Lock"
    out: Dict[str, Any] = {"resource": "%s %s" % (short, name), "owner": None,
                           "evidence": "%s on the line (a %s)" % (name, kind)}
    if kind == "_thread.RLock":
        try:
            ident = r.u64(obj + RLOCK_OWNER_OFFSET)
        except (MemoryError, OSError, struct.error):
            return out
        if ident and ident in idents:
            out["owner"] = idents[ident]
            out["evidence"] += " owned by thread %d" % idents[ident]
        elif ident:
            out["lost_owner"] = ident
            out["evidence"] += " owned by thread ident 0x%x, no thread of this process (taken before a fork?)" % ident
    return out


def _join_wait(objects: Any, frame_code: int, frame_addr: int, idents: Mapping[int, int]
               ) -> Optional[Dict[str, Any]]:
    r = objects.r
    try:
        me = r.local_objects(frame_code, frame_addr, ["self"]).get("self")
        ident_obj = objects.attribute(me, "_ident") if me else None
        ident = r.int_value(ident_obj) if ident_obj else None
    except (MemoryError, OSError, struct.error, ValueError):
        return None
    if not ident:
        return None
    tid = idents.get(ident)
    return {"resource": "the end of the thread it joins", "owner": tid,
            "evidence": "Thread.join() of thread ident 0x%x%s" % (
                ident, " (thread %d)" % tid if tid else ", no thread of this process")}


def thread_idents(states: List[Any]) -> Dict[int, int]:
    """Thread ident (``pthread_self``) -> LWP id of the interpreter's thread states (``pyframes.ThreadPy``)."""
    return {t.pthread_id: t.native_id for t in states if t.pthread_id and t.native_id}


# -- absl::Mutex, nsync_mu (TensorFlow's tensorflow::mutex / tsl::mutex, built on one or the other) --------
# A thread blocked locking an absl::Mutex sleeps on its own per-thread semaphore, not on the mutex: the mutex's
# address is ``this`` of absl's slow path (``Mutex::LockSlow`` ... ``LockSlowLoop``), which each keeps in a
# callee-saved register its prologue copies ``rdi`` into (``mov %rdi,%r12``); the unwinder recovers that
# register for the frame.  Trusted only where the word there says held (a writer or readers) with waiters.
# absl's release builds record no owner: the holder is read from the frames' lock objects (gdb, DWARF:
# ``lock_objects_wait``), or is said to be unknown.
# The same holds of nsync's ``nsync_mu`` (``tsl::mutex`` where the TensorFlow in front of tfnative builds it
# on nsync, as its frames say: ``nsync::nsync_mu_lock`` -> ``nsync_mu_lock_slow_`` -> ``nsync_mu_semaphore_p``):
# its slow path keeps the mutex in a callee-saved register too; its word (32 bits) records no owner either.
ABSL_MU_READER, ABSL_MU_WAIT, ABSL_MU_WRITER = 0x01, 0x04, 0x08
NSYNC_MU_WLOCK, NSYNC_MU_WAITING, NSYNC_MU_RLOCK_FIELD = 0x01, 0x04, 0xFFFFFF00
_ABSL_RE = re.compile(r"^absl::(?:lts_\w+::)?(?:Mutex|synchronization_internal|base_internal)::|^AbslInternal|"
                      r"^nsync::nsync_mu_(?:lock|rlock|lock_slow_|semaphore_p\w*)$")
_ABSL_SLOW_RE = re.compile(r"^absl::(?:lts_\w+::)?Mutex::(LockSlowLoop|LockSlowWithDeadline|LockSlow)$|"
                           r"^nsync::nsync_mu_lock_slow_$")
# the call that began the wait: a plain lock, not a condition wait (Await, LockWhen, a Notification, a CondVar)
_ABSL_LOCK_RE = re.compile(r"^absl::(?:lts_\w+::)?Mutex::(LockSlow|lock|Lock|ReaderLock|reader_lock|WriterLock)$|"
                           r"^nsync::nsync_mu_(lock|rlock)$")
_WAIT_FRAME_RE = re.compile(r"^(syscall|__GI_syscall|futex|__futex|__lll_|___?pthread_|lll_|__GI___lll)")
PROLOGUE = 48  # bytes of a slow-path function searched for the copy of ``this``
# ``mov %rdi,REG`` (both encodings) -> REG's DWARF number: rbx 3, rbp 6, r12-r15
_MOV_RDI = {b"\x48\x89\xfb": 3, b"\x48\x8b\xdf": 3, b"\x48\x89\xfd": 6, b"\x48\x8b\xef": 6,
            b"\x49\x89\xfc": 12, b"\x4c\x8b\xe7": 12, b"\x49\x89\xfd": 13, b"\x4c\x8b\xef": 13,
            b"\x49\x89\xfe": 14, b"\x4c\x8b\xf7": 14, b"\x49\x89\xff": 15, b"\x4c\x8b\xff": 15}


def absl_lock_frames(frames: Sequence[Any]) -> Optional[int]:
    """The index (among the thread's native frames) of the first frame past absl's, where the innermost frames
    are a plain lock of an absl::Mutex blocked in its slow path; None where they are not (a condition wait,
    a Notification, no absl at all)."""
    native = [f for f in frames if isinstance(f, NativeFrame)]
    outer: Optional[str] = None
    for i, f in enumerate(native[:MAX_WAIT_FRAMES]):
        name = _base(f.function or "")
        if _ABSL_RE.search(name):
            outer = name
            continue
        if outer is None and _WAIT_FRAME_RE.search(name):
            continue
        return i if outer is not None and _ABSL_LOCK_RE.search(outer) else None
    return None


MAX_WAIT_FRAMES = 16  # a lock's waiting frames looked through at the most


def this_register(code: bytes) -> Optional[int]:
    """The DWARF number of the callee-saved register a function's prologue (``code``, its first bytes) copies
    its first argument into; None where none is seen."""
    best: Optional[Tuple[int, int]] = None
    for pattern, reg in _MOV_RDI.items():
        at = code.find(pattern)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, reg)
    return best[1] if best else None


def absl_held(read: Reader, addr: int) -> bool:
    """Whether the word at ``addr`` reads as an absl::Mutex held (a writer or readers) that has waiters."""
    if addr % 8:
        return False
    try:
        (word,) = struct.unpack("<Q", read(addr, 8))
    except (OSError, MemoryError, struct.error):
        return False
    return bool(word & (ABSL_MU_WRITER | ABSL_MU_READER)) and bool(word & ABSL_MU_WAIT)


def nsync_held(read: Reader, addr: int) -> bool:
    """Whether the word at ``addr`` reads as an nsync_mu held (a writer or readers) that has waiters."""
    if addr % 4:
        return False
    try:
        (word,) = struct.unpack("<I", read(addr, 4))
    except (OSError, MemoryError, struct.error):
        return False
    return bool(word & (NSYNC_MU_WLOCK | NSYNC_MU_RLOCK_FIELD)) and bool(word & NSYNC_MU_WAITING)


def absl_mutex_wait(read: Reader, named: Sequence[NativeFrame], regs: Sequence[Mapping[int, int]]
                    ) -> Optional[Dict[str, Any]]:
    """``{"resource", "owner": None, "mutex", "evidence"}`` for a thread blocked locking an absl::Mutex, its
    address read from the slow path's frames (``named``, and each one's registers by DWARF number: ``regs``);
    None where the frames are no such wait or no address checks."""
    at = absl_lock_frames(named)
    if at is None:
        return None
    entry = _base(named[at - 1].function or "")  # the slow path's entry: absl's LockSlow, nsync_mu_lock
    return absl_slow_path_wait(read, [(_base(f.function or ""), f.start, r)
                                      for f, r in zip(named[:MAX_WAIT_FRAMES], regs)], entry)


def absl_slow_path_wait(read: Reader, frames: Sequence[Tuple[str, Optional[int], Mapping[int, int]]], entry: str
                        ) -> Optional[Dict[str, Any]]:
    """``absl_mutex_wait``'s answer from the slow path's frames alone: (function, entry address, registers by
    DWARF number) each, as tfnative's unwinder or gdb gives them; ``entry``: the slow path's first function
    (``absl::lts_*::Mutex::LockSlow``, ``nsync::nsync_mu_lock``)."""
    for name, start, r in frames:
        if not _ABSL_SLOW_RE.search(name) or not start:
            continue
        try:
            reg = this_register(read(start, PROLOGUE))
        except (OSError, MemoryError):
            continue
        addr = r.get(reg) if reg is not None else None
        if not addr:
            continue
        if name.startswith("nsync::"):
            if nsync_held(read, addr):
                return {"resource": "mutex 0x%x" % addr, "owner": None, "mutex": addr,
                        "evidence": "blocked in %s on mutex 0x%x (a tsl::mutex on nsync); nsync records no "
                                    "owner" % (entry, addr)}
        elif absl_held(read, addr):
            return {"resource": "mutex 0x%x" % addr, "owner": None, "mutex": addr,
                    "evidence": "blocked in absl::Mutex::%s on mutex 0x%x; no owner recorded (release absl)" % (
                        entry.split("::")[-1], addr)}
    return None


# -- the lock objects in frames (gdb, DWARF): who holds a mutex -------------------------------------------
def lock_objects_wait(tid: int, objects: Mapping[int, Mapping[str, Any]], current: Optional[Mapping[str, Any]],
                      read: Optional[Reader] = None, frames: Sequence[Any] = ()) -> Optional[Dict[str, Any]]:
    """The lock wait of thread ``tid`` from the lock objects gdb read in every thread's frames (``objects``:
    tid -> ``{"acquiring": {"mutex", "where"} or None, "held": [{"mutex", "variable", "type", "where"}]}``,
    gdb_scripts/tfnative_gdb/lockobjects.py) and what memory said (``current``: ``mutex_wait``'s or
    ``absl_mutex_wait``'s answer, or None).  The holder: the thread itself where one of its own frames holds a
    lock object on the mutex (a self-deadlock), else the thread whose frames hold one, else the pthread
    mutex's recorded owner; ``held_at`` says where.  With ``read`` (the process's memory) and the thread's
    ``frames``, an absl::Mutex no lock function's ``this`` gives is read from absl's slow path's registers
    (``"frames"``: gdb's, by frame level; ``absl_slow_path_wait``)."""
    mine = objects.get(tid) or {}
    at = absl_lock_frames(frames) if read is not None and current is None and not mine.get("acquiring") else None
    if at is not None and read is not None:
        native = [f for f in frames if isinstance(f, NativeFrame)]
        regs = {r.get("level"): {int(k): v for k, v in (r.get("regs") or {}).items()} for r in mine.get("frames") or []}
        slow = [(_base(f.function or ""), f.start, regs.get(f.level) or {}) for f in native[:MAX_WAIT_FRAMES]]
        current = absl_slow_path_wait(read, slow, _base(native[at - 1].function or ""))
    acquiring = mine.get("acquiring") or {}
    addr = acquiring.get("mutex") or (current or {}).get("mutex")
    if not addr:
        return dict(current) if current else None
    out: Dict[str, Any] = dict(current) if current else {
        "resource": "mutex 0x%x" % addr, "owner": None, "mutex": addr,
        "evidence": "locking mutex 0x%x in %s" % (addr, acquiring.get("where") or "?")}
    out["mutex"] = addr
    holders = [(tid, h) for h in mine.get("held") or [] if h.get("mutex") == addr]
    holders += [(other, h) for other, o in sorted(objects.items()) if other != tid
                for h in o.get("held") or [] if h.get("mutex") == addr]
    if current is not None and current.get("owner"):  # the pthread mutex's own record comes first
        holders = [x for x in holders if x[0] == current["owner"]] or holders
    if not holders:
        if current is None or current.get("owner") is None:
            out["evidence"] += "; no lock object on it in any thread's frames (taken without a guard object, " \
                               "or in a frame without DWARF)"
        return out
    holder, h = holders[0]
    out["owner"] = holder
    out["held_at"] = h.get("where") or "?"
    what = "%s %s" % (h.get("type") or "a lock", h.get("variable") or "")
    if holder == tid:
        out["evidence"] += "; its own frame %s holds it (%s): a self-deadlock" % (out["held_at"], what.strip())
    else:
        out["evidence"] += "; thread %d holds it in %s (%s)" % (holder, out["held_at"], what.strip())
    return out
