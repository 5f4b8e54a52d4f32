"""What a reproducer of a crash calls (issue #45, ``--repro``): the crashing kernel's op, its inputs with their
values and its attributes, as the capture read them from memory; then, given the op's definition (its input
arguments, its attributes' defaults: ``attach/repro.py`` asks the target's TensorFlow), the one call a script
makes: each input under its argument's name, each attribute that differs from its default.

A resource input that is a variable whose value was read (``core/tensorflow/resources.py``) is that value, marked
``variable``: the script makes the variable and passes its handle.  Nothing is guessed: an input whose values were
not read, an attribute the call needs that was not read, another resource (a queue, a table, an iterator) or a
variable whose value was not read, a string or variant input, each refuses the reproducer with the reason
(``NoRepro``)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ..core.model import CrashSummary, Document, Event, EventNativeFrame, Json, NativeFrame, Op
from ..core.tensorflow import spool

_NPZ_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
               "uint64", "bool")
INLINE_MAX = 64  # inputs of at most this many elements are literals in the script; larger ones go to FILE.npz
_ONEDNN = re.compile(r"_Mkl")


class NoRepro(Exception):
    """Why no reproducer is written: one line."""


# Ops whose kernel calls back into the program's Python (tf.py_function, tf.numpy_function): no script of
# their inputs runs it.
_RUNS_PYTHON = frozenset(("EagerPyFunc", "PyFunc", "PyFuncStateless"))


def model_of(doc: Document, whole: bool = True) -> Json:
    """``{"op", "inputs": [{"dtype", "shape", "values"}...], "attrs", "library"?, "onednn"?}`` of the crash's
    kernel (the triage's op); raises NoRepro.  Without ``whole``, an input whose values were not read (larger
    than a crash report reads: ``--repro`` reads it whole) does not refuse it."""
    triage = doc.triage
    op = triage.op if isinstance(triage, CrashSummary) else None
    if not getattr(triage, "signal", None) or op is None or not op.type:
        raise NoRepro("no fatal signal in an op's kernel to reproduce")
    return model_of_op(op, _kernel_library(doc.events), whole)


def stop_op(event: Event) -> Optional[Tuple[Op, Optional[str]]]:
    """A ``--break-op`` stop's op as its kernel frame read it (the innermost kernel frame of the thread that
    stopped: its inputs, attributes and definition, read as a crash's are), and the library of that frame where
    it is the user's own (a custom op's); None where no kernel frame is on that thread."""
    for frame in event.threads[0].frames if event.threads else []:
        if isinstance(frame, NativeFrame) and frame.op is not None and frame.op.kernel is not None:
            return frame.op, _user_library(frame)
    return None


def model_of_op(op: Op, library: Optional[str], whole: bool = True) -> Json:
    """``model_of``'s model of one op, a crash's or a stop's (the one typed ``Op``); ``library``: the custom op's
    library the script loads, if any; raises NoRepro."""
    kind = op.type or "?"
    if kind in _RUNS_PYTHON:
        raise NoRepro("op %s runs a Python function of the program (tf.py_function, tf.numpy_function): the crash "
                      "is in that function, which the op's inputs and attributes do not carry" % kind)
    if op.inputs is None:
        why = op.inputs_unread or ("no kernel frame is left on the stack (the op is named from its %s)"
                                   % (op.from_ or "Python wrapper"))
        raise NoRepro("op %s: its inputs were not read: %s" % (kind, why))
    if op.attrs is None:
        raise NoRepro("op %s: its attributes were not read: %s" % (kind, op.attrs_unread))
    names = (op.call or {}).get("inputs") or []
    inputs = [_input(kind, k, entry, whole, names[k] if k < len(names) else None) for k, entry in enumerate(op.inputs)]
    model: Json = {"op": kind, "inputs": inputs, "attrs": dict(op.attrs)}
    if _ONEDNN.match(op.kernel_type or ""):
        model["onednn"] = True  # the op ran in oneDNN's kernel: the script asks for it (TF_ENABLE_ONEDNN_OPTS=1)
    if library is not None:
        model["library"] = library
    return model


def _input(op: str, k: int, entry: Json, whole: bool, name: Optional[str]) -> Json:
    """Input ``k`` of ``op`` (its argument's ``name``, where the call named it) as the script gives it: its dtype,
    shape and values (a variable's handle: the variable's, marked ``variable``); raises NoRepro."""
    if "unread" in entry:
        raise NoRepro("op %s: input %d was not read: %s" % (op, k, entry["unread"]))
    variable = entry.get("resource", {}).get("variable") if entry["dtype"] == "resource" else None
    if entry["dtype"] == "resource" and variable is None:
        resource = entry.get("resource") or {}
        raise NoRepro("op %s: input %d%s%s is not rebuilt: %s" % (
            op, k, " (%s)" % name if name else "", ", resource %s," % resource["name"] if resource.get("name") else "",
            resource.get("unread") or "its handle was not read"))
    if variable is not None:
        entry = variable  # the variable's value: the script makes the variable and passes its handle
    label = "%s[%s]" % (entry["dtype"], ",".join(str(d) for d in entry["shape"]))
    if entry["dtype"] not in _NPZ_DTYPES:
        raise NoRepro("op %s: input %d is a %s tensor: tfnative writes numeric and bool tensors alone"
                      % (op, k, label))
    values = [] if 0 in entry["shape"] else entry.get("values")  # an empty tensor has no buffer to read
    if values is None:
        values = spool.spooled(entry)  # larger than 64 MiB: copied to a file (core/tensorflow/spool.py)
    if values is None and whole:
        why = spool.refusal(entry) or "larger than tfnative reads (64 MiB)"
        raise NoRepro("op %s: input %d, %s, is %s: its values were not read" % (op, k, label, why))
    out: Json = {"dtype": entry["dtype"], "shape": list(entry["shape"]), "values": values}
    if variable is not None:
        out["variable"] = True
    return out


def _kernel_library(events: List[Event]) -> Optional[str]:
    """The library of the crashing kernel's frame where it is the user's own (a custom op's)."""
    for event in events:
        for thread in event.threads:
            for f in thread.frames:
                if isinstance(f, NativeFrame) and f.op is not None and f.op.inputs is not None:
                    return _user_library(f)
    return None


def _user_library(frame: EventNativeFrame) -> Optional[str]:
    return (frame.library_path or frame.library) if frame.frame_class == "user" and frame.library else None


def call_of(model: Json, opdef: Json) -> Json:
    """``{"op", "function", "inputs": [[name, [index...] | index]...], "attrs": {name: value}, ...}``: the call of
    ``model`` by the op's definition ``opdef`` (``{"inputs": [{"name", "number_attr", "type_list_attr"}...],
    "attrs": {name: {"type", "default"?: value}}, "params": [the function's parameter names], "function"}``); raises
    NoRepro."""
    attrs, inputs, op = model["attrs"], model["inputs"], model["op"]
    args: List[List[Any]] = []
    at = 0
    for arg in opdef["inputs"]:
        count = None
        if arg.get("number_attr"):
            count = attrs.get(arg["number_attr"])
        elif arg.get("type_list_attr"):
            count = len((attrs.get(arg["type_list_attr"]) or {}).get("list", []))
        if count is not None and not isinstance(count, int):
            raise NoRepro("op %s: the length of input %s was not read" % (op, arg["name"]))
        args.append([arg["name"], list(range(at, at + count)) if count is not None else at])
        at += 1 if count is None else count
    if at != len(inputs):
        raise NoRepro("op %s: its definition takes %d inputs, its kernel had %d" % (op, at, len(inputs)))
    names = {a[0] for a in args}
    passed: Dict[str, Any] = {}
    for name in opdef["params"]:
        if name in names or name == "name" or name not in opdef["attrs"]:
            continue
        spec = opdef["attrs"][name]
        if name not in attrs:
            if "default" in spec:
                continue
            raise NoRepro("op %s: its attribute %s was not read" % (op, name))
        if "default" not in spec or not _same(attrs[name], spec["default"]):
            passed[name] = attrs[name]
    kinds = {name: opdef["attrs"][name].get("type", "") for name in passed}
    return dict(model, function=opdef["function"], args=args, call_attrs=passed, attr_types=kinds)


def _same(value: Any, default: Any) -> bool:
    if isinstance(value, dict) and isinstance(default, dict):
        return value.keys() == default.keys() and all(_same(value[k], default[k]) for k in value)
    if isinstance(value, list) and isinstance(default, list):
        return len(value) == len(default) and all(_same(a, b) for a, b in zip(value, default))
    return type(value) is type(default) and value == default


def snake(op: str) -> str:
    """The name of TensorFlow's generated Python wrapper of an op (``LRNGrad`` -> ``lrn_grad``)."""
    out = []
    for i, c in enumerate(op):
        if c.isupper() and i and (op[i - 1].islower() or op[i - 1].isupper() and i + 1 < len(op)
                                  and op[i + 1].islower()):
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def document_entry(call: Json, path: str, data: Optional[str], check: Json) -> Json:
    """The triage's ``reproducer``: the path written, the op, its attributes, each input's dtype and shape (a
    variable's, ``variable``: true, for a resource input the script rebuilds), the data file, the check's outcome."""
    out: Json = {"path": path, "op": call["op"], "attrs": call["call_attrs"],
                 "inputs": [dict({"dtype": e["dtype"], "shape": e["shape"]}, **({"variable": True} if e.get("variable")
                                                                                else {})) for e in call["inputs"]]}
    if data is not None:
        out["data"] = data
    if call.get("library"):
        out["library"] = call["library"]
    out["check"] = check
    return out
