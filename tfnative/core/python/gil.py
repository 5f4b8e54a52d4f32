"""What the interpreter's lock and collector say about a thread: GIL held or awaited, inside a collection.

The holder comes from memory (``PythonReader.gil_holder``); this module reads the rest from a thread's
native frames (no code run in the target).

A thread waits for the GIL when one of its innermost native frames is CPython's ``take_gil`` or an exported
entry point that calls it (``PyEval_RestoreThread``, ``PyEval_AcquireThread``, ``PyGILState_Ensure``): the
stripped Debian interpreter exports no ``take_gil`` symbol, so there the exported caller names the wait.
Where ``take_gil`` is a static function with no symbol (stripped interpreter, called from the eval loop's
breaker), the wait is recognised as a ``pthread_cond_timedwait``/``pthread_cond_wait`` called directly from an
unnamed frame of the interpreter's own object (``python3.X`` or ``libpython3.X``): CPython 3.10-3.15 use a
condition variable there only for the GIL (thread locks use semaphores; from 3.13 they park through the
exported, so named, ``_PySemaphore_Wait``).
A thread is inside a garbage collection when it holds the GIL while the interpreter's ``gc.collecting`` flag
is set, or when a frame of the interpreter's own object is one of the collector's functions (as pystack
decides; the stripped interpreter names none of them, so there the flag decides).
"""

from typing import List, Optional

from ..model import NativeFrame

WAIT_FUNCTIONS = ("take_gil", "PyEval_RestoreThread", "PyEval_AcquireThread", "PyGILState_Ensure",
                  "PyEval_AcquireLock")
# Frames above the wait that may sit between it and the innermost frame (condition wait, futex, libc).
INNERMOST_SCAN = 8


def _base(name: str) -> str:
    """The C name of a frame's function: without arguments, symbol version, and the suffix GCC gives a
    copy it made of a static function (``take_gil.lto_priv.0``, ``collect.constprop.0``, ``.cold``: the
    names of Debian's 3.14 and 3.15, built with LTO)."""
    return name.split("(")[0].split("@")[0].strip().split(".")[0]


COND_WAITS = ("pthread_cond_timedwait", "pthread_cond_wait", "pthread_cond_clockwait")


def interpreter_object(library: Optional[str]) -> bool:
    """Whether a frame's library is the interpreter's own object (``python3.X``, ``libpython3.X``)."""
    base = (library or "").rsplit("/", 1)[-1]
    return base.startswith("python3") or base.startswith("libpython3")


def gil_state_from_native(native: List[NativeFrame]) -> Optional[str]:
    """``"waiting"`` when one of the ``INNERMOST_SCAN`` innermost native frames (innermost first) is a GIL
    acquisition, else ``None``.  Only native frames are considered."""
    for i, f in enumerate(native[:INNERMOST_SCAN]):
        if not isinstance(f, NativeFrame):
            continue
        name = _base(f.function or "")
        if name in WAIT_FUNCTIONS:
            return "waiting"
        if name in COND_WAITS:
            caller = native[i + 1] if i + 1 < len(native) else None
            if (caller is not None and (caller.function or "??") == "??"
                    and interpreter_object(caller.library)):
                return "waiting"
    return None


# The collector's functions in CPython 3.10-3.13 (static ones only where the interpreter has a .symtab).
GC_FUNCTIONS = frozenset(("collect", "collect_with_callback", "gc_collect_main", "gc_collect_with_callback",
                          "gc_collect_impl", "gc_collect_region", "gc_collect_full", "gc_collect_young",
                          "gc_collect_increment", "_PyGC_Collect", "PyGC_Collect", "_PyGC_CollectNoFail"))


def in_collection(native: List[NativeFrame], holds_gil: bool, collecting: bool) -> bool:
    """Whether the thread runs a garbage collection: it holds the GIL while ``collecting`` is set, or one of
    its native frames in the interpreter's object is a collector function."""
    if holds_gil and collecting:
        return True
    return any(isinstance(f, NativeFrame) and _base(f.function or "") in GC_FUNCTIONS
               and interpreter_object(f.library) for f in native)
