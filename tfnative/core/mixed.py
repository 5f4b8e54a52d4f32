"""Merge one thread's native frames with its Python frames (pure).

Each native ``_PyEval_EvalFrameDefault`` frame is replaced, in place, by the
Python frames that this call of the eval loop is running.  The count of eval
frames must equal the count of Python frame groups; when it does not (a stack
cut short, a thread caught while entering or leaving the eval loop) we never
guess: the thread is marked ``"merge": "mismatch"`` and both stacks are kept.
"""

from typing import Dict, List, Optional

EVAL_FUNCTION = "_PyEval_EvalFrameDefault"


def is_eval_frame(frame: Dict) -> bool:
    if frame.get("kind") != "native" or frame.get("inline"):
        return False
    name = frame.get("function") or ""
    return name == EVAL_FUNCTION or name.startswith(EVAL_FUNCTION + ".")


def merge(native: List[Dict], groups: Optional[List[List[Dict]]]) -> Dict:
    """Return ``{"frames": [...], "merge": status, ...}`` for one thread.

    ``native`` and each group are innermost first; ``groups`` is None for a
    thread that has no Python thread state.
    """
    evals = [i for i, f in enumerate(native) if is_eval_frame(f)]
    if groups is None:
        status = "native" if not evals else "no-thread-state"
        return {"frames": list(native), "merge": status}
    if len(evals) != len(groups):
        python = [f for g in groups for f in g]
        return {
            "frames": list(native),
            "merge": "mismatch",
            "merge_detail": "%d _PyEval_EvalFrameDefault native frame(s) but %d Python "
            "eval group(s)" % (len(evals), len(groups)),
            "python_frames": python,
        }
    out: List[Dict] = []
    gi = 0
    for f in native:
        if is_eval_frame(f):
            for p in groups[gi]:
                q = dict(p)
                q["eval_address"] = f.get("address")
                out.append(q)
            gi += 1
        else:
            out.append(f)
    return {"frames": out, "merge": "ok"}
