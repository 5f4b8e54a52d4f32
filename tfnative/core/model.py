"""The typed model of tfnative's documents: frames, threads, captures, events, documents (JSON schema v1).

Each class holds one schema object (docs/json-schema.md) as typed attributes.
``to_json()`` gives exactly the schema's dict: the same keys in the same
order as the documents tfnative writes, optional keys left out where they
are absent.  ``from_json()`` reads one back (``merge``'s input, a saved
document).  A ``Capture`` (a process's threads before the report) is made of
the same frames and threads; its wire form (``Capture.to_json``, the frames'
and threads' ``capture_json``: over MI, the session socket, ``tf-bt --json``)
also carries the internal attributes (``level``, ``start``, ``eval_address``,
``gdb_thread``) that a document's ``to_json()`` never writes.

The small leaf objects of the schema (``op``, ``tf_function``, ``kernel``,
``pool``, ``samples``, ``cluster``, a TRIAGE) stay JSON dicts: they are
written and read as they are.  This module is pure: no gdb, no process, no
file.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Union

__all__ = ["SCHEMA", "NativeFrame", "PythonFrame", "ElidedFrame", "Frame", "Thread", "Capture", "Event", "Document",
           "frame_from_json", "frames_from_json"]

SCHEMA = 1
Json = Dict[str, Any]


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
    op: Optional[Json] = None  # {"type", "name", "kernel", "kernel_type"}: a kernel's or the device's Compute
    recovered: Optional[str] = None  # "frame-pointer" | "scan": found without CFI
    frame_class: Optional[str] = None  # "class": user, tensorflow-native, interpreter, system...
    source: Optional[str] = None  # the text of file:line
    level: Optional[int] = None  # internal: the frame's number in gdb's/the unwinder's stack
    start: Optional[int] = None  # internal: its function's entry address, where tfnative named it

    def capture_json(self) -> Json:
        """The frame as a capture carries it (MI, the session socket, ``tf-bt --json``): the internal
        attributes too, nothing of the report's (``class``, ``source``)."""
        out: Json = {"kind": "native", "function": self.function, "file": self.file, "line": self.line,
                     "library": self.library, "address": self.address}
        if self.level is not None:
            out["level"] = self.level
        if self.inline:
            out["inline"] = True
        if self.tailcall:
            out["tailcall"] = True
        if self.recovered:
            out["recovered"] = self.recovered
        if self.start is not None:
            out["start"] = self.start
        if self.op:
            out["op"] = self.op
        return out

    def to_json(self) -> Json:
        out: Json = {"kind": "native", "function": self.function, "file": self.file, "line": self.line,
                     "library": self.library, "address": self.address}
        if self.inline:
            out["inline"] = True
        if self.tailcall:
            out["tailcall"] = True
        if self.op:
            out["op"] = self.op
        if self.recovered:
            out["recovered"] = self.recovered
        if self.frame_class is not None:
            out["class"] = self.frame_class
        if self.source is not None:
            out["source"] = self.source
        return out

    @classmethod
    def from_json(cls, d: Json) -> NativeFrame:
        return cls(function=d.get("function"), file=d.get("file"), line=d.get("line"), library=d.get("library"),
                   address=d.get("address"), inline=bool(d.get("inline")), tailcall=bool(d.get("tailcall")),
                   op=d.get("op"), recovered=d.get("recovered"), frame_class=d.get("class"),
                   source=d.get("source"), level=d.get("level"), start=d.get("start"))


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
    tf_function: Optional[Json] = None  # {"name", "python_function"}: on TF's quick_execute frame
    converted: Optional[Json] = None  # {"function", "file", "line"}: where AutoGraph's generated code ran
    frame_class: Optional[str] = None
    source: Optional[str] = None
    eval_address: Optional[str] = None  # internal: the _PyEval_EvalFrameDefault frame it was merged at

    def capture_json(self) -> Json:
        """The frame as a capture carries it (see ``NativeFrame.capture_json``)."""
        out: Json = {"kind": "python", "function": self.function, "file": self.file, "line": self.line}
        if self.locals:
            out["locals"] = self.locals
        if self.converted:
            out["converted"] = self.converted
        if self.variables is not None:
            out["variables"] = self.variables
        if self.eval_address is not None:
            out["eval_address"] = self.eval_address
        return out

    def to_json(self) -> Json:
        out: Json = {"kind": "python", "function": self.function, "file": self.file, "line": self.line}
        if self.user is not None:
            out["user"] = self.user
        if self.locals:
            out["locals"] = self.locals
        if self.variables is not None:
            out["variables"] = self.variables
        if self.tf_function:
            out["tf_function"] = self.tf_function
        if self.converted:
            out["converted"] = self.converted
        if self.frame_class is not None:
            out["class"] = self.frame_class
        if self.source is not None:
            out["source"] = self.source
        return out

    @classmethod
    def from_json(cls, d: Json) -> PythonFrame:
        return cls(function=d.get("function"), file=d.get("file"), line=d.get("line"), user=d.get("user"),
                   locals=d.get("locals"), variables=d.get("variables"), tf_function=d.get("tf_function"),
                   converted=d.get("converted"), frame_class=d.get("class"), source=d.get("source"),
                   eval_address=d.get("eval_address"))


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
        return {"kind": "elided", "count": self.count, "functions": self.functions, "function": self.function,
                "file": None, "line": None}

    @classmethod
    def from_json(cls, d: Json) -> ElidedFrame:
        return cls(count=d.get("count", 0), functions=list(d.get("functions") or []))


Frame = Union[NativeFrame, PythonFrame, ElidedFrame]
_FRAME_KINDS = {"native": NativeFrame, "python": PythonFrame, "elided": ElidedFrame}


def frame_from_json(d: Json) -> Frame:
    """The frame a FRAME dict stands for, by its ``kind``.  Raises ValueError on an unknown kind."""
    cls = _FRAME_KINDS.get(d.get("kind"))  # type: ignore[arg-type]
    if cls is None:
        raise ValueError("a frame of unknown kind %r" % d.get("kind"))
    return cls.from_json(d)


def frames_from_json(ds: Optional[List[Json]]) -> List[Frame]:
    return [frame_from_json(d) for d in ds or []]


def _frames_json(frames: List[Frame]) -> List[Json]:
    return [f.to_json() for f in frames]


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
    tf_function: Optional[Json] = None
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
        out: Json = {"tid": self.tid, "name": self.name}
        if self.label is not None:
            out["label"] = self.label
        out.update(frames=_frames_json(self.frames), merge=self.merge, gil=self.gil)
        if self.python_name is not None:
            out["python_name"] = self.python_name
        if self.daemon is not None:
            out["daemon"] = self.daemon
        if self.gc:
            out["gc"] = True
        for key in ("kernel", "progress", "stuck_s", "ns_tid"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        # A tf.function read from the thread's own frames comes before the merge's details; one attributed
        # to an executor thread ("how") after them, where the thread's fields end.
        attributed = bool(self.tf_function and self.tf_function.get("how"))
        if self.tf_function and not attributed:
            out["tf_function"] = self.tf_function
        if self.python_frames is not None:
            out["merge_detail"] = self.merge_detail
            out["python_frames"] = _frames_json(self.python_frames)
        if self.error:
            out["error"] = self.error
        if attributed:
            out["tf_function"] = self.tf_function
        if self.tf_functions_in_flight:
            out["tf_functions_in_flight"] = self.tf_functions_in_flight
        if self.works_for:
            out["works_for"] = self.works_for
        if self.lock_wait:
            out["lock_wait"] = self.lock_wait
        if self.cxx_exception:
            out["cxx_exception"] = self.cxx_exception
        if self.after_release:
            out["after_release"] = True
        if self.consistent is not None:
            out["consistent"] = self.consistent
        return out

    @classmethod
    def from_json(cls, d: Json) -> Thread:
        python_frames = d.get("python_frames")
        return cls(tid=d["tid"], name=d.get("name") or "", frames=frames_from_json(d.get("frames")),
                   merge=d.get("merge"), gil=d.get("gil"), python_name=d.get("python_name"), daemon=d.get("daemon"),
                   gc=bool(d.get("gc")), kernel=d.get("kernel"), progress=d.get("progress"),
                   stuck_s=d.get("stuck_s"), ns_tid=d.get("ns_tid"), tf_function=d.get("tf_function"),
                   merge_detail=d.get("merge_detail"),
                   python_frames=frames_from_json(python_frames) if python_frames is not None else None,
                   error=d.get("error"), tf_functions_in_flight=d.get("tf_functions_in_flight"),
                   works_for=d.get("works_for"), gdb_thread=d.get("gdb_thread"), label=d.get("label"),
                   lock_wait=d.get("lock_wait"), cxx_exception=d.get("cxx_exception"),
                   after_release=bool(d.get("after_release")), consistent=d.get("consistent"))

    def runs_python(self) -> bool:
        """Whether a Python frame is on its merged stack."""
        return any(isinstance(f, PythonFrame) for f in self.frames)

    def has_python(self) -> bool:
        """Whether the capture found Python frames for it: on its merged stack, or beside it (a mismatch)."""
        return bool(self.python_frames) or self.runs_python()

    def capture_json(self) -> Json:
        """The thread as a capture carries it (see ``NativeFrame.capture_json``)."""
        out: Json = {"tid": self.tid, "name": self.name}
        if self.python_name is not None:
            out["python_name"] = self.python_name
        if self.daemon is not None:
            out["daemon"] = self.daemon
        out["frames"] = [f.capture_json() for f in self.frames]
        out["merge"] = self.merge
        if self.python_frames is not None:
            out["merge_detail"] = self.merge_detail
            out["python_frames"] = [f.capture_json() for f in self.python_frames]
        out["has_python"] = self.has_python()
        out["gil"] = self.gil
        if self.gc:
            out["gc"] = True
        for key in ("gdb_thread", "ns_tid", "error", "kernel", "progress", "stuck_s", "lock_wait", "cxx_exception",
                    "consistent"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.after_release:
            out["after_release"] = True
        return out


@dataclass(slots=True)
class Capture:
    """One capture of a process's threads, before the report: what ``-tfnative-capture`` answers over MI,
    what ``snapshot.py`` and a core give, what an ``attach`` session sends ``stack --pid`` over its socket.

    ``report.make_event`` makes the EVENT of it.  Its JSON (``to_json``/``from_json``) is the wire form
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

    def to_json(self) -> Json:
        out: Json = {"pid": self.pid, "threads": [t.capture_json() for t in self.threads],
                     "warnings": self.warnings}
        if self.ns_pid is not None:
            out["ns_pid"] = self.ns_pid
        if self.python is not None:
            out["python"] = self.python
        if self.finalizing:
            out["finalizing"] = True
        for key in ("selected_tid", "pool", "via", "samples", "held_ms"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.nonblocking:
            out["nonblocking"] = True
        return out

    @classmethod
    def from_json(cls, d: Json) -> Capture:
        """The capture ``d`` stands for.  Raises ValueError where ``d`` is no capture."""
        try:
            return cls(pid=d.get("pid"), threads=[Thread.from_json(t) for t in d.get("threads") or []],
                       warnings=list(d.get("warnings") or []), ns_pid=d.get("ns_pid"), python=d.get("python"),
                       finalizing=bool(d.get("finalizing")), selected_tid=d.get("selected_tid"),
                       pool=d.get("pool"), via=d.get("via"), samples=d.get("samples"), held_ms=d.get("held_ms"),
                       nonblocking=bool(d.get("nonblocking")))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError("a malformed capture (%s: %s)" % (type(exc).__name__, exc)) from None


@dataclass(slots=True)
class Event:
    """One stop of the target (EVENT): what stopped it, and its threads, the stopped one first."""

    kind: str  # "breakpoint" | "signal" | "numerics" | "snapshot" | "timeout" | "core"
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
    op: Optional[Json] = None
    fatal: Optional[bool] = None
    reraised_by_handler: bool = False
    cluster: Optional[Json] = None
    triage: Optional[Json] = None
    process: Optional[Json] = None  # attach --follow-children: {"pid", "cmdline", "task"?} of a child's event

    def to_json(self) -> Json:
        out: Json = {"kind": self.kind}
        core = self.kind == "core"
        for key, value, always in (("location", self.location, False), ("signal", self.signal, False),
                                   ("signal_code", self.signal_code, core),
                                   ("fault_address", self.fault_address, core),
                                   ("sent_by", self.sent_by, False), ("timeout", self.timeout, False)):
            if always or value is not None:
                out[key] = value
        out["thread"] = self.thread
        out["pid"] = self.pid
        if self.ns_pid is not None:
            out["ns_pid"] = self.ns_pid
        out["threads"] = [t.to_json() for t in self.threads]
        for key in ("python", "via", "warnings", "pool", "samples"):
            value = getattr(self, key)
            if value:
                out[key] = value
        if self.held_ms is not None:
            out["held_ms"] = self.held_ms
        if self.finalizing:
            out["finalizing"] = True
        if self.log:
            out["log"] = self.log
        for key in ("handler", "op", "fatal"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.reraised_by_handler:
            out["reraised_by_handler"] = True
        if self.cluster:
            out["cluster"] = self.cluster
        if self.triage is not None:
            out["triage"] = self.triage
        if self.process is not None:
            out["process"] = self.process
        return out

    @classmethod
    def from_json(cls, d: Json) -> Event:
        return cls(kind=d["kind"], location=d.get("location"), signal=d.get("signal"),
                   signal_code=d.get("signal_code"), fault_address=d.get("fault_address"),
                   sent_by=d.get("sent_by"), timeout=d.get("timeout"), thread=d.get("thread"), pid=d.get("pid"),
                   ns_pid=d.get("ns_pid"), threads=[Thread.from_json(t) for t in d.get("threads") or []],
                   python=d.get("python"), via=d.get("via"), warnings=list(d.get("warnings") or []),
                   pool=d.get("pool"), samples=d.get("samples"), held_ms=d.get("held_ms"),
                   finalizing=bool(d.get("finalizing")),
                   log=d.get("log"), handler=d.get("handler"), op=d.get("op"), fatal=d.get("fatal"),
                   reraised_by_handler=bool(d.get("reraised_by_handler")), cluster=d.get("cluster"),
                   triage=d.get("triage"), process=d.get("process"))


@dataclass(slots=True)
class Document:
    """One tfnative document: a process and its events (``attach``, ``stack --json``, ``core``).

    ``has_exit``: the document says how the process ended (``attach``, ``core``: ``"exit"`` is written,
    null or not; its ``triage`` is its events' summary, ``report.document_triage``); a ``stack`` document
    has no ``"exit"``, and its ``triage`` is the hang verdict (``verdict.triage``).
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
    children_killed: List[Json] = field(default_factory=list)  # {"pid", "signal"}: children that died of one
    core: Optional[str] = None  # attach --core: where the core written at the fatal signal is
    triage: Optional[Json] = None
    attached: bool = False  # internal: attach --pid, a process tfnative did not start

    def to_json(self) -> Json:
        out: Json = {"tfnative": SCHEMA, "pid": self.pid, "argv": self.argv,
                     "events": [e.to_json() for e in self.events], "unresolved": self.unresolved}
        for key in ("host", "task", "labels", "scheduler"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.has_exit:
            out["exit"] = self.exit
        if self.dumps:
            out["dumps"] = self.dumps
        if self.children_killed:
            out["children_killed"] = self.children_killed
        if self.core:
            out["core"] = self.core
        if self.triage is not None:
            out["triage"] = self.triage
        return out

    @classmethod
    def from_json(cls, d: Json) -> Document:
        """The document ``d`` stands for.  Raises ValueError where ``d`` is not a schema-1 document."""
        if not isinstance(d, dict) or d.get("tfnative") != SCHEMA:
            raise ValueError("not a tfnative schema %d document" % SCHEMA)
        try:
            return cls(argv=list(d.get("argv") or []), pid=d.get("pid"),
                       events=[Event.from_json(e) for e in d.get("events") or []],
                       unresolved=list(d.get("unresolved") or []), host=d.get("host"), task=d.get("task"),
                       labels=d.get("labels"), scheduler=d.get("scheduler"), has_exit="exit" in d, exit=d.get("exit"),
                       dumps=list(d.get("dumps") or []), children_killed=list(d.get("children_killed") or []),
                       core=d.get("core"), triage=d.get("triage"))
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
        return (event.process or {}).get("pid", self.pid) == self.pid

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
