"""A thread in the hang verdict's words: where it is (``where``, ``user_frame``), the call it is blocked in
(``blocked_in``), who it is (``who``: "the main thread", "thread 12 tf_Compute"), whether it is idle, what its
work is, and the callers of a tf.function said together.  What ``analysis/verdict.py``'s patterns and
``analysis/culprit.py`` say of a thread; pure.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

from ..core import frameclass
from ..core.model import (
    EventFrame,
    EventNativeFrame,
    EventPythonFrame,
    EventThread,
    NativeFrame,
    Pool,
    PythonFrame,
)
from ..core.tensorflow.executors import is_any_pool_worker, tf_wait

# Native frames that only carry a call from Python to a C function (ctypes, libffi), and the interpreter's.
CALL_LIB_RE = re.compile(r"^(libffi|_ctypes)")
# Built-ins a thread commonly waits in, by their C function in the interpreter.
BUILTINS = {"lock_PyThread_acquire_lock": "lock.acquire", "rlock_acquire": "RLock.acquire",
            "time_sleep": "time.sleep", "select_select": "select.select", "select_select_impl": "select.select",
            "os_read": "os.read", "os_read_impl": "os.read", "os_waitpid_impl": "os.waitpid",
            "_queue_SimpleQueue_get_impl": "SimpleQueue.get", "sock_recv": "socket.recv",
            "sock_accept": "socket.accept", "take_gil": "the GIL"}
KERNEL_RE = re.compile(r"::Compute(Async)?\(")
WAITING_STATES = ("S", "D")


# A GCC clone of a function (``time_sleep.lto_priv.0``, ``f.constprop.0.isra.0``): the function's own name.
CLONE_RE = re.compile(r"(\.(lto_priv|constprop|isra|part|cold|localalias)(\.\d+)?)+$")


def base_name(name: str) -> str:
    return CLONE_RE.sub("", name.split("(", 1)[0].split("@", 1)[0].strip())


def python_frames(t: EventThread) -> List[EventPythonFrame]:
    return [f for f in t.frames if isinstance(f, PythonFrame)]


def user_frame(t: EventThread) -> Optional[EventPythonFrame]:
    """The thread's innermost frame of the user's own code."""
    return next((f for f in python_frames(t) if f.user), None)


def where(f: Optional[EventFrame]) -> str:
    """``hold_gil at app.py:15``."""
    if f is None:
        return "?"
    return "%s at %s:%s" % (f.function or "?", os.path.basename(f.file or "?"), f.line)


def blocked_in(t: EventThread) -> Optional[str]:
    """The native call a thread is in: ``sleep()`` (a C function its innermost Python frame called, through
    ctypes or an extension), ``lock.acquire()`` (a built-in of the interpreter), or its innermost named
    frame when it runs no Python; None when it runs Python itself (its innermost frame is a Python frame)."""
    frames = t.frames
    if not frames or isinstance(frames[0], PythonFrame):
        return None
    inner: List[EventNativeFrame] = []
    for f in frames:
        if isinstance(f, PythonFrame):
            break
        if isinstance(f, NativeFrame) and not frameclass.is_glue(f):
            inner.append(f)
    if not python_frames(t):
        named = [f for f in inner if (f.function or "??") != "??"]
        return base_name(named[0].function or "") if named else None
    for f in reversed(inner):  # from the call the Python frame made, inwards
        lib = f.library or ""
        if CALL_LIB_RE.match(lib):
            continue  # ctypes and libffi carry the call to the function
        name = base_name(f.function or "??")
        if frameclass.INTERPRETER_LIB_RE.match(lib):  # a built-in function of the interpreter
            return BUILTINS.get(name, name) if name != "??" else "a built-in function"
        return name if name != "??" else "?? in %s" % lib
    return None


def kernel_frame(t: EventThread) -> Optional[EventNativeFrame]:
    """The innermost kernel frame (an op's ``Compute``) of a thread, preferring one with its op known."""
    kernels = [f for f in t.frames if isinstance(f, NativeFrame) and KERNEL_RE.search(f.function or "")]
    return next((f for f in kernels if f.op), kernels[0] if kernels else None)


def who(t: EventThread, pid: Optional[int], pool: Optional[Pool] = None) -> str:
    """"the main thread", "thread 12 tf_Compute" (its OS name), "the inter-op pool's thread 12" (a worker of
    an unnamed inter-op pool, ``pool`` the event's summary)."""
    if pid is not None and t.tid == pid:
        return "the main thread"
    if pool is not None and pool.unnamed and t.tid in pool.placed("inter-op"):
        return "the inter-op pool's thread %s" % t.tid
    return "thread %s %s" % (t.tid, t.name or "")


def is_idle(t: EventThread) -> bool:
    """The thread waits (sleeping in the kernel, or its innermost frame native when the state is unknown)."""
    state = (t.kernel or {}).get("state")
    if state is not None:
        return state in WAITING_STATES
    return blocked_in(t) is not None


def in_state(t: EventThread) -> str:
    """"blocked in sleep()", "running sleep()" (kernel state R), "in sleep()" (state unknown)."""
    if not t.frames:
        return "its stack unreadable"
    fn = blocked_in(t)
    if fn is None:
        return "running Python"
    state = (t.kernel or {}).get("state")
    verb = "blocked in" if state in WAITING_STATES else "running" if state == "R" else "in"
    py = next(iter(python_frames(t)), None)
    under = "" if py is None or py.user else " under %s" % (py.function or "?")
    return "%s %s%s" % (verb, fn if " " in fn else fn + "()", under)


def callers_of(threads: List[EventThread]) -> List[EventThread]:
    """Threads that wait for a tf.function they called or a ``Session.run`` (TensorFlow 1's graphs), not
    executor threads working for one."""
    return [t for t in threads if (t.tf_function and not t.tf_function.how or tf_wait(t) == "Session.run")
            and not is_any_pool_worker(t)]


def function_phrase(callers: List[EventThread], pid: Optional[int]) -> str:
    """"the main thread waits for tf.function step at app.py:20", callers of the same function at the same
    line grouped ("threads 12, 13 wait for tf.function step at app.py:31")."""
    groups: Dict[Tuple[Any, ...], List[EventThread]] = {}
    for t in callers:
        fn = t.tf_function
        name = (fn.python_function or fn.name) if fn else None
        groups.setdefault(("tf.function %s" % name if fn else "Session.run", user_where(t)), []).append(t)
    parts = []
    for (what, at), ts in groups.items():
        subject = who(ts[0], pid) if len(ts) == 1 else "threads %s" % ", ".join(str(t.tid) for t in ts)
        parts.append("%s wait%s for %s at %s" % (subject, "s" if len(ts) == 1 else "", what, at))
    return "; ".join(parts)


def group_text(workers: List[EventThread], label: str = "") -> str:
    """"thread 5 in ...; threads 6, 7 in ...": workers doing the same thing (the same text) grouped;
    ``label`` goes before "thread"."""
    groups: Dict[str, List[EventThread]] = {}
    for t in workers:
        groups.setdefault(work_of(t) + stuck_note(t), []).append(t)
    return "; ".join("%s%s %s %s" % (label, "thread" if len(ts) == 1 else "threads",
                                     ", ".join(str(t.tid) for t in ts), text) for text, ts in groups.items())


def user_where(t: EventThread) -> str:
    f = python_where(t)
    return "%s:%s" % (os.path.basename(f.file or "?"), f.line) if f else "?"


def work_of(t: EventThread) -> str:
    """What a busy inter-op thread does: the callback (user line) or the kernel, and where it is blocked."""
    py = python_where(t)
    if t.gil == "waiting":
        state = "waiting for the GIL"
    else:
        state = in_state(t)
    if py is not None:
        return "in the tf.py_function callback %s, %s" % (where(py), state)
    k = kernel_frame(t)
    if k is not None:
        op_type, op_name = (k.op.type, k.op.name) if k.op else (None, None)
        label = op_type or base_name(k.function or "?")
        if op_name and op_name != op_type:
            label += ' "%s"' % op_name
        return "in kernel %s, %s" % (label, state)
    return state


def stuck_note(t: EventThread) -> str:
    if t.progress == "stuck":
        return " (stuck %.1f s)" % (t.stuck_s or 0.0)
    if t.progress == "moving":
        return " (moving between samples: slow, not stuck?)"
    return ""


def python_where(t: EventThread) -> Optional[EventPythonFrame]:
    """The user's innermost frame, else the innermost Python frame."""
    return user_frame(t) or next(iter(python_frames(t)), None)
