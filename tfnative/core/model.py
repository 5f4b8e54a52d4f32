"""The typed model of tfnative's documents: frames, threads, captures, events, documents (JSON schema v1).

Each class holds one schema object (docs/json-schema.md) as typed attributes,
and lists its JSON keys once, in a table of ``_Key`` rows (``_NATIVE_KEYS``,
``_THREAD_KEYS``...): each row names the key, the attribute, when the key is
written in a document (``to_json``) and in the capture's wire form
(``capture_json``), and how ``from_json`` reads it.  ``to_json()`` gives
exactly the schema's dict: the same keys in the same order as the documents
tfnative writes, optional keys left out where they are absent.
``from_json()`` reads one back (``merge``'s input, a saved document).  A
``Capture`` (a process's threads before the report) is made of the same
frames and threads; its wire form (``Capture.to_json``, the frames' and
threads' ``capture_json``: over MI, the session socket, ``tf-bt --json``)
also carries the internal attributes (``level``, ``start``, ``eval_address``,
``gdb_thread``) that a document's ``to_json()`` never writes; where its keys
come in another order, the class names that order (``_NATIVE_WIRE``...).

The leaf objects a reader looks into are typed too: a kernel frame's ``Op``,
a ``TfFunction``, a child that died of a signal (``ChildDeath``), and the two
TRIAGEs: the hang verdict (``HangVerdict``, ``verdict.triage``) and the
summary of a document that says how its process ended (``CrashSummary``,
``analysis.event.document_triage``).  The others (``kernel``, ``pool``, ``samples``,
``cluster``, an event's ``op``...) stay JSON dicts, written and read as they
are.  This module is pure: no gdb, no process, no file.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, List, Literal, Optional, Sequence, Tuple, Union, get_args

from .. import __version__

__all__ = ["SCHEMA", "EventKind", "EVENT_KINDS", "Op", "TfFunction", "ChildDeath", "HangVerdict", "CrashSummary",
           "Triage", "NativeFrame", "PythonFrame", "ElidedFrame", "Frame", "Thread", "Capture", "Event", "Document",
           "frame_from_json", "frames_from_json", "triage_from_json", "thread_label"]

SCHEMA = 1
Json = Dict[str, Any]

# What stopped the target (an EVENT's "kind"): a --break location or --break-op hit, a signal, a NaN/Inf
# (--check-numerics), a snapshot (stack, attach's SIGQUIT), attach --timeout, a core file, a hang that
# ``watch`` caught (a snapshot taken because the job stopped progressing).
EventKind = Literal["breakpoint", "signal", "numerics", "snapshot", "timeout", "core", "hang"]
EVENT_KINDS: Tuple[str, ...] = get_args(EventKind)


# -- the key tables ------------------------------------------------------------------------------------------
Rule = Callable[[Any, Any], bool]  # (the object, the attribute's value) -> whether its key is written


def _always(obj: Any, value: Any) -> bool:
    return True


def _never(obj: Any, value: Any) -> bool:
    return False


def _is_set(obj: Any, value: Any) -> bool:
    return value is not None


def _truthy(obj: Any, value: Any) -> bool:
    return bool(value)


def _same(value: Any) -> Any:
    return value


def _as_list(value: Any) -> List[Any]:
    return list(value or [])


def _as_dict(value: Any) -> Dict[str, Any]:
    return dict(value or {})


class _Key:
    """One JSON key of a model class: where it is, when it is written, how it is read.

    A plain class with slots: some 140 rows are made at every start, where a frozen dataclass costs
    milliseconds to define, and its attributes are read for every key of every object written or read,
    where a NamedTuple's are slower to read."""

    __slots__ = ("key", "attr", "doc", "wire", "load", "read", "required", "get")

    def __init__(self, key: str, attr: str, doc: Rule = _is_set, wire: Rule = _never,
                 load: Callable[[Any], Any] = _same, read: bool = True, required: bool = False,
                 get: Optional[Callable[[Any], Any]] = None) -> None:
        self.key = key  # the JSON key
        self.attr = attr  # the attribute that holds it
        self.doc = doc  # when ``to_json`` writes it
        self.wire = wire  # when ``capture_json`` (the capture's wire form) writes it
        self.load = load  # the JSON value (None where absent) -> the attribute's value
        self.read = read  # False: derived (written, never read), or the same attribute at a second place
        self.required = required  # from_json: a KeyError where the key is absent
        self.get = get  # the value written, where it is not the attribute's

    def __repr__(self) -> str:
        return "_Key(%r, %r)" % (self.key, self.attr)


def _k(key: str, attr: Optional[str] = None, doc: Rule = _is_set, wire: Rule = _never, **more: Any) -> _Key:
    return _Key(key, attr or key, doc, wire, **more)


def _dump(value: Any, wire: bool) -> Any:
    """A value as JSON: model objects by their own ``to_json`` (``capture_json`` in the wire form)."""
    if isinstance(value, list):
        return [_dump(v, wire) for v in value]
    if wire and hasattr(value, "capture_json"):
        return value.capture_json()
    if hasattr(value, "to_json"):
        return value.to_json()
    return value


def _write(obj: Any, keys: Sequence[_Key], wire: bool = False, order: Optional[Sequence[str]] = None) -> Json:
    """``obj`` as JSON by its key table, in the table's order (or ``order``: the keys of the wire form)."""
    if order is not None:
        by_key = {k.key: k for k in keys if k.wire is not _never}
        keys = [by_key[name] for name in order]
    out: Json = {}
    for k in keys:
        value = k.get(obj) if k.get is not None else getattr(obj, k.attr)
        if (k.wire if wire else k.doc)(obj, value):
            out[k.key] = _dump(value, wire)
    return out


class _ReadPlan:
    """How a key table reads: the plain keys (read as they are, None where absent: most keys of a frame, and most
    are absent) by one pass over the keys the JSON has, the others (loaded, or required) one by one."""

    __slots__ = ("absent", "plain", "loaded")

    def __init__(self, keys: Sequence[_Key]) -> None:
        plain = [k for k in keys if k.read and not k.required and k.load is _same]
        self.absent: Json = {k.attr: None for k in plain}
        self.plain: Dict[str, str] = {k.key: k.attr for k in plain}
        self.loaded = [(k.attr, k.key, k.load, k.required) for k in keys
                       if k.read and (k.required or k.load is not _same)]


_PLANS: Dict[int, _ReadPlan] = {}  # id of a key table (a module's constant) -> its plan


def _read(keys: Sequence[_Key], d: Json) -> Json:
    """The attributes (keyword arguments of the class) that JSON ``d`` gives, by the key table: each key's
    ``load`` of its value (of None where absent); a required key's absence is a KeyError."""
    plan = _PLANS.get(id(keys))
    if plan is None:
        plan = _PLANS[id(keys)] = _ReadPlan(keys)
    out = plan.absent.copy()
    plain = plan.plain
    for key, value in d.items():
        attr = plain.get(key)
        if attr is not None:
            out[attr] = value
    for attr, key, load, required in plan.loaded:
        out[attr] = load(d[key] if required else d.get(key))
    return out


def _optional(load: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``load`` of a key whose absence (or an empty object) is None."""
    return lambda value: load(value) if value else None


# -- the leaf objects ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class Op:
    """The op a kernel's (or a device's) ``Compute`` frame runs, read from its ``OpKernel`` (``"op"`` of a
    native FRAME)."""

    type: Optional[str] = None  # the graph's op type
    name: Optional[str] = None  # the node's name
    kernel_type: Optional[str] = None  # oneDNN's rewrite: the type the kernel itself carries (_MklMatMul)
    kernel: Optional[str] = None  # "0x%x": the OpKernel's address
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

    def to_json(self) -> Json:
        return _write(self, _OP_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> Op:
        return cls(**_read(_OP_KEYS, d))


_OP_KEYS = (_k("type", doc=_always), _k("name", doc=_always), _k("kernel_type"), _k("kernel"), _k("inputs"),
            _k("inputs_unread"), _k("attrs"), _k("attrs_unread"), _k("opdef"), _k("opdef_unread"), _k("call"))


@dataclass(slots=True)
class TfFunction:
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
        return cls(**_read(_TF_FUNCTION_KEYS, d))


_TF_FUNCTION_KEYS = (_k("name", doc=_always, required=True), _k("python_function", doc=_always), _k("called_by"),
                     _k("how"))


@dataclass(slots=True)
class ChildDeath:
    """A child of the script that died of a signal (``children_killed`` of a document)."""

    pid: int
    name: Optional[str]  # its command name (comm), where it was read
    signal: str  # "SIGSEGV"
    core_dumped: bool = False

    def to_json(self) -> Json:
        return _write(self, _CHILD_DEATH_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> ChildDeath:
        return cls(**_read(_CHILD_DEATH_KEYS, d))


_CHILD_DEATH_KEYS = (_k("pid", doc=_always, required=True), _k("name", doc=_always),
                     _k("signal", doc=_always, required=True), _k("core_dumped", doc=_always, load=bool))


def _graph_written(obj: Any, value: Any) -> bool:
    return obj.waits is not None


@dataclass(slots=True)
class HangVerdict:
    """Why a process does not progress (the TRIAGE of a snapshot: ``verdict.triage``; a ``stack``
    document's, an event's of ``attach``'s SIGQUIT or ``--timeout``, a core's whose signal came from outside)."""

    verdict: str = ""
    pattern: Optional[str] = None  # the hang pattern that fits (verdict.py), None where none does
    gil_holder: Optional[Json] = None  # {"tid", "name", "blocked_in", "function", "file", "line"}
    waiting_for_gil: List[int] = field(default_factory=list)
    waiting_for_function: List[Json] = field(default_factory=list)  # {"tid", "tf_function", "at"}
    stuck: Optional[List[int]] = None  # stack --samples only
    moving: Optional[List[int]] = None
    pool: Optional[Json] = None
    # the wait-for graph (analysis/waitgraph.py): every edge, the cycle (a deadlock), the chain of waits; all
    # three written together, always by today's tfnative (None: a document from before the graph)
    waits: Optional[List[Json]] = None
    cycle: Optional[List[Json]] = None
    chain: Optional[List[Json]] = None

    def to_json(self) -> Json:
        return _write(self, _HANG_VERDICT_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> HangVerdict:
        return cls(**_read(_HANG_VERDICT_KEYS, d))


_HANG_VERDICT_KEYS = (
    _k("verdict", doc=_always), _k("pattern", doc=_always), _k("gil_holder", doc=_always),
    _k("waiting_for_gil", doc=_always, load=_as_list), _k("waiting_for_function", doc=_always, load=_as_list),
    _k("stuck", doc=_always), _k("moving", doc=_always), _k("pool", doc=_always),
    _k("waits", doc=_graph_written), _k("cycle", doc=_graph_written), _k("chain", doc=_graph_written))


@dataclass(slots=True)
class CrashSummary:
    """What happened, in a few fields (the TRIAGE of a document that says how the process ended:
    ``analysis.event.document_triage``): hits per location, the signal, the op, the user frame nearest the last
    event, the tf.function, dumps, children."""

    breakpoints: Dict[str, int] = field(default_factory=dict)  # location -> hits
    signal: Optional[str] = None  # the fatal signal
    handled_signals: List[str] = field(default_factory=list)
    numerics: int = 0  # NaN/Inf events
    nearest_user_frame: Optional[Json] = None  # {"function", "file", "line"}
    tf_function: Optional[TfFunction] = None
    dumps: int = 0
    children_killed: List[str] = field(default_factory=list)  # "PID SIGNAL"
    op: Optional[Json] = None  # {"type", "name", "kernel_type"?, "from"?, "from_xla"?, "created_at"?, "forward"?}
    cxx_exception: Optional[Json] = None  # {"type", "what", "state"}
    log: Optional[str] = None  # TensorFlow's fatal log line
    eager: bool = False  # the op ran eagerly (no tf.function)
    reproducer: Optional[Json] = None  # --repro: {"path", "op", "attrs", "inputs", "check"} (analysis/reproducer.py)

    def to_json(self) -> Json:
        return _write(self, _CRASH_SUMMARY_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> CrashSummary:
        return cls(**_read(_CRASH_SUMMARY_KEYS, d))


_CRASH_SUMMARY_KEYS = (
    _k("breakpoints", doc=_always, load=lambda v: dict(v or {})), _k("signal", doc=_always),
    _k("handled_signals", doc=_always, load=_as_list), _k("numerics", doc=_always, load=lambda v: v or 0),
    _k("nearest_user_frame", doc=_always), _k("tf_function", doc=_always, load=_optional(TfFunction.from_json)),
    _k("dumps", doc=_always, load=lambda v: v or 0), _k("children_killed", doc=_always, load=_as_list),
    _k("op", doc=_always), _k("cxx_exception", doc=_truthy), _k("log", doc=_truthy),
    _k("eager", doc=_truthy, load=bool), _k("reproducer"))

Triage = Union[HangVerdict, CrashSummary]


def triage_from_json(d: Optional[Json]) -> Optional[Triage]:
    """The TRIAGE ``d`` stands for: a hang verdict (it has a ``"verdict"``), else a crash summary."""
    if d is None:
        return None
    return HangVerdict.from_json(d) if "verdict" in d else CrashSummary.from_json(d)


# -- frames --------------------------------------------------------------------------------------------------
def _kind(obj: Any) -> str:
    return str(obj.kind)


@dataclass(slots=True)
class NativeFrame:
    """A C/C++ frame (FRAME of kind "native")."""

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
    frame_class: Optional[str] = None  # "class": user, tensorflow-native, interpreter, system...
    source: Optional[str] = None  # the text of file:line
    variables: Optional[List[Json]] = None  # --locals, the user's own code with DWARF: [{"name", "repr", "arg"}...]
    level: Optional[int] = None  # internal: the frame's number in gdb's/the unwinder's stack
    start: Optional[int] = None  # internal: its function's entry address, where tfnative named it
    # What the renderers show of it, decided by analysis (``analysis/frames.py``), never written: the
    # interpreter's call glue (hidden by default), the part of an abort it delivers ("raise", "abort", "assert",
    # "log", "terminate"), one of TensorFlow's own frames that the text folds in runs, the class a picture shows.
    glue: bool = field(default=False, compare=False, repr=False)
    abort: Optional[str] = field(default=None, compare=False, repr=False)
    foldable: bool = field(default=False, compare=False, repr=False)
    shown_class: Optional[str] = field(default=None, compare=False, repr=False)
    # The user's library's path, never written: a custom op's reproducer loads it (``analysis/reproducer.py``)
    library_path: Optional[str] = field(default=None, compare=False, repr=False)

    def capture_json(self) -> Json:
        """The frame as a capture carries it (MI, the session socket, ``tf-bt --json``): the internal
        attributes too, nothing of the report's (``class``, ``source``)."""
        return _write(self, _NATIVE_KEYS, wire=True, order=_NATIVE_WIRE)

    def to_json(self) -> Json:
        return _write(self, _NATIVE_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> NativeFrame:
        return cls(**_read(_NATIVE_KEYS, d))


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


@dataclass(slots=True)
class PythonFrame:
    """A Python frame (FRAME of kind "python"); also a frame of an op's creation stack (no ``class``)."""

    kind: ClassVar[str] = "python"
    function: Optional[str]
    file: Optional[str] = None
    line: Optional[int] = None
    user: Optional[bool] = None  # the user's code (not TensorFlow's, the standard library's...)
    locals: Optional[Dict[str, str]] = None  # the few locals tfnative reads (quick_execute's op_name)
    variables: Optional[List[Json]] = None  # --locals: [{"name", "repr", "arg"}...]
    tf_function: Optional[TfFunction] = None  # on TF's quick_execute frame
    converted: Optional[Json] = None  # {"function", "file", "line"}: where AutoGraph's generated code ran
    # a generated op wrapper's arguments, where no kernel frame gave the op's inputs (core/tensorflow/wrapperargs.py):
    # {"inputs": [kernelinputs' form...], "input_names": [name...], "attrs": {name: value}}
    op_args: Optional[Json] = None
    frame_class: Optional[str] = None
    source: Optional[str] = None
    eval_address: Optional[str] = None  # internal: the _PyEval_EvalFrameDefault frame it was merged at
    # What the renderers show of it, decided by analysis (``analysis/frames.py``), never written: the user's own
    # code (marked), one of TensorFlow's own frames that the text folds in runs, the class a picture shows.
    user_code: bool = field(default=False, compare=False, repr=False)
    foldable: bool = field(default=False, compare=False, repr=False)
    shown_class: Optional[str] = field(default=None, compare=False, repr=False)
    # the op a generated wrapper's frame with ``op_args`` runs, as the crash report's op line shows it
    # (``analysis/pyop.py``: {"type", "from", "inputs", "attrs", "call"}), on the thread that stopped
    wrapper_op: Optional[Json] = field(default=None, compare=False, repr=False)

    def capture_json(self) -> Json:
        """The frame as a capture carries it (see ``NativeFrame.capture_json``)."""
        return _write(self, _PYTHON_KEYS, wire=True, order=_PYTHON_WIRE)

    def to_json(self) -> Json:
        return _write(self, _PYTHON_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> PythonFrame:
        return cls(**_read(_PYTHON_KEYS, d))


_PYTHON_KEYS = _PLACE + (
    _k("user"), _k("locals", doc=_truthy, wire=_truthy), _k("variables", wire=_is_set),
    _k("tf_function", doc=_truthy, load=_optional(TfFunction.from_json)), _k("converted", doc=_truthy, wire=_truthy),
    _k("op_args", doc=_is_set, wire=_is_set), _k("class", "frame_class"), _k("source"),
    _k("eval_address", doc=_never, wire=_is_set))
_PYTHON_WIRE = ("kind", "function", "file", "line", "locals", "converted", "variables", "op_args", "eval_address")


@dataclass(slots=True)
class ElidedFrame:
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
        return cls(**_read(_ELIDED_KEYS, d))


_ELIDED_KEYS = (_k("kind", doc=_always, read=False, get=_kind), _k("count", doc=_always, load=lambda v: v or 0),
                _k("functions", doc=_always, load=_as_list), _k("function", doc=_always, read=False),
                _k("file", doc=_always, read=False), _k("line", doc=_always, read=False))

Frame = Union[NativeFrame, PythonFrame, ElidedFrame]
_FRAME_KINDS: Dict[Any, Any] = {"native": NativeFrame, "python": PythonFrame, "elided": ElidedFrame}


def frame_from_json(d: Json) -> Frame:
    """The frame a FRAME dict stands for, by its ``kind``.  Raises ValueError on an unknown kind."""
    cls = _FRAME_KINDS.get(d.get("kind"))
    if cls is None:
        raise ValueError("a frame of unknown kind %r" % d.get("kind"))
    frame: Frame = cls.from_json(d)
    return frame


def frames_from_json(ds: Optional[List[Json]]) -> List[Frame]:
    return [frame_from_json(d) for d in ds or []]


def _optional_frames(ds: Optional[List[Json]]) -> Optional[List[Frame]]:
    return frames_from_json(ds) if ds is not None else None


# -- threads, captures, events, documents --------------------------------------------------------------------
def _own_function(t: Any, fn: Optional[TfFunction]) -> bool:
    return fn is not None and not fn.how


def _attributed_function(t: Any, fn: Optional[TfFunction]) -> bool:
    return fn is not None and bool(fn.how)


def _mismatched(t: Any, value: Any) -> bool:
    return t.python_frames is not None


@dataclass(slots=True)
class Thread:
    """One thread of an event (THREAD): its ids, names, states, and frames, innermost first."""

    tid: int
    name: str = ""
    frames: List[Frame] = field(default_factory=list)
    merge: Optional[str] = None  # "ok" | "native" | "mismatch" | "no-thread-state" | "partial"
    label: Optional[str] = None  # the name the text shows (the OS name, or threading's where more telling)
    gil: Optional[str] = None  # "held" | "waiting"
    python_name: Optional[str] = None
    daemon: Optional[bool] = None
    gc: bool = False  # inside a garbage collection
    kernel: Optional[Json] = None  # {"state", "syscall"}
    progress: Optional[str] = None  # "stuck" | "moving" (stack --samples)
    stuck_s: Optional[float] = None
    ns_tid: Optional[int] = None
    tf_function: Optional[TfFunction] = None
    merge_detail: Optional[str] = None  # merge "mismatch": why
    python_frames: Optional[List[Frame]] = None  # merge "mismatch": the Python stack alone
    error: Optional[str] = None
    tf_functions_in_flight: Optional[List[str]] = None  # an executor thread, several in flight
    works_for: Optional[Json] = None  # a pool thread: {"tid", "waits_in", "how"}, the Python thread waiting on it
    lock_wait: Optional[Json] = None  # {"resource", "owner", "evidence"}: a lock it waits for whose holder memory says
    after_release: bool = False  # stack: its unwind read memory the hold's copy lacked, after the process ran on
    consistent: Optional[bool] = None  # stack --no-pause: False where its stack changed while it was read
    gdb_thread: Optional[int] = None  # internal: gdb's thread number
    cxx_exception: Optional[Json] = None  # {"type", "what", "state"}: the C++ exception in flight (cxxexc.py)

    def to_json(self) -> Json:
        return _write(self, _THREAD_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> Thread:
        return cls(**_read(_THREAD_KEYS, d))

    def runs_python(self) -> bool:
        """Whether a Python frame is on its merged stack."""
        return any(isinstance(f, PythonFrame) for f in self.frames)

    def has_python(self) -> bool:
        """Whether the capture found Python frames for it: on its merged stack, or beside it (a mismatch)."""
        return bool(self.python_frames) or self.runs_python()

    def capture_json(self) -> Json:
        """The thread as a capture carries it (see ``NativeFrame.capture_json``)."""
        return _write(self, _THREAD_KEYS, wire=True, order=_THREAD_WIRE)


# A tf.function read from the thread's own frames comes before the merge's details; one attributed to an
# executor thread ("how") after them, where the thread's fields end.
_THREAD_KEYS = (
    _k("tid", doc=_always, wire=_always, required=True), _k("name", doc=_always, wire=_always, load=lambda v: v or ""),
    _k("label"), _k("frames", doc=_always, wire=_always, load=frames_from_json),
    _k("merge", doc=_always, wire=_always), _k("gil", doc=_always, wire=_always),
    _k("python_name", wire=_is_set), _k("daemon", wire=_is_set), _k("gc", doc=_truthy, wire=_truthy, load=bool),
    _k("kernel", wire=_is_set), _k("progress", wire=_is_set), _k("stuck_s", wire=_is_set),
    _k("ns_tid", wire=_is_set), _k("tf_function", doc=_own_function, load=_optional(TfFunction.from_json)),
    _k("merge_detail", doc=_mismatched, wire=_mismatched), _k("python_frames", wire=_is_set, load=_optional_frames),
    _k("has_python", doc=_never, wire=_always, read=False, get=lambda t: t.has_python()),
    _k("error", doc=_truthy, wire=_is_set), _k("tf_function", doc=_attributed_function, read=False),
    _k("tf_functions_in_flight", doc=_truthy), _k("works_for", doc=_truthy),
    _k("lock_wait", doc=_truthy, wire=_is_set), _k("cxx_exception", doc=_truthy, wire=_is_set),
    _k("after_release", doc=_truthy, wire=_truthy, load=bool), _k("consistent", wire=_is_set),
    _k("gdb_thread", doc=_never, wire=_is_set))
_THREAD_WIRE = ("tid", "name", "python_name", "daemon", "frames", "merge", "merge_detail", "python_frames",
                "has_python", "gil", "gc", "gdb_thread", "ns_tid", "error", "kernel", "progress", "stuck_s",
                "lock_wait", "cxx_exception", "consistent", "after_release")


def thread_label(t: Thread, main_name: Optional[str]) -> str:
    """The name a thread is shown by (JSON ``"label"``): ``threading``'s name where the OS name is the one
    every thread inherits (the main thread's, ``main_name``) or unknown (a core keeps no thread names), else
    the OS name that native code gave it."""
    name, py = t.name or "", t.python_name
    if py is not None and (not name or main_name is None or name == main_name):
        return py
    return name


def _threads(ds: Optional[List[Json]]) -> List[Thread]:
    return [Thread.from_json(t) for t in ds or []]


@dataclass(slots=True)
class Capture:
    """One capture of a process's threads, before the report: what ``-tfnative-capture`` answers over MI,
    what ``snapshot/pipeline.py`` and a core give, what an ``attach`` session sends ``stack --pid`` over its socket.

    ``analysis.event.make_event`` makes the EVENT of it.  Its JSON (``to_json``/``from_json``) is the wire form
    of those edges, internal attributes included; it is no part of the document's schema.
    """

    pid: Optional[int] = None
    threads: List[Thread] = field(default_factory=list)  # innermost frame first, in the capture's order
    warnings: List[str] = field(default_factory=list)
    ns_pid: Optional[int] = None  # the pid inside the process's own PID namespace
    python: Optional[str] = None  # "3.11": the interpreter found
    finalizing: bool = False  # Py_FinalizeEx has begun
    selected_tid: Optional[int] = None  # the thread that stopped (the crashed one of a core)
    pool: Optional[Json] = None  # executors.pool_summary: TensorFlow's inter-op pool
    via: Optional[str] = None  # "cfi" (tfnative's unwinder) | "gdb"
    samples: Optional[Json] = None  # stack --samples: {"count", "interval_s", "span_s"}
    held_ms: Optional[float] = None  # stack without gdb: how long the process was held
    nonblocking: bool = False  # stack --no-pause: read without stopping the process
    stack_pointers: Dict[int, int] = field(default_factory=dict)  # internal: each thread's rsp at the stop
    tf_config: Optional[str] = None  # internal: TF_CONFIG from the program's os.environ (a thread in a collective)
    libraries: Dict[str, str] = field(default_factory=dict)  # each frame's library (its name) -> its path

    def to_json(self) -> Json:
        return _write(self, _CAPTURE_KEYS, wire=True)

    @classmethod
    def from_json(cls, d: Json) -> Capture:
        """The capture ``d`` stands for.  Raises ValueError where ``d`` is no capture."""
        try:
            return cls(**_read(_CAPTURE_KEYS, d))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError("a malformed capture (%s: %s)" % (type(exc).__name__, exc)) from None


def _wire(key: str, rule: Rule = _is_set, **more: Any) -> _Key:
    """A key of the wire form alone (a ``Capture``'s)."""
    return _k(key, doc=_never, wire=rule, **more)


_CAPTURE_KEYS = (
    _wire("pid", _always), _wire("threads", _always, load=_threads), _wire("warnings", _always, load=_as_list),
    _wire("ns_pid"), _wire("python"), _wire("finalizing", _truthy, load=bool), _wire("selected_tid"), _wire("pool"),
    _wire("via"), _wire("samples"), _wire("held_ms"), _wire("nonblocking", _truthy, load=bool),
    _wire("libraries", _truthy, load=_as_dict))


def _core_or_set(event: Any, value: Any) -> bool:
    """A core's event always says its signal's code and fault address, null or not."""
    return value is not None or event.kind == "core"


@dataclass(slots=True)
class Event:
    """One stop of the target (EVENT): what stopped it, and its threads, the stopped one first."""

    kind: EventKind
    location: Optional[str] = None  # breakpoint
    signal: Optional[str] = None  # signal, core
    signal_code: Optional[int] = None  # core (always written there, null or not)
    fault_address: Optional[str] = None  # core (always written there)
    sent_by: Optional[int] = None  # core: the pid that sent the signal
    timeout: Optional[float] = None  # timeout
    thread: Optional[int] = None  # the LWP that stopped (written null for a snapshot)
    pid: Optional[int] = None
    ns_pid: Optional[int] = None
    threads: List[Thread] = field(default_factory=list)
    python: Optional[str] = None  # "3.11"
    via: Optional[str] = None  # "cfi" | "gdb"
    warnings: List[str] = field(default_factory=list)
    pool: Optional[Json] = None
    samples: Optional[Json] = None
    held_ms: Optional[float] = None  # stack without gdb: how long the process was held (0.0: --no-pause)
    finalizing: bool = False
    log: Optional[str] = None  # TensorFlow's fatal log line
    handler: Optional[bool] = None  # signal: the script has a handler for it
    op: Optional[Json] = None  # {"type", "name", "created_at"?, "forward"?, "from_xla"?}: the op it stopped at
    fatal: Optional[bool] = None
    reraised_by_handler: bool = False
    cluster: Optional[Json] = None
    triage: Optional[HangVerdict] = None  # a snapshot's (SIGQUIT, --timeout), a core's from outside
    process: Optional[Json] = None  # attach --follow-children: {"pid", "cmdline", "task"?} of a child's event
    no_debug_info: Optional[List[Json]] = None  # the user's libraries on the stacks without debug info
    culprit: Optional[Json] = None  # watch's hang report: the process the others wait for, and why it does not come

    def to_json(self) -> Json:
        return _write(self, _EVENT_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> Event:
        return cls(**_read(_EVENT_KEYS, d))


_EVENT_KEYS = (
    _k("kind", doc=_always, required=True), _k("location"), _k("signal"), _k("signal_code", doc=_core_or_set),
    _k("fault_address", doc=_core_or_set), _k("sent_by"), _k("timeout"), _k("thread", doc=_always),
    _k("pid", doc=_always), _k("ns_pid"), _k("threads", doc=_always, load=_threads), _k("python", doc=_truthy),
    _k("via", doc=_truthy), _k("warnings", doc=_truthy, load=_as_list), _k("pool", doc=_truthy),
    _k("samples", doc=_truthy), _k("held_ms"), _k("finalizing", doc=_truthy, load=bool), _k("log", doc=_truthy),
    _k("handler"), _k("op"), _k("fatal"), _k("reraised_by_handler", doc=_truthy, load=bool),
    _k("cluster", doc=_truthy), _k("triage", load=lambda v: HangVerdict.from_json(v) if v is not None else None),
    _k("process"), _k("no_debug_info", doc=_truthy), _k("culprit", doc=_truthy))


def _has_exit(doc: Any, value: Any) -> bool:
    return bool(doc.has_exit)


@dataclass(slots=True)
class Document:
    """One tfnative document: a process and its events (``attach``, ``stack --json``, ``core``).

    ``has_exit``: the document says how the process ended (``attach``, ``core``: ``"exit"`` is written,
    null or not; its ``triage`` is its events' summary, a ``CrashSummary``); a ``stack`` document
    has no ``"exit"``, and its ``triage`` is the hang verdict (a ``HangVerdict``).
    """

    argv: List[str] = field(default_factory=list)
    pid: Optional[int] = None
    events: List[Event] = field(default_factory=list)
    unresolved: List[str] = field(default_factory=list)
    host: Optional[str] = None  # stack: the machine's name
    task: Optional[Json] = None  # stack: {"type", "index"} from TF_CONFIG
    labels: Optional[Dict[str, str]] = None  # stack --label
    scheduler: Optional[Json] = None  # stack: {"kind", "rank", ...} from the environment (core/ranks.py)
    has_exit: bool = False
    exit: Optional[Json] = None  # {"code": int} | {"signal": "SIGSEGV"} | None
    dumps: List[str] = field(default_factory=list)
    children_killed: List[ChildDeath] = field(default_factory=list)  # children that died of a signal
    core: Optional[str] = None  # attach --core: where the core written at the fatal signal is
    triage: Optional[Triage] = None
    attached: bool = False  # internal: attach --pid, a process tfnative did not start
    # The tfnative that wrote it: this one's for a new document; as read for one read back (None where the document
    # names none, as those of tfnative 0.1 do), so that a document is written again byte for byte.
    version: Optional[str] = field(default_factory=lambda: __version__)

    def to_json(self) -> Json:
        return _write(self, _DOCUMENT_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> Document:
        """The document ``d`` stands for.  Raises ValueError where ``d`` is not a schema-1 document."""
        if not isinstance(d, dict) or d.get("tfnative") != SCHEMA:
            raise ValueError("not a tfnative schema %d document" % SCHEMA)
        try:
            return cls(has_exit="exit" in d, **_read(_DOCUMENT_KEYS, d))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError("a malformed tfnative document (%s: %s)" % (type(exc).__name__, exc)) from None

    def threads(self) -> List[Thread]:
        """Every thread of every event, in order."""
        return [t for e in self.events for t in e.threads]

    def target_name(self) -> str:
        """How the text names the target: "the script", or "process N" for one tfnative attached to."""
        return "process %s" % self.pid if self.attached else "the script"

    def own(self, event: Event) -> bool:
        """Whether ``event`` is of this document's process, not of a child (``attach --follow-children``)."""
        return bool((event.process or {}).get("pid", self.pid) == self.pid)

    def set_exit(self, returncode: int) -> None:
        """The process's end (a ``Popen`` return code: negative for a signal); a ``signal`` event is fatal
        when the process died of that signal, else handled."""
        if returncode < 0:
            try:
                name = signal.Signals(-returncode).name
            except ValueError:
                name = "SIG%d" % -returncode
            self.exit = {"signal": name}
        else:
            self.exit = {"code": returncode}
        self.has_exit = True
        signals = [e for e in self.events if e.kind == "signal" and self.own(e)]
        fatal = next((e for e in reversed(signals) if e.signal == self.exit.get("signal")), None)
        for e in signals:
            e.fatal = e is fatal


_DOCUMENT_KEYS = (
    _k("tfnative", doc=_always, read=False, get=lambda d: SCHEMA), _k("version"), _k("pid", doc=_always),
    _k("argv", doc=_always, load=_as_list),
    _k("events", doc=_always, load=lambda v: [Event.from_json(e) for e in v or []]),
    _k("unresolved", doc=_always, load=_as_list), _k("host"), _k("task"), _k("labels"), _k("scheduler"),
    _k("exit", doc=_has_exit), _k("dumps", doc=_truthy, load=_as_list),
    _k("children_killed", doc=_truthy, load=lambda v: [ChildDeath.from_json(c) for c in v or []]),
    _k("core", doc=_truthy), _k("triage", load=triage_from_json))


@dataclass
class Outcome:
    """One process's result where several are taken (``stack`` on many processes, ``watch``'s hang report): its
    document, or why it could not be read."""

    pid: int
    doc: Optional[Document] = None
    error: Optional[str] = None
