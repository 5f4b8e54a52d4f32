"""The arguments of an op's generated Python wrapper, read from memory (issue #45): where a C++ exception
unwound the kernel's frame, the frame of ``tensorflow/python/ops/gen_*_ops.py``'s function (``audio_spectrogram``
or ``audio_spectrogram_eager_fallback``) still holds the op's inputs and attributes as its arguments, in the
OpDef's order: inputs first (``EagerTensor`` objects, or lists of them), then attributes (Python scalars,
strings, bools, lists of them), then ``name`` and, in a fallback, ``ctx``.

Each argument's object is classed by its type's name, read from memory: an ``EagerTensor`` (or a list or tuple
of them) is an input, read by ``eagertensor.EagerTensors`` (the JSON form of ``kernelinputs``: ``{"dtype",
"shape", "values"?}``, or ``{"unread": why}``); a bool, int, float, str or bytes (or a list of them:
``{"list": [...]}``, as ``nodeattrs`` gives a list attribute) is an attribute; ``None`` (an optional
attribute left to its default) and anything else are left out, as are ``name``, ``ctx`` and ``_ctx``.  An
input the user passed as a Python list (converted to a tensor only inside TensorFlow's fast path) is not
told from an attribute here: the reproducer then refuses, its OpDef's inputs not adding up.  Bounded:
MAX_ARGS arguments, MAX_LIST items of a list.  Standard library only.
"""

from __future__ import annotations

import re
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..python.pyframes import PyFrame, PythonReader
from ..python.pylayout import STACKREF_TAG_BITS
from .eagertensor import EagerTensors
from .kernelinputs import InputsReader, Unread

GEN_FILE_RE = re.compile(r"/tensorflow/python/ops/gen_\w+_ops\.py$")
SKIPPED = ("name", "ctx", "_ctx")
MAX_ARGS = 64
MAX_LIST = 1024
_SCALARS = ("bool", "int", "float", "str", "bytes")


def wrapper_frame(frames: Sequence[PyFrame]) -> Optional[PyFrame]:
    """The innermost frame of a generated op wrapper among a thread's Python frames (innermost first)."""
    return next((f for f in frames if f.file and GEN_FILE_RE.search(f.file) and f.code and f.address), None)


class WrapperArgs:
    """Reads a wrapper frame's arguments into ``{"inputs": [...], "input_names": [...], "attrs": {...}}``."""

    def __init__(self, reader: PythonReader) -> None:
        self.r = reader
        self.eager = EagerTensors(InputsReader(reader.mem))

    def arguments(self, code: int, frame_addr: int) -> List[Tuple[str, Optional[int], int]]:
        """(name, tagged int or None, object) of each bound argument of the frame, in order."""
        L, r = self.r.layout, self.r
        if (L.frame_localsplus is None or L.code_localsplusnames is None or L.code_argcount is None
                or L.code_kwonlyargcount is None):
            return []
        names = r.tuple_items(r.u64(code + L.code_localsplusnames))
        nargs = r.i32(code + L.code_argcount) + r.i32(code + L.code_kwonlyargcount)
        if not 0 <= nargs <= min(len(names), MAX_ARGS):
            return []
        out: List[Tuple[str, Optional[int], int]] = []
        for i in range(nargs):
            bits = r.u64(frame_addr + L.frame_localsplus + 8 * i)
            number = r.tagged_int(bits)
            obj = bits & ~STACKREF_TAG_BITS if number is None else 0
            if obj or number is not None:
                out.append((r.string(names[i]) or "?", number, obj))
        return out

    def read(self, frame: PyFrame) -> Optional[Dict[str, Any]]:
        """The op's inputs and attributes of a wrapper's frame; None where none was read."""
        inputs: List[Dict[str, Any]] = []
        names: List[str] = []
        attrs: Dict[str, Any] = {}
        for name, number, obj in self.arguments(frame.code, frame.address):
            if name in SKIPPED:
                continue
            if number is not None:
                attrs[name] = number
                continue
            kind = self._kind(obj)
            if kind == "EagerTensor":
                inputs.append(self._tensor(obj))
                names.append(name)
            elif kind in ("list", "tuple"):
                items = self._items(obj, kind)
                kinds = {self._kind(i) for i in items}
                if items and kinds == {"EagerTensor"}:
                    inputs += [self._tensor(i) for i in items]
                    names += ["%s[%d]" % (name, k) for k in range(len(items))]
                elif kinds <= set(_SCALARS):
                    values = [self._scalar(i) for i in items]
                    if None not in values:
                        attrs[name] = {"list": values}
            elif kind in _SCALARS:
                value = self._scalar(obj)
                if value is not None:
                    attrs[name] = value
        if not inputs and not attrs:
            return None
        return {"inputs": inputs, "input_names": names, "attrs": attrs}

    def _kind(self, obj: int) -> str:
        """The type's name without its module (``tensorflow.python.framework.ops.EagerTensor``: EagerTensor)."""
        return self.r.objects.type_name(obj).rsplit(".", 1)[-1]

    def _tensor(self, obj: int) -> Dict[str, Any]:
        try:
            return self.eager.tensor(obj)
        except Unread as exc:
            return {"unread": str(exc)}

    def _items(self, obj: int, kind: str) -> List[int]:
        r, L = self.r, self.r.layout
        if kind == "tuple":
            return r.tuple_items(obj)[:MAX_LIST]
        count = r.i64(obj + L.tuple_size)
        if not 0 <= count <= MAX_LIST:
            raise MemoryError("implausible list size")
        head = r.u64(obj + L.list_items)
        return list(struct.unpack("<%dQ" % count, r.mem.read(head, 8 * count))) if count else []

    def _scalar(self, obj: int) -> Any:
        """A bool, int, float, str or bytes (decoded) object's value; None for another type or a huge int."""
        r = self.r
        kind = r.objects.type_name(obj)
        if kind == "bool":
            return bool(r.int_value(obj))
        if kind == "int":
            try:
                return r.int_value(obj)
            except MemoryError:
                return None
        if kind == "float":
            value: float = struct.unpack("<d", r.mem.read(obj + r.layout.float_value, 8))[0]
            return value
        if kind == "str":
            return r.string(obj)
        if kind == "bytes":
            return r.bytes_value(obj).decode("utf-8", "replace")
        return None


def read_wrapper_args(reader: PythonReader, frames: Sequence[PyFrame]) -> None:
    """The innermost generated op wrapper among ``frames`` gets its arguments (``PyFrame.op_args``); a frame
    whose memory cannot be read gets none."""
    frame = wrapper_frame(frames)
    if frame is None:
        return
    try:
        frame.op_args = WrapperArgs(reader).read(frame)
    except (MemoryError, Unread):
        frame.op_args = None
