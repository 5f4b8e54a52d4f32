"""What a reproducer of a crash in an op's shape function calls (issue #45, ``--repro``): the op, the shape of
each input its shape function saw (unknown dims and ranks kept), the constant inputs it was given (with their
values) and the op's attributes, as the capture read them from its ``InferenceContext``
(``core/tensorflow/shapefn.py``); then, given the op's definition, each input's dtype (its argument's own type,
or the type attribute the NodeDef carries) and the call: a ``tf.function`` whose ``input_signature`` has those
shapes, traced (``output/reprotext.py`` writes it).

Nothing is guessed: an attribute, a dtype or a constant's values that were not read refuse it (``NoRepro``)."""

from __future__ import annotations

from typing import Any, List

from ..core.model import CrashSummary, Document, Json
from .reproducer import NoRepro, call_of

_CONSTANT_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "uint64", "bool")


def in_shape_fn(doc: Document) -> bool:
    """Whether the crash's op is one whose shape function was running (no kernel)."""
    triage = doc.triage
    return isinstance(triage, CrashSummary) and triage.op is not None and triage.op.shape_fn


def model_of(doc: Document, whole: bool = True) -> Json:
    """``{"op", "shape_fn": True, "inputs": [{"shape", "dtype"?, "values"?}...], "attrs"}`` of the op whose
    shape function crashed; raises NoRepro.  ``whole`` is ``reproducer.model_of``'s (a shape function's
    constants are small: read whole alike)."""
    triage = doc.triage
    assert isinstance(triage, CrashSummary) and triage.op is not None
    op = triage.op
    if not triage.signal or not op.type:
        raise NoRepro("no fatal signal in an op's shape function to reproduce")
    if op.inputs is None:
        raise NoRepro("op %s's shape function: its inputs' shapes were not read: %s" % (op.type, op.inputs_unread))
    if op.attrs is None:
        raise NoRepro("op %s's shape function: its attributes were not read: %s" % (op.type, op.attrs_unread))
    inputs: List[Json] = []
    for k, entry in enumerate(op.inputs):
        one: Json = {"shape": entry["shape"]}
        if entry.get("constant"):
            if entry.get("dtype") not in _CONSTANT_DTYPES or entry.get("values") is None and entry["shape"] != []:
                raise NoRepro("op %s's shape function: its constant input %d (%s) was not read whole"
                              % (op.type, k, entry.get("dtype")))
            one.update(dtype=entry["dtype"], values=entry.get("values") or [])
        inputs.append(one)
    return {"op": op.type, "shape_fn": True, "inputs": inputs, "attrs": dict(op.attrs)}


def call_of_shape_fn(model: Json, opdef: Json) -> Json:
    """``reproducer.call_of`` with each input's dtype: a constant's own, else its argument's type in the op's
    definition (``opdef``'s inputs carry ``type`` or ``type_attr``/``type_list_attr``), the attribute's value
    read from the NodeDef; raises NoRepro."""
    call = call_of(model, opdef)
    attrs, op = model["attrs"], model["op"]
    inputs = [dict(e) for e in call["inputs"]]
    for (name, which), arg in zip(call["args"], opdef["inputs"]):
        for i, k in enumerate(which if isinstance(which, list) else [which]):
            if "dtype" in inputs[k]:
                continue
            dtype: Any = arg.get("type")
            if not dtype and arg.get("type_attr"):
                dtype = attrs.get(arg["type_attr"])
            elif not dtype and arg.get("type_list_attr"):
                listed = (attrs.get(arg["type_list_attr"]) or {}).get("list") or []
                dtype = listed[i] if i < len(listed) else None
            if not isinstance(dtype, str) or not dtype or dtype.endswith("_ref"):
                raise NoRepro("op %s: the dtype of input %s was not read" % (op, name))
            inputs[k]["dtype"] = dtype
    return dict(call, inputs=inputs)
