"""Shrinking a reproducer's inputs (issue #45, ``--repro-minimize``): the changes a minimization tries on the call
``analysis/reproducer.call_of`` made, and the call with a set of them applied.  Pure: ``attach/reprominimize.py``
runs each try in a fresh process and keeps what still dies the same way.

A change is ``(kind, input, axis)``: ``one`` (that dimension to 1), ``half`` (that dimension halved), ``zeros`` and
``ones`` (every value of the input; ``axis`` unused).  A smaller dimension keeps the first values along it, so
what is left are values the crash had.  An input that is a shape or a size (an integer vector of at most
``SIZE_LIKE_MAX`` elements, or an integer scalar: ``input_sizes``, ``paddings``' rows are not, ``seq_len_max``
is) is never changed: its values are what the kernel checks.

An input whose values are raw bytes (``core/tensorflow/spool.py``'s ``Raw``: one larger than ``--repro`` reads
whole, copied to a file) is never made a list: a change gives another ``Raw`` over the same file (its runs, or a
fill), so that every try's input is written to its data file a chunk at a time."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

from ..core.model import Json
from ..core.tensorflow.spool import Raw

Change = Tuple[str, int, int]
SIZE_LIKE_MAX = 8
_FLOATS = ("float16", "float32", "float64")


def elements(call: Json) -> int:
    """The number of elements of the call's inputs, all together."""
    return sum(_count(e["shape"]) for e in call["inputs"])


def _count(shape: List[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def size_like(entry: Json) -> bool:
    """An integer scalar or short integer vector: a shape, a size, an index whose values the kernel checks."""
    return entry["dtype"] not in _FLOATS and entry["dtype"] != "bool" and len(entry["shape"]) <= 1 and \
        _count(entry["shape"]) <= SIZE_LIKE_MAX


def _fill(dtype: str, one: bool) -> Any:
    if dtype in _FLOATS:
        return 1.0 if one else 0.0
    if dtype == "bool":
        return one
    return int(one)


def changes(call: Json, kind: str) -> List[Change]:
    """The changes of a round: ``kind`` ``one`` (each dimension over 1 to 1, then each input's values to zeros) or
    ``half`` (each dimension over 3 halved, then each input's values to ones, where they are
    neither all zeros nor all ones), the largest inputs first, so that
    a half of the list is a part of the inputs."""
    order = sorted(range(len(call["inputs"])), key=lambda k: -_count(call["inputs"][k]["shape"]))
    out: List[Change] = []
    for k in order:
        entry = call["inputs"][k]
        if size_like(entry) or _count(entry["shape"]) == 0:
            continue
        low = 1 if kind == "one" else 3
        out += [(kind, k, axis) for axis, d in enumerate(entry["shape"]) if d > low]
        if not _simple(entry, kind == "half"):
            out.append(("ones" if kind == "half" else "zeros", k, 0))
    return out


def _simple(entry: Json, or_ones: bool) -> bool:
    """Every value of the input is 0 (``or_ones``: or every one is 1): no fill to try."""
    values = entry["values"]
    if isinstance(values, Raw):
        return values.only(False) or or_ones and values.only(True)
    simple = [_fill(entry["dtype"], False)] + ([_fill(entry["dtype"], True)] if or_ones else [])
    return any(all(type(v) is type(fill) and v == fill for v in values) for fill in simple)


def apply(call: Json, chosen: Iterable[Change]) -> Json:
    """A copy of ``call`` with the ``chosen`` changes made."""
    inputs = [dict(e) for e in call["inputs"]]
    by_input: Dict[int, List[Change]] = {}
    for change in chosen:
        by_input.setdefault(change[1], []).append(change)
    for k, mine in by_input.items():
        entry = inputs[k]
        shape = list(entry["shape"])
        for kind, _, axis in mine:
            if kind == "one":
                shape[axis] = 1
            elif kind == "half":
                shape[axis] = max(1, shape[axis] // 2)
        values = entry["values"]
        if shape != entry["shape"]:
            values = values.cropped(entry["shape"], shape) if isinstance(values, Raw) else \
                _prefix(values, entry["shape"], shape)
        fills = [kind for kind, _, _ in mine if kind in ("zeros", "ones")]
        if fills and isinstance(values, Raw):
            values = values.filled(fills[-1] == "ones")
        elif fills:
            values = [_fill(entry["dtype"], fills[-1] == "ones")] * len(values)
        entry["shape"], entry["values"] = shape, values  # the values are never changed in place: shared, not copied
    return dict(call, inputs=inputs)


def _prefix(values: List[Any], shape: List[int], new: List[int]) -> List[Any]:
    """The values of the first ``new[i]`` indices along each axis of a row-major ``shape``."""
    if not shape:
        return list(values)
    stride = _count(shape[1:])
    if new[1:] == shape[1:]:
        return list(values[:new[0] * stride])
    out: List[Any] = []
    for i in range(new[0]):
        out += _prefix(values[i * stride:(i + 1) * stride], shape[1:], new[1:])
    return out
