"""The crashing op's call as the crash report's op line shows it (issue #45): each input's argument name and the
attributes that differ from their defaults, both from the op's definition read from memory
(``core/tensorflow/opdefs.py``), no subprocess.  An attribute the inputs carry (a type attribute such as ``T``,
a list's length ``N``) or the runtime adds (``_XlaHasReferenceVars``: in no OpDef) is left out, as
``tf.raw_ops`` infers or ignores it."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

from ..core.model import Event, Json, NativeFrame, Op, PythonFrame
from . import pyop


def same_value(value: Any, default: Any) -> bool:
    """An attribute's value read from memory is its default's (lists and shapes element by element, a bool no
    int)."""
    if isinstance(value, dict) and isinstance(default, dict):
        return value.keys() == default.keys() and all(same_value(value[k], default[k]) for k in value)
    if isinstance(value, list) and isinstance(default, list):
        return len(value) == len(default) and all(same_value(a, b) for a, b in zip(value, default))
    return type(value) is type(default) and value == default


def input_names(opdef: Json, attrs: Json, count: int) -> Optional[List[str]]:
    """The argument name of each of ``count`` inputs (``values[0]``, ``values[1]`` for a list argument), None
    where the definition's arguments do not add up to them."""
    names: List[str] = []
    for arg in opdef.get("inputs") or []:
        n: Any = None
        if arg.get("number_attr"):
            n = attrs.get(arg["number_attr"])
        elif arg.get("type_list_attr"):
            n = len((attrs.get(arg["type_list_attr"]) or {}).get("list", []))
        if n is None:
            names.append(arg["name"])
        elif isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= count:
            names += ["%s[%d]" % (arg["name"], i) for i in range(n)]
        else:
            return None
    return names if len(names) == count else None


def op_call(op: Op) -> Optional[Json]:
    """``{"inputs": [name...], "attrs": {name: value}}`` of an op whose inputs, attributes and OpDef were read;
    None otherwise.  ``inputs`` is absent where the definition does not add up to the inputs read."""
    opdef, attrs, inputs = op.opdef, op.attrs, op.inputs
    if not opdef or attrs is None or inputs is None:
        return None
    carried: Set[str] = set()
    for arg in opdef.get("inputs") or []:
        carried.update(arg.get(k) for k in ("type_attr", "number_attr", "type_list_attr") if arg.get(k))
    differ: Dict[str, Any] = {}
    for name, spec in (opdef.get("attrs") or {}).items():
        if name in carried or name not in attrs:
            continue
        if "default" in spec and same_value(attrs[name], spec["default"]):
            continue
        differ[name] = attrs[name]
    out: Json = {"attrs": differ}
    names = input_names(opdef, attrs, len(inputs))
    if names is not None:
        out["inputs"] = names
    return out


def name_calls(event: Event) -> None:
    """Each op of ``event`` whose definition was read gets its call (``Op.call``); a generated op wrapper's
    frame whose arguments were read gets its op (``pyop.mark_wrapper_op``)."""
    for thread in event.threads:
        for frame in thread.frames:
            if isinstance(frame, NativeFrame) and frame.op is not None and frame.op.opdef is not None:
                frame.op.call = op_call(frame.op)
        frames = thread.frames + (thread.python_frames or [])
        if any(isinstance(f, PythonFrame) and f.op_args is not None for f in frames):
            pyop.mark_wrapper_op(frames)
