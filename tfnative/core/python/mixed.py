"""Merge one thread's native frames with its Python frames (pure).

Each native ``_PyEval_EvalFrameDefault`` frame is replaced, in place, by the
Python frames that this call of the eval loop is running.  The count of eval
frames must equal the count of Python frame groups; when it does not (a stack
cut short, a thread caught while entering or leaving the eval loop) we never
guess: the thread is marked ``"merge": "mismatch"`` and both stacks are kept.
"""

from typing import List, Optional

from ..model import Frame, NativeFrame, PythonFrame, Thread

EVAL_FUNCTION = "_PyEval_EvalFrameDefault"


def is_eval_frame(frame: object) -> bool:
    if not isinstance(frame, NativeFrame) or frame.inline:
        return False
    name = frame.function or ""
    return name == EVAL_FUNCTION or name.startswith(EVAL_FUNCTION + ".")


def merge(thread: Thread, native: List[NativeFrame], groups: Optional[List[List[PythonFrame]]]) -> None:
    """Set ``thread``'s ``frames`` and ``merge`` (and, on a mismatch, ``merge_detail`` and
    ``python_frames``) from its ``native`` frames and Python ``groups``.

    ``native`` and each group are innermost first; ``groups`` is None for a
    thread that has no Python thread state.  The Python frames merged get the
    address of their eval frame (``eval_address``).
    """
    evals = [i for i, f in enumerate(native) if is_eval_frame(f)]
    if groups is None:
        thread.frames = list(native)
        thread.merge = "native" if not evals else "no-thread-state"
        return
    if len(evals) != len(groups):
        thread.frames = list(native)
        thread.merge = "mismatch"
        thread.merge_detail = "%d _PyEval_EvalFrameDefault native frame(s) but %d Python eval group(s)" % (
            len(evals), len(groups))
        thread.python_frames = [f for g in groups for f in g]
        return
    out: List[Frame] = []
    gi = 0
    for f in native:
        if is_eval_frame(f):
            for p in groups[gi]:
                p.eval_address = f.address
                out.append(p)
            gi += 1
        else:
            out.append(f)
    thread.frames = out
    thread.merge = "ok"
