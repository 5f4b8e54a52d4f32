"""The typed model of tfnative's documents: frames, threads, captures, events, documents (JSON schema v1).

Each class holds one schema object (docs/json-schema.md) as typed attributes,
and lists its JSON keys once, in a table of ``_Key`` rows (``_NATIVE_KEYS``,
``_THREAD_KEYS``...): each row names the key, the attribute, when the key is
written in a document (``to_json``) and in the capture's wire form
(``capture_json``), and how ``from_json`` reads it.  ``to_json()`` gives
exactly the schema's dict: the same keys in the same order as the documents
tfnative writes, optional keys left out where they are absent.
``from_json()`` reads one back (``merge``'s input, a saved document).

A type per stage: a ``Capture`` (a process's threads before the report) is made
of the capture's threads and frames (``Thread``, ``NativeFrame``,
``PythonFrame``: what capture reads, and no more); an ``Event`` of the event's
(``EventThread``, ``EventNativeFrame``, ``EventPythonFrame``: each the capture's
type extended with what analysis decides), which analysis builds of the
capture's (``analysis/frames.event_thread``) and documents read back give.  A
capture type's key table is its event type's without analysis's keys
(``ANALYSED_THREAD_KEYS``, ``framemodel.ANALYSED_FRAME_KEYS``), so one table
keeps each key's order.  The capture's wire form (``Capture.to_json``, the
frames' and threads' ``capture_json``: over MI, the session socket, ``tf-bt
--json``) also carries the internal attributes (``level``, ``start``,
``eval_address``, ``gdb_thread``) that a document's ``to_json()`` never writes;
where its keys come in another order, the class names that order
(``_NATIVE_WIRE``...).

The leaf objects a reader looks into are typed too: an ``Op`` (one type for
a kernel frame's, an event's and the triage's op, each written in its place's
own key order) and a ``TfFunction`` (with the frames, ``core/framemodel.py``),
a child that died of a signal (``ChildDeath``), and the two TRIAGEs
(``core/triage.py``): the hang verdict (``HangVerdict``, ``verdict.triage``)
and the summary of a document that says how its process ended
(``CrashSummary``, ``analysis.event.document_triage``).  The key tables'
machinery, the one owner of each key's order, is ``core/jsonkeys.py``.  The
others (``kernel``, ``pool``, ``samples``, ``cluster``...) stay JSON dicts,
written and read as they are.  This module is pure: no gdb, no process, no file.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Tuple, get_args

from .. import __version__
from . import jsonkeys
from .framemodel import (
    AnyFrame,
    ElidedFrame,
    EventFrame,
    EventNativeFrame,
    EventPythonFrame,
    Frame,
    NativeFrame,
    Op,
    PythonFrame,
    TfFunction,
    captured_frames_from_json,
    frame_from_json,
    frames_from_json,
)
from .jsonkeys import Rule
from .poolsummary import Pool
from .record import FrozenRecord, Record
from .triage import CrashSummary, HangVerdict, Triage, Wait, triage_from_json

__all__ = ["SCHEMA", "EventKind", "EVENT_KINDS", "Op", "TfFunction", "ChildDeath", "HangVerdict", "CrashSummary",
           "Triage", "Wait", "NativeFrame", "PythonFrame", "ElidedFrame", "Frame", "EventNativeFrame",
           "EventPythonFrame", "EventFrame", "AnyFrame", "Thread", "EventThread", "Capture", "Event",
           "captured_frames_from_json",
           "Document", "WorksFor", "Pool", "frame_from_json", "frames_from_json", "triage_from_json", "thread_label"]

# the key tables' words (``core/jsonkeys.py``)
_always = jsonkeys.always
_as_dict = jsonkeys.as_dict
_as_list = jsonkeys.as_list
_is_set = jsonkeys.is_set
_k = jsonkeys.k
_Key = jsonkeys.Key
_never = jsonkeys.never
_optional = jsonkeys.optional
_build = jsonkeys.build
_read = jsonkeys.read
_truthy = jsonkeys.truthy
_write = jsonkeys.write

SCHEMA = 1
Json = Dict[str, Any]  # a JSON object of the schema (``core/jsonkeys.Json``)

# What stopped the target (an EVENT's "kind"): a --break location or --break-op hit, a signal, a NaN/Inf
# (--check-numerics), a snapshot (stack, attach's SIGQUIT), attach --timeout, a core file, a hang that
# ``watch`` caught (a snapshot taken because the job stopped progressing).
EventKind = Literal["breakpoint", "signal", "numerics", "snapshot", "timeout", "core", "hang"]
EVENT_KINDS: Tuple[str, ...] = get_args(EventKind)


@dataclass(slots=True, repr=False, eq=False)
class ChildDeath(Record):
    """A child of the script that died of a signal (``children_killed`` of a document)."""

    pid: int
    name: Optional[str]  # its command name (comm), where it was read
    signal: str  # "SIGSEGV"
    core_dumped: bool = False

    def to_json(self) -> Json:
        return _write(self, _CHILD_DEATH_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> ChildDeath:
        return _build(cls, _CHILD_DEATH_KEYS, d)


_CHILD_DEATH_KEYS = (_k("pid", doc=_always, required=True), _k("name", doc=_always),
                     _k("signal", doc=_always, required=True), _k("core_dumped", doc=_always, load=bool))


def _optional_frames(ds: Optional[List[Json]]) -> Optional[List[EventFrame]]:
    return frames_from_json(ds) if ds is not None else None


def _optional_captured_frames(ds: Optional[List[Json]]) -> Optional[List[Frame]]:
    return captured_frames_from_json(ds) if ds is not None else None


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class WorksFor(FrozenRecord):
    """The Python thread a pool thread's work is for (``"works_for"`` of a THREAD, ``analysis/event.py``): its
    tid, what it waits in, and why this one."""

    tid: int
    waits_in: Optional[str] = None  # "the next element of a tf.data iterator", "Session.run"...
    how: Optional[str] = None  # "only thread waiting in TensorFlow"

    def to_json(self) -> Json:
        return _write(self, _WORKS_FOR_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> WorksFor:
        return _build(cls, _WORKS_FOR_KEYS, d)


_WORKS_FOR_KEYS = (_k("tid", doc=_always, required=True), _k("waits_in", doc=_always), _k("how", doc=_always))


# -- threads, captures, events, documents --------------------------------------------------------------------
def _own_function(t: Any, fn: Optional[TfFunction]) -> bool:
    return fn is not None and not fn.how


def _attributed_function(t: Any, fn: Optional[TfFunction]) -> bool:
    return fn is not None and bool(fn.how)


def _mismatched(t: Any, value: Any) -> bool:
    return t.python_frames is not None


@dataclass(slots=True, repr=False, eq=False)
class Thread(Record):
    """One thread as captured (THREAD): its ids, names, states, and frames, innermost first; an event's is an
    ``EventThread``."""

    tid: int
    name: str = ""
    frames: List[Frame] = field(default_factory=list)
    merge: Optional[str] = None  # "ok" | "native" | "mismatch" | "no-thread-state" | "partial"
    gil: Optional[str] = None  # "held" | "waiting"
    python_name: Optional[str] = None
    daemon: Optional[bool] = None
    gc: bool = False  # inside a garbage collection
    kernel: Optional[Json] = None  # {"state", "syscall"}
    progress: Optional[str] = None  # "stuck" | "moving" (stack --samples)
    stuck_s: Optional[float] = None
    ns_tid: Optional[int] = None
    merge_detail: Optional[str] = None  # merge "mismatch": why
    python_frames: Optional[List[Frame]] = None  # merge "mismatch": the Python stack alone
    error: Optional[str] = None
    lock_wait: Optional[Json] = None  # {"resource", "owner", "evidence"}: a lock it waits for whose holder memory says
    after_release: bool = False  # stack: its unwind read memory the hold's copy lacked, after the process ran on
    consistent: Optional[bool] = None  # stack --no-pause: False where its stack changed while it was read
    gdb_thread: Optional[int] = None  # internal: gdb's thread number
    cxx_exception: Optional[Json] = None  # {"type", "what", "state"}: the C++ exception in flight (cxxexc.py)

    def to_json(self) -> Json:
        return _write(self, _CAPTURED_THREAD_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> Thread:
        return _build(cls, _CAPTURED_THREAD_KEYS, d)

    def runs_python(self) -> bool:
        """Whether a Python frame is on its merged stack."""
        return any(isinstance(f, PythonFrame) for f in self.frames)

    def has_python(self) -> bool:
        """Whether the capture found Python frames for it: on its merged stack, or beside it (a mismatch)."""
        return bool(self.python_frames) or self.runs_python()

    def capture_json(self) -> Json:
        """The thread as a capture carries it (see ``NativeFrame.capture_json``)."""
        return _write(self, _CAPTURED_THREAD_KEYS, wire=True, order=_THREAD_WIRE)


@dataclass(slots=True, repr=False, eq=False)
class EventThread(Thread):
    """One thread of an event (THREAD): the captured one, its frames the event's (``EventNativeFrame``,
    ``EventPythonFrame``), with what analysis decided of it (``analysis/event.py``)."""

    # The event's own frames: analysis puts only event frames here (a list's type cannot narrow its base's).
    frames: List[EventFrame] = field(default_factory=list)  # type: ignore[assignment]
    python_frames: Optional[List[EventFrame]] = None  # type: ignore[assignment]
    label: Optional[str] = None  # the name the text shows (the OS name, or threading's where more telling)
    tf_function: Optional[TfFunction] = None
    tf_functions_in_flight: Optional[List[str]] = None  # an executor thread, several in flight
    works_for: Optional[WorksFor] = None  # a pool thread: the Python thread waiting on its work

    def to_json(self) -> Json:
        return _write(self, _THREAD_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> EventThread:
        return _build(cls, _THREAD_KEYS, d)


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
    _k("tf_functions_in_flight", doc=_truthy), _k("works_for", doc=_truthy, load=_optional(WorksFor.from_json)),
    _k("lock_wait", doc=_truthy, wire=_is_set), _k("cxx_exception", doc=_truthy, wire=_is_set),
    _k("after_release", doc=_truthy, wire=_truthy, load=bool), _k("consistent", wire=_is_set),
    _k("gdb_thread", doc=_never, wire=_is_set))
_THREAD_WIRE = ("tid", "name", "python_name", "daemon", "frames", "merge", "merge_detail", "python_frames",
                "has_python", "gil", "gc", "gdb_thread", "ns_tid", "error", "kernel", "progress", "stuck_s",
                "lock_wait", "cxx_exception", "consistent", "after_release")
# analysis's keys, never in a capture (nor in its wire form); a captured thread's frames are the capture's
ANALYSED_THREAD_KEYS = ("label", "tf_function", "tf_functions_in_flight", "works_for")
_CAPTURED_THREAD_KEYS = jsonkeys.without(_THREAD_KEYS, ANALYSED_THREAD_KEYS, frames=captured_frames_from_json,
                                         python_frames=_optional_captured_frames)


def thread_label(t: EventThread, main_name: Optional[str]) -> str:
    """The name a thread is shown by (JSON ``"label"``): ``threading``'s name where the OS name is the one
    every thread inherits (the main thread's, ``main_name``) or unknown (a core keeps no thread names), else
    the OS name that native code gave it."""
    name, py = t.name or "", t.python_name
    if py is not None and (not name or main_name is None or name == main_name):
        return py
    return name


def _threads(ds: Optional[List[Json]]) -> List[EventThread]:
    return [EventThread.from_json(t) for t in ds or []]


def _captured_threads(ds: Optional[List[Json]]) -> List[Thread]:
    return [Thread.from_json(t) for t in ds or []]


@dataclass(slots=True, repr=False, eq=False)
class Capture(Record):
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
    pool: Optional[Pool] = None  # executors.pool_summary: TensorFlow's inter-op pool
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
            return _build(cls, _CAPTURE_KEYS, d)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError("a malformed capture (%s: %s)" % (type(exc).__name__, exc)) from None


def _wire(key: str, rule: Rule = _is_set, **more: Any) -> _Key:
    """A key of the wire form alone (a ``Capture``'s)."""
    return _k(key, doc=_never, wire=rule, **more)


_CAPTURE_KEYS = (
    _wire("pid", _always), _wire("threads", _always, load=_captured_threads), _wire("warnings", _always, load=_as_list),
    _wire("ns_pid"), _wire("python"), _wire("finalizing", _truthy, load=bool), _wire("selected_tid"),
    _wire("pool", load=_optional(Pool.from_json)),
    _wire("via"), _wire("samples"), _wire("held_ms"), _wire("nonblocking", _truthy, load=bool),
    _wire("libraries", _truthy, load=_as_dict))


def _core_or_set(event: Any, value: Any) -> bool:
    """A core's event always says its signal's code and fault address, null or not."""
    return value is not None or event.kind == "core"


def _event_op(event: Any) -> Optional[Json]:
    return event.op.event_json() if event.op is not None else None


def _op_of(load: Any) -> Any:
    """An op's ``load``: None where absent."""
    return lambda v: load(v) if v is not None else None


@dataclass(slots=True, repr=False, eq=False)
class Event(Record):
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
    threads: List[EventThread] = field(default_factory=list)
    python: Optional[str] = None  # "3.11"
    via: Optional[str] = None  # "cfi" | "gdb"
    warnings: List[str] = field(default_factory=list)
    pool: Optional[Pool] = None  # the capture's, where it saw TensorFlow's pool or runs TensorFlow
    samples: Optional[Json] = None
    held_ms: Optional[float] = None  # stack without gdb: how long the process was held (0.0: --no-pause)
    finalizing: bool = False
    log: Optional[str] = None  # TensorFlow's fatal log line
    handler: Optional[bool] = None  # signal: the script has a handler for it
    op: Optional[Op] = None  # the op it stopped at (--break-op, a NaN/Inf's), where it was created
    fatal: Optional[bool] = None
    reraised_by_handler: bool = False
    cluster: Optional[Json] = None
    triage: Optional[HangVerdict] = None  # a snapshot's (SIGQUIT, --timeout), a core's from outside
    process: Optional[Json] = None  # attach --follow-children: {"pid", "cmdline", "task"?} of a child's event
    no_debug_info: Optional[List[Json]] = None  # the user's libraries on the stacks without debug info
    culprit: Optional[Json] = None  # watch's hang report: the process the others wait for, and why it does not come
    # attach --break-op --repro FILE: the script of this stop's op on its inputs, and what it did when run alone
    reproducer: Optional[Json] = None

    def to_json(self) -> Json:
        return _write(self, _EVENT_KEYS)

    @classmethod
    def from_json(cls, d: Json) -> Event:
        return _build(cls, _EVENT_KEYS, d)


_EVENT_KEYS = (
    _k("kind", doc=_always, required=True), _k("location"), _k("signal"), _k("signal_code", doc=_core_or_set),
    _k("fault_address", doc=_core_or_set), _k("sent_by"), _k("timeout"), _k("thread", doc=_always),
    _k("pid", doc=_always), _k("ns_pid"), _k("threads", doc=_always, load=_threads), _k("python", doc=_truthy),
    _k("via", doc=_truthy), _k("warnings", doc=_truthy, load=_as_list),
    _k("pool", doc=_truthy, load=_optional(Pool.from_json)),
    _k("samples", doc=_truthy), _k("held_ms"), _k("finalizing", doc=_truthy, load=bool), _k("log", doc=_truthy),
    _k("handler"), _k("op", get=_event_op, load=_op_of(Op.from_event_json)), _k("fatal"),
    _k("reraised_by_handler", doc=_truthy, load=bool),
    _k("cluster", doc=_truthy), _k("triage", load=lambda v: HangVerdict.from_json(v) if v is not None else None),
    _k("process"), _k("no_debug_info", doc=_truthy), _k("culprit", doc=_truthy), _k("reproducer"))


def _has_exit(doc: Any, value: Any) -> bool:
    return bool(doc.has_exit)


@dataclass(slots=True, repr=False, eq=False)
class Document(Record):
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

    def threads(self) -> List[EventThread]:
        """Every thread of every event, in order."""
        return [t for e in self.events for t in e.threads]

    def node(self) -> str:
        """Its Slurm node as its scheduler's variables name it ("" for a process of this machine): pids are per
        node, so a Slurm job's ranks are told apart by node and pid."""
        return str((self.scheduler or {}).get("node") or "")

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


@dataclass(repr=False, eq=False)
class Outcome(Record):
    """One process's result where several are taken (``stack`` on many processes, ``watch``'s hang report): its
    document, or why it could not be read."""

    pid: int
    doc: Optional[Document] = None
    error: Optional[str] = None
