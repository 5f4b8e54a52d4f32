"""GIL state of a thread derived from its native frames (no code run in the target).

A thread waits for the GIL when one of its innermost native frames is CPython's ``take_gil`` or an exported
entry point that calls it (``PyEval_RestoreThread``, ``PyEval_AcquireThread``, ``PyGILState_Ensure``): the
stripped Debian interpreter exports no ``take_gil`` symbol, so there the exported caller names the wait.
Which thread *holds* the GIL (``_PyRuntime.ceval.gil`` / the interpreter's ``ceval.gil``) is not read yet.
"""

from typing import Dict, List, Optional

WAIT_FUNCTIONS = ("take_gil", "PyEval_RestoreThread", "PyEval_AcquireThread", "PyGILState_Ensure",
                  "PyEval_AcquireLock")
# Frames above the wait that may sit between it and the innermost frame (condition wait, futex, libc).
INNERMOST_SCAN = 8


def _base(name: str) -> str:
    return name.split("(")[0].split("@")[0].strip()


def gil_state_from_native(native: List[Dict]) -> Optional[str]:
    """``"waiting"`` when one of the ``INNERMOST_SCAN`` innermost native frames (innermost first) is a GIL
    acquisition, else ``None``. Only ``kind == "native"`` frames (or frames with no kind) are considered."""
    for f in native[:INNERMOST_SCAN]:
        if f.get("kind", "native") != "native":
            continue
        if _base(f.get("function") or "") in WAIT_FUNCTIONS:
            return "waiting"
    return None
