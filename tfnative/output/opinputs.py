"""The crashing kernel's op and its inputs in one line (issue #45): what ``core/kernelinputs`` read and checked,
as the crash report shows it, ``op Reshape(float32[5], int32[5]=[0,1879048192,...])``."""

from typing import Any, Dict, Optional

from ..core.model import Event, NativeFrame

SHOWN_VALUES = 16  # the line shows the values of integer and boolean inputs of at most this many elements
_INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")


def input_label(entry: Dict[str, Any]) -> str:
    """``float32[1,1,1,1]``; a small integer input with its values: ``int32[5]=[1,1,1,1,1]``."""
    if "unread" in entry:
        return "?"
    shape = entry.get("shape") or []
    label = "%s[%s]" % (entry.get("dtype"), ",".join(str(d) for d in shape))
    values = entry.get("values")
    if values is not None and entry.get("dtype") in _INTEGERS and len(values) <= SHOWN_VALUES:
        text = [str(int(v)).lower() if isinstance(v, bool) else str(v) for v in values]
        label += "=%s" % (text[0] if not shape else "[%s]" % ",".join(text))
    return label


def inputs_line(op: Dict[str, Any]) -> Optional[str]:
    """``op LRNGrad(float32[0,0,0,0], float32[0,0,0,0], float32[0])`` for an op with its inputs read; why not,
    for one whose inputs could not be read; None for an op without either."""
    if op.get("inputs") is not None:
        return "op %s(%s)" % (op.get("type"), ", ".join(input_label(e) for e in op["inputs"]))
    if op.get("inputs_unread"):
        return "op %s: its inputs were not read: %s" % (op.get("type"), op["inputs_unread"])
    return None


def crash_inputs_line(event: Event) -> Optional[str]:
    """The line under a crash (a fatal signal, a core) naming the crashing kernel's op and its inputs."""
    if event.kind not in ("signal", "core") or not event.threads:
        return None
    thread = next((t for t in event.threads if t.tid == event.thread), event.threads[0])
    op = next((f.op for f in thread.frames if isinstance(f, NativeFrame) and f.op), None)
    return inputs_line(op.to_json()) if op is not None else None
