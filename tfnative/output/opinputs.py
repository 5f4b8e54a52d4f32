"""The crashing kernel's op, its inputs and its attributes in one line (issue #45): what ``core/tensorflow``
read and checked and ``analysis/opcall.py`` named, as the crash report shows it, ``op Reshape(tensor: float32[5],
shape: int32[5]=[0,1879048192,...])``, ``op LRNGrad(...; depth_radius=1, bias=1.5901822)``."""

import struct
from typing import Any, Dict, List, Optional

from ..core.model import Event, NativeFrame, Op, PythonFrame

SHOWN_VALUES = 16  # the line shows the values of integer and boolean inputs of at most this many elements
_INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")


def input_label(entry: Dict[str, Any]) -> str:
    """``float32[1,1,1,1]``; a small integer input with its values: ``int32[5]=[1,1,1,1,1]``; a variable's handle
    with its variable: ``resource[]=variable float32[5]``."""
    if "unread" in entry:
        return "?"
    shape = entry.get("shape") or []
    label = "%s[%s]" % (entry.get("dtype"), ",".join(str(d) for d in shape))
    variable = (entry.get("resource") or {}).get("variable")
    if variable is not None:
        return "%s=variable %s" % (label, input_label(variable))
    values = entry.get("values")
    if values is not None and entry.get("dtype") in _INTEGERS and len(values) <= SHOWN_VALUES:
        text = [str(int(v)).lower() if isinstance(v, bool) else str(v) for v in values]
        label += "=%s" % (text[0] if not shape else "[%s]" % ",".join(text))
    return label


def _float(value: float) -> str:
    """The shortest text of a float attribute (a float32 read as a double) that is the same float32."""
    try:
        want = struct.pack("<f", value)
    except OverflowError:
        return repr(value)
    for digits in range(1, 18):
        text = "%.*g" % (digits, value)
        if struct.pack("<f", float(text)) == want:
            return text
    return repr(value)


def attr_text(value: Any, kind: str) -> str:
    """An attribute's value by its OpDef type ``kind``: ``[1,1,1,1,1]``, ``"VALID"``, ``1.5``, ``true``,
    ``float32`` (a type), a shape ``[2,3]`` (``?`` of unknown rank)."""
    if isinstance(value, dict) and "list" in value:
        return "[%s]" % ",".join(attr_text(v, kind[5:-1]) for v in value["list"])
    if isinstance(value, dict) and "shape" in value:
        return attr_text(value["shape"], "shape")
    if kind == "shape":  # a shape's dims, None of unknown rank
        return "?" if value is None else "[%s]" % ",".join(str(d) for d in value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str) and kind == "string":
        return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')
    return str(value)  # an int, a type's name, a float's "nan"


def inputs_line(op: Op) -> Optional[str]:
    """``op LRNGrad(input_grads: float32[0,0,0,0], ...; depth_radius=1)`` for an op with its inputs read (with
    their argument names and the attributes off their defaults where its definition was read); why not, for one
    whose inputs could not be read; None for an op without either."""
    if op.inputs is not None:
        call = op.call or {}
        names: List[str] = call.get("inputs") or []
        args = [("%s: " % names[k] if k < len(names) else "") + input_label(e) for k, e in enumerate(op.inputs)]
        text = ", ".join(args)
        attrs = call.get("attrs") or {}
        if attrs:
            kinds = (op.opdef or {}).get("attrs") or {}
            text += "; " + ", ".join("%s=%s" % (k, attr_text(v, kinds.get(k, {}).get("type", "")))
                                     for k, v in attrs.items())
        return "op %s(%s)" % (op.type, text)
    if op.inputs_unread:
        return "op %s: its inputs were not read: %s" % (op.type, op.inputs_unread)
    return None


def crash_op(event: Event) -> Optional[Op]:
    """The op of the first kernel frame of the thread that stopped; None without one."""
    if event.kind not in ("signal", "core") or not event.threads:
        return None
    thread = next((t for t in event.threads if t.tid == event.thread), event.threads[0])
    op = next((f.op for f in thread.frames if isinstance(f, NativeFrame) and f.op), None)
    if op is not None:
        return op
    # no kernel frame (a C++ exception unwound it): the op of its generated Python wrapper, where its
    # arguments were read (analysis/pyop.py)
    return next((f.wrapper_op for f in thread.frames + (thread.python_frames or [])
                 if isinstance(f, PythonFrame) and f.wrapper_op), None)


def crash_inputs_line(event: Event) -> Optional[str]:
    """The line under a crash (a fatal signal, a core) naming the crashing kernel's op and its inputs."""
    op = crash_op(event)
    return inputs_line(op) if op is not None else None
