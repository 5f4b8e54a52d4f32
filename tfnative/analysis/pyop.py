"""The op a thread's Python frames were running, where no kernel frame is left to say it.

A kernel that throws a C++ exception unwinds its own frames before the
process dies (in pybind11's translators): the stack no longer holds the
kernel, but the Python frame of the op's generated wrapper is still there
(``tensorflow/python/ops/gen_audio_ops.py``, function ``audio_spectrogram``,
or ``audio_spectrogram_eager_fallback``).  The op type is taken from that
module's own source, never guessed from the function's name: the line
``AudioSpectrogram = tf_export("raw_ops.AudioSpectrogram")(_ops.to_raw_op(audio_spectrogram))``,
else the op type quoted in the function's body (``TFE_Py_FastPathExecute(_ctx,
"AudioSpectrogram", ...)``, ``_apply_op_helper("AudioSpectrogram", ...)``)
whose letters are the function's.  An eager op run through the fallback path
shows its type in ``quick_execute``'s ``op_name`` too, and an op being added to a graph (its shape
function runs then) in ``_apply_op_helper``'s ``op_type_name``.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ..core.binary.mapfile import read_file
from ..core.model import EventFrame, EventPythonFrame, Op, PythonFrame
from ..core.sourcelines import MAX_BYTES

__all__ = ["mark_wrapper_op", "python_op"]

_GEN_FILE_RE = re.compile(r"/tensorflow/python/ops/gen_\w+_ops\.py$")
_FALLBACK = "_eager_fallback"
_QUOTED_RE = re.compile(r"""(?:\bb)?["']([A-Z][A-Za-z0-9_]*)["']""")
_INFERENCE_RE = re.compile(r"^__(?:inference|forward|backward)_")
_TYPE_RE = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
_APPLY_OP_PY = "/tensorflow/python/framework/op_def_library.py"
_TYPES: Dict[str, Optional[Dict[str, str]]] = {}  # a gen_*_ops file: python function -> op type


def _letters(name: str) -> str:
    return name.replace("_", "").lower()


def _op_types(path: str) -> Dict[str, str]:
    """Python function -> op type of a ``gen_*_ops.py`` file, from its ``tf_export("raw_ops.X")`` lines
    and the op types quoted in each function's body (``{}`` where the file cannot be read)."""
    if path in _TYPES:
        return _TYPES[path] or {}
    try:
        text = read_file(path, MAX_BYTES).decode("utf-8", "replace")  # a frame may name a FIFO, /dev/zero...
    except OSError:
        _TYPES[path] = None
        return {}
    out: Dict[str, str] = {}
    for m in re.finditer(r"^(\w+) = tf_export\(\"raw_ops\.(\w+)\"\)\(_ops\.to_raw_op\((\w+)\)\)", text, re.M):
        if m.group(1) == m.group(2):
            out[m.group(3)] = m.group(2)
    for m in re.finditer(r"^def (\w+)\(", text, re.M):
        name = m.group(1)
        base = name[:-len(_FALLBACK)] if name.endswith(_FALLBACK) else name
        if name in out:
            continue
        end = text.find("\ndef ", m.end())
        body = text[m.end(): end if end >= 0 else len(text)]
        quoted = next((q for q in _QUOTED_RE.findall(body) if _letters(q) == _letters(base)), None)
        if quoted:
            out[name] = quoted
    for name in list(out):
        out.setdefault(name + _FALLBACK, out[name])
    _TYPES[path] = out
    return out


def _wrapper_args(f: EventPythonFrame) -> Dict[str, Any]:
    """``{"inputs", "attrs", "call"}`` of a wrapper frame whose arguments the capture read (``op_args``): the
    call names each input by its argument and every attribute passed (the wrapper's frame holds no OpDef to
    tell a default); {} where none was read."""
    args = f.op_args
    if not args or not args.get("inputs"):
        return {}
    attrs = dict(args.get("attrs") or {})
    return {"inputs": list(args["inputs"]), "attrs": attrs,
            "call": {"inputs": list(args.get("input_names") or []), "attrs": attrs}}


def mark_wrapper_op(frames: List[EventFrame]) -> None:
    """The generated wrapper frame whose arguments the capture read (``op_args``) gets its op
    (``EventPythonFrame.wrapper_op``), where ``python_op`` names the op from it."""
    op = python_op(frames)
    if op is None or op.inputs is None:
        return
    frame = next(f for f in frames if isinstance(f, PythonFrame) and f.op_args is not None)
    frame.wrapper_op = op


def python_op(frames: List[EventFrame]) -> Optional[Op]:
    """An ``Op`` with its ``type`` and ``from_`` (no name): the op of the innermost op wrapper among a thread's
    Python frames (``from_``: "gen_audio_ops.audio_spectrogram"; with its ``inputs``, ``attrs`` and ``call`` where the
    capture read the wrapper's arguments), or of an eager ``quick_execute``, else the op a graph
    was adding (``_apply_op_helper``); None."""
    building = None
    for f in frames:
        if not isinstance(f, PythonFrame) or not f.file or not f.function:
            continue
        if _GEN_FILE_RE.search(f.file):
            op_type = _op_types(f.file).get(f.function)
            if op_type:
                module = f.file.rsplit("/", 1)[-1][:-3]
                return Op(type=op_type, from_="%s.%s" % (module, f.function), **_wrapper_args(f))
        if f.function == "_apply_op_helper" and f.file.endswith(_APPLY_OP_PY) and building is None:
            # the op being added to a graph (its shape function runs there), where no generated wrapper of
            # TensorFlow's names it: a custom op's wrappers are exec'd code
            name = (f.locals or {}).get("op_type_name") or ""
            if _TYPE_RE.match(name):
                building = Op(type=name, from_="_apply_op_helper")
        if f.function == "quick_execute" and f.file.endswith("/tensorflow/python/eager/execute.py"):
            name = (f.locals or {}).get("op_name") or ""
            if re.match(r"^[A-Z][A-Za-z0-9_]*$", name) and not _INFERENCE_RE.match(name):
                return Op(type=name, from_="quick_execute")
    return building
