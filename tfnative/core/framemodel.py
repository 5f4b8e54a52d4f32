"""The model's frames (FRAME of schema v1: native, Python, elided) and the leaf objects a frame carries: the
``Op`` (a kernel frame's, and every other op: an event's, the triage's), the ``TfFunction`` a frame or a thread
runs.  Pure: standard library only.

A capture's frames (``NativeFrame``, ``PythonFrame``) carry what capture reads; an event's
(``EventNativeFrame``, ``EventPythonFrame``) extend them with what analysis decides (class, the user's code,
source line, the renderers' marks), built by analysis from the capture's (``analysis/frames.py``): one key
table each, the capture's the event's without analysis's keys, so that both write schema v1's order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Tuple, TypeVar, Union

from . import jsonkeys
from .jsonkeys import Json
from .record import Record

__all__ = ["Op", "TfFunction", "NativeFrame", "PythonFrame", "ElidedFrame", "Frame", "EventNativeFrame",
           "EventPythonFrame", "EventFrame", "AnyFrame", "frame_from_json", "frames_from_json",
           "captured_frame_from_json", "captured_frames_from_json"]

# the key tables' words (``core/jsonkeys.py``)
_always = jsonkeys.always
_as_list = jsonkeys.as_list
_is_set = jsonkeys.is_set
_k = jsonkeys.k
_never = jsonkeys.never
_optional = jsonkeys.optional
_build = jsonkeys.build
_truthy = jsonkeys.truthy
_write = jsonkeys.write


# -- the leaf objects ----------------------------------------------------------------------------------------
@dataclass(slots=True, repr=False, eq=False)
class Op(Record):
    """An op, the one type of every op in memory: the op a kernel's (or a device's) ``Compute`` frame runs, read
    from its ``OpKernel`` (``"op"`` of a native FRAME); an event's op; the crash triage's; the op a generated
    wrapper's frame runs.  Each place writes its own keys (``to_json``, ``event_json``, ``triage_json``)."""

    type: Optional[str] = None  # the graph's op type
    name: Optional[str] = None  # the node's name
    kernel_type: Optional[str] = None  # oneDNN's rewrite: the type the kernel itself carries (_MklMatMul)
    kernel: Optional[str] = None  # "0x%x": the OpKernel's address
    # the op's shape function was running (InferenceContext::Run, core/tensorflow/shapefn.py), not a kernel: its
    # inputs are what that function saw: {"shape": dims (None: unknown) | None (unknown rank), "constant"?, ...}
    shape_fn: bool = False
    inputs: Optional[List[Json]] = None  # the crashing kernel's: [{"dtype", "shape", "values"?} | {"unread"}...]
    inputs_unread: Optional[str] = None  # why its inputs were not read (core/tensorflow/kernelinputs.py)
    # the crashing kernel's NodeDef's attributes: {name: value} (core/tensorflow/nodeattrs.py)
    attrs: Optional[Json] = None
    attrs_unread: Optional[str] = None  # why they, or some of them, were not read
    # its OpDef: {"inputs": [{"name", "type_attr"?, "number_attr"?, "type_list_attr"?}...], "attrs": {name:
    # {"type", "default"?}}} (core/tensorflow/opdefs.py)
    opdef: Optional[Json] = None
    opdef_unread: Optional[str] = None
    # analysis's call of the op (analysis/opcall.py): {"inputs": [each input's argument name], "attrs": {those
    # that differ from their defaults}}
    call: Optional[Json] = None
    # What an event's op (``"op"`` of an EVENT: a --break-op hit, a NaN/Inf's op, --op-origins) and the crash
    # triage's (``"op"`` of a TRIAGE) say besides, set by analysis (``analysis/event.py``, ``analysis/pyop.py``):
    from_: Optional[str] = None  # "from": no kernel frame: the op's Python wrapper ("gen_audio_ops.audio_spectrogram")
    from_xla: Optional[List[str]] = None  # --check-numerics: the XLA functions the NaN/Inf came out of
    # an event's: the op's creation stack (Python frames), outermost first
    created_at: Optional[List[EventFrame]] = None
    created_where: Optional[Json] = None  # the triage's "created_at": {"file", "line", "function"}: the user's line
    forward: Optional[Op] = None  # a gradient op's forward op (its type, name and creation)

    def to_json(self) -> Json:
        """The op as a kernel frame carries it (``"op"`` of a native FRAME)."""
        return _write(self, _OP_KEYS)

    def event_json(self) -> Json:
        """The op as an EVENT carries it: ``{"type", "name", "created_at"?, "from_xla"?, "forward"?}``."""
        return _write(self, _EVENT_OP_KEYS)

    def triage_json(self) -> Json:
        """The op as the crash TRIAGE carries it: its type and name, where it came from, the kernel's inputs and
        attributes, where the user created it (and its forward op)."""
        return _write(self, _TRIAGE_OP_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> Op:
        return _build(cls, _OP_KEYS, d)

    @classmethod
    def from_event_json(cls, d: Json) -> Op:
        return _build(cls, _EVENT_OP_KEYS, d)

    @classmethod
    def from_triage_json(cls, d: Json) -> Op:
        return _build(cls, _TRIAGE_OP_KEYS, d)


def _forward_writer(keys: Tuple[jsonkeys.Key, ...]) -> Any:
    return lambda op: _write(op.forward, keys) if op.forward is not None else None


def _forward_reader(keys: Tuple[jsonkeys.Key, ...]) -> Any:
    return lambda v: _build(Op, keys, v) if v is not None else None


def _creation(value: Any) -> Optional[List[EventFrame]]:
    """An op's creation stack as read: its frames (None where absent)."""
    return frames_from_json(value) if value is not None else None


# One op, three places of schema v1, each with its own keys in its own order: a kernel frame's; an event's (its
# creation stack before the XLA functions); the triage's (the XLA functions before the user's line alone).
_OP_KEYS = (_k("type", doc=_always), _k("name", doc=_always), _k("kernel_type"), _k("kernel"),
            _k("shape_fn", doc=_truthy, load=bool), _k("inputs"),
            _k("inputs_unread"), _k("attrs"), _k("attrs_unread"), _k("opdef"), _k("opdef_unread"), _k("call"))
# A gradient op's forward op: an event's names it first; the triage's types it first, with the user's line alone.
_EVENT_FORWARD_KEYS = (_k("name", doc=_always), _k("type", doc=_always),
                       _k("created_at", doc=_always, load=_creation))
_TRIAGE_FORWARD_KEYS = (_k("type", doc=_always), _k("name", doc=_always),
                        _k("created_at", "created_where", doc=_always))
_EVENT_OP_KEYS = (_k("type", doc=_always), _k("name", doc=_always), _k("kernel_type"), _k("from", "from_"),
                  _k("created_at", load=_creation), _k("from_xla"),
                  _k("forward", get=_forward_writer(_EVENT_FORWARD_KEYS), load=_forward_reader(_EVENT_FORWARD_KEYS)))
_TRIAGE_OP_KEYS = (
    _k("type", doc=_always), _k("name", doc=_always), _k("kernel_type", doc=_truthy), _k("from", "from_", doc=_truthy),
    _k("from_xla", doc=_truthy), _k("shape_fn", doc=_truthy, load=bool), _k("inputs"), _k("inputs_unread"),
    _k("attrs"), _k("attrs_unread"), _k("call"), _k("created_at", "created_where"),
    _k("forward", get=_forward_writer(_TRIAGE_FORWARD_KEYS), load=_forward_reader(_TRIAGE_FORWARD_KEYS)))
ALL_OP_KEYS = _OP_KEYS + _EVENT_OP_KEYS + _TRIAGE_OP_KEYS  # every key of an op, in each place it is written


@dataclass(slots=True, repr=False, eq=False)
class TfFunction(Record):
    """The tf.function a thread runs (``"tf_function"`` of a THREAD, of TF's ``quick_execute`` FRAME): read
    from the frame, or attributed to an executor thread (``called_by``, ``how``)."""

    name: str  # the graph function's name: __inference_step_8
    python_function: Optional[str] = None  # its Python name: step
    called_by: Optional[int] = None  # an executor thread's: the tid of the thread waiting for it
    how: Optional[str] = None  # an executor thread's: why this one ("only tf.function in flight")

    def to_json(self) -> Json:
        return _write(self, _TF_FUNCTION_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> TfFunction:
        return _build(cls, _TF_FUNCTION_KEYS, d)


_TF_FUNCTION_KEYS = (_k("name", doc=_always, required=True), _k("python_function", doc=_always), _k("called_by"),
                     _k("how"))


# -- frames --------------------------------------------------------------------------------------------------
def _kind(obj: Any) -> str:
    return str(obj.kind)


@dataclass(slots=True, repr=False, eq=False)
class NativeFrame(Record):
    """A C/C++ frame (FRAME of kind "native") as captured; an event's is an ``EventNativeFrame``."""

    kind: ClassVar[str] = "native"
    function: Optional[str]
    file: Optional[str] = None
    line: Optional[int] = None
    library: Optional[str] = None
    address: Optional[str] = None  # "0x%016x"
    inline: bool = False  # gdb: a frame inlined into its caller
    tailcall: bool = False  # gdb: a caller inferred from DWARF call sites, not on the stack
    op: Optional[Op] = None  # a kernel's or the device's Compute
    recovered: Optional[str] = None  # "frame-pointer" | "scan": found without CFI
    variables: Optional[List[Json]] = None  # --locals, the user's own code with DWARF: [{"name", "repr", "arg"}...]
    level: Optional[int] = None  # internal: the frame's number in gdb's/the unwinder's stack
    start: Optional[int] = None  # internal: its function's entry address, where tfnative named it

    def capture_json(self) -> Json:
        """The frame as a capture carries it (MI, the session socket, ``tf-bt --json``): the internal
        attributes too, nothing of the report's (``class``, ``source``)."""
        return _write(self, _CAPTURED_NATIVE_KEYS, wire=True, order=_NATIVE_WIRE)

    def to_json(self) -> Json:
        return _write(self, _CAPTURED_NATIVE_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> NativeFrame:
        return _build(cls, _CAPTURED_NATIVE_KEYS, d)


@dataclass(slots=True, repr=False, eq=False)
class EventNativeFrame(NativeFrame):
    """A native frame of an event: the captured one with what analysis decided of it."""

    frame_class: Optional[str] = None  # "class": user, tensorflow-native, interpreter, system...
    source: Optional[str] = None  # the text of file:line
    # What the renderers show of it, decided by analysis (``analysis/frames.py``), never written: the
    # interpreter's call glue (hidden by default), the part of an abort it delivers ("raise", "abort", "assert",
    # "log", "terminate"), one of TensorFlow's own frames that the text folds in runs, the class a picture shows.
    glue: bool = field(default=False, compare=False, repr=False)
    abort: Optional[str] = field(default=None, compare=False, repr=False)
    foldable: bool = field(default=False, compare=False, repr=False)
    shown_class: Optional[str] = field(default=None, compare=False, repr=False)
    # The user's library's path, never written: a custom op's reproducer loads it (``analysis/reproducer.py``)
    library_path: Optional[str] = field(default=None, compare=False, repr=False)

    def to_json(self) -> Json:
        return _write(self, _NATIVE_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> EventNativeFrame:
        return _build(cls, _NATIVE_KEYS, d)


# A frame's place, as both forms write it: "kind", "function", "file", "line" always.
_PLACE = (_k("kind", doc=_always, wire=_always, read=False, get=_kind),
          _k("function", doc=_always, wire=_always), _k("file", doc=_always, wire=_always),
          _k("line", doc=_always, wire=_always))
_NATIVE_KEYS = _PLACE + (
    _k("library", doc=_always, wire=_always), _k("address", doc=_always, wire=_always),
    _k("inline", doc=_truthy, wire=_truthy, load=bool), _k("tailcall", doc=_truthy, wire=_truthy, load=bool),
    _k("op", doc=_truthy, wire=_truthy, load=_optional(Op.from_json)),
    _k("recovered", doc=_truthy, wire=_truthy), _k("class", "frame_class"), _k("source"),
    _k("variables", wire=_is_set), _k("level", doc=_never, wire=_is_set), _k("start", doc=_never, wire=_is_set))
_NATIVE_WIRE = ("kind", "function", "file", "line", "library", "address", "level", "inline", "tailcall",
                "recovered", "start", "op", "variables")
# analysis's keys, never in a capture (nor in its wire form)
ANALYSED_FRAME_KEYS = ("class", "source", "user", "tf_function")
_CAPTURED_NATIVE_KEYS = jsonkeys.without(_NATIVE_KEYS, ANALYSED_FRAME_KEYS)


@dataclass(slots=True, repr=False, eq=False)
class PythonFrame(Record):
    """A Python frame (FRAME of kind "python") as captured; an event's (and a frame of an op's creation stack)
    is an ``EventPythonFrame``."""

    kind: ClassVar[str] = "python"
    function: Optional[str]
    file: Optional[str] = None
    line: Optional[int] = None
    locals: Optional[Dict[str, str]] = None  # the few locals tfnative reads (quick_execute's op_name)
    variables: Optional[List[Json]] = None  # --locals: [{"name", "repr", "arg"}...]
    converted: Optional[Json] = None  # {"function", "file", "line"}: where AutoGraph's generated code ran
    # a generated op wrapper's arguments, where no kernel frame gave the op's inputs (core/tensorflow/wrapperargs.py):
    # {"inputs": [kernelinputs' form...], "input_names": [name...], "attrs": {name: value}}
    op_args: Optional[Json] = None
    eval_address: Optional[str] = None  # internal: the _PyEval_EvalFrameDefault frame it was merged at

    def capture_json(self) -> Json:
        """The frame as a capture carries it (see ``NativeFrame.capture_json``)."""
        return _write(self, _CAPTURED_PYTHON_KEYS, wire=True, order=_PYTHON_WIRE)

    def to_json(self) -> Json:
        return _write(self, _CAPTURED_PYTHON_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> PythonFrame:
        return _build(cls, _CAPTURED_PYTHON_KEYS, d)


@dataclass(slots=True, repr=False, eq=False)
class EventPythonFrame(PythonFrame):
    """A Python frame of an event (no ``class`` on an op's creation stack): the captured one with what analysis
    decided of it."""

    user: Optional[bool] = None  # the user's code (not TensorFlow's, the standard library's...)
    tf_function: Optional[TfFunction] = None  # on TF's quick_execute frame
    frame_class: Optional[str] = None
    source: Optional[str] = None
    # What the renderers show of it, decided by analysis (``analysis/frames.py``), never written: the user's own
    # code (marked), one of TensorFlow's own frames that the text folds in runs, the class a picture shows.
    user_code: bool = field(default=False, compare=False, repr=False)
    foldable: bool = field(default=False, compare=False, repr=False)
    shown_class: Optional[str] = field(default=None, compare=False, repr=False)
    # the op a generated wrapper's frame with ``op_args`` runs, as the crash report's op line shows it
    # (``analysis/pyop.py``: its type, ``from_``, inputs, attributes and call), on the thread that stopped
    wrapper_op: Optional[Op] = field(default=None, compare=False, repr=False)

    def to_json(self) -> Json:
        return _write(self, _PYTHON_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> EventPythonFrame:
        return _build(cls, _PYTHON_KEYS, d)


_PYTHON_KEYS = _PLACE + (
    _k("user"), _k("locals", doc=_truthy, wire=_truthy), _k("variables", wire=_is_set),
    _k("tf_function", doc=_truthy, load=_optional(TfFunction.from_json)), _k("converted", doc=_truthy, wire=_truthy),
    _k("op_args", doc=_is_set, wire=_is_set), _k("class", "frame_class"), _k("source"),
    _k("eval_address", doc=_never, wire=_is_set))
_PYTHON_WIRE = ("kind", "function", "file", "line", "locals", "converted", "variables", "op_args", "eval_address")
_CAPTURED_PYTHON_KEYS = jsonkeys.without(_PYTHON_KEYS, ANALYSED_FRAME_KEYS)


@dataclass(slots=True, repr=False, eq=False)
class ElidedFrame(Record):
    """The frames cut from the middle of a deep stack (FRAME of kind "elided")."""

    kind: ClassVar[str] = "elided"
    count: int
    functions: List[str] = field(default_factory=list)  # their commonest names, commonest first

    @property
    def function(self) -> str:
        """The names as one string, for readers of ``function``."""
        return ", ".join(self.functions)

    @property
    def file(self) -> None:
        return None

    @property
    def line(self) -> None:
        return None

    def capture_json(self) -> Json:
        return self.to_json()

    def to_json(self) -> Json:
        return _write(self, _ELIDED_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> ElidedFrame:
        return _build(cls, _ELIDED_KEYS, d)


_ELIDED_KEYS = (_k("kind", doc=_always, read=False, get=_kind), _k("count", doc=_always, load=lambda v: v or 0),
                _k("functions", doc=_always, load=_as_list), _k("function", doc=_always, read=False),
                _k("file", doc=_always, read=False), _k("line", doc=_always, read=False))

Frame = Union[NativeFrame, PythonFrame, ElidedFrame]  # a capture's frame (or any frame)
EventFrame = Union[EventNativeFrame, EventPythonFrame, ElidedFrame]  # an event's
AnyFrame = TypeVar("AnyFrame", Frame, EventFrame)  # a capture's frames, or an event's: as given
_FRAME_KINDS: Dict[Any, Any] = {"native": EventNativeFrame, "python": EventPythonFrame, "elided": ElidedFrame}
_CAPTURED_KINDS: Dict[Any, Any] = {"native": NativeFrame, "python": PythonFrame, "elided": ElidedFrame}


def frame_from_json(d: Json) -> EventFrame:
    """The event's frame a document's FRAME dict stands for, by its ``kind``.  Raises ValueError on an unknown
    kind."""
    cls = _FRAME_KINDS.get(d.get("kind"))
    if cls is None:
        raise ValueError("a frame of unknown kind %r" % d.get("kind"))
    frame: EventFrame = cls.from_json(d)
    return frame


def frames_from_json(ds: Optional[List[Json]]) -> List[EventFrame]:
    return [frame_from_json(d) for d in ds or []]


def captured_frame_from_json(d: Json) -> Frame:
    """The captured frame a capture's FRAME dict (its wire form) stands for."""
    cls = _CAPTURED_KINDS.get(d.get("kind"))
    if cls is None:
        raise ValueError("a frame of unknown kind %r" % d.get("kind"))
    frame: Frame = cls.from_json(d)
    return frame


def captured_frames_from_json(ds: Optional[List[Json]]) -> List[Frame]:
    return [captured_frame_from_json(d) for d in ds or []]
