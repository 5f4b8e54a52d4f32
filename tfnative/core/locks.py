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
  is looked up in that frame's locals, then in ``__main__``; an object of type ``_thread.RLock`` records its
  owner's thread ident (``pthread_self``, the owner's ``fs_base``) in the word after its lock (at +24 in
  CPython 3.10 to 3.14: ``rlock_owner``, then ``_PyRecursiveMutex.thread``) and the count after that; trusted
  where the ident is 0 (free) or a thread of the process, or, where it is neither, said to be held by a thread
  that is not in this process (a lock taken before ``fork()``).  A ``_thread.lock`` records no owner: only its
  name is given.
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

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
    out: Dict[str, Any] = {"resource": "mutex 0x%x" % addr, "owner": owner if owner in tids else None,
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
