"""GIL state of a thread derived from its native frames (no code run in the target).

A thread waits for the GIL when one of its innermost native frames is CPython's ``take_gil`` or an exported
entry point that calls it (``PyEval_RestoreThread``, ``PyEval_AcquireThread``, ``PyGILState_Ensure``): the
stripped Debian interpreter exports no ``take_gil`` symbol, so there the exported caller names the wait.
Where ``take_gil`` is a static function with no symbol (stripped interpreter, called from the eval loop's
breaker), the wait is recognised as a ``pthread_cond_timedwait``/``pthread_cond_wait`` called directly from an
unnamed frame of the interpreter's own object (``python3.X`` or ``libpython3.X``): CPython 3.10-3.13 use a
condition variable there only for the GIL (its thread locks use semaphores).
Which thread *holds* the GIL (``_PyRuntime.ceval.gil`` / the interpreter's ``ceval.gil``) is not read yet.
"""

from typing import Dict, List, Optional

WAIT_FUNCTIONS = ("take_gil", "PyEval_RestoreThread", "PyEval_AcquireThread", "PyGILState_Ensure",
                  "PyEval_AcquireLock")
# Frames above the wait that may sit between it and the innermost frame (condition wait, futex, libc).
INNERMOST_SCAN = 8


def _base(name: str) -> str:
    return name.split("(")[0].split("@")[0].strip()


COND_WAITS = ("pthread_cond_timedwait", "pthread_cond_wait", "pthread_cond_clockwait")


def _interpreter_object(library: Optional[str]) -> bool:
    base = (library or "").rsplit("/", 1)[-1]
    return base.startswith("python3") or base.startswith("libpython3")


def gil_state_from_native(native: List[Dict]) -> Optional[str]:
    """``"waiting"`` when one of the ``INNERMOST_SCAN`` innermost native frames (innermost first) is a GIL
    acquisition, else ``None``. Only ``kind == "native"`` frames (or frames with no kind) are considered."""
    for f in native[:INNERMOST_SCAN]:
        if f.get("kind", "native") != "native":
            continue
        name = _base(f.get("function") or "")
        if name in WAIT_FUNCTIONS:
            return "waiting"
        if name in COND_WAITS:
            i = native.index(f)
            caller = native[i + 1] if i + 1 < len(native) else None
            if (caller is not None and (caller.get("function") or "??") == "??"
                    and _interpreter_object(caller.get("library"))):
                return "waiting"
    return None
