"""From a capture to the event users read (``make_event``): each frame's class, its source line, the user's
frames, the tf.function a frame runs; glue hidden and deep stacks elided; executor threads attributed to the
tf.function or the thread they work for; the op of a ``--check-numerics`` stop and where ops were created
(``add_op_origin``); and a document's crash triage (``document_triage``).  It computes; ``output/`` prints.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from ..core import sourcelines
from ..core.elide import elide
from ..core.frameclass import frame_class, is_user_frame, native_class
from ..core.model import (
    Capture,
    CrashSummary,
    Document,
    Event,
    EventFrame,
    EventKind,
    EventPythonFrame,
    EventThread,
    Frame,
    NativeFrame,
    Op,
    PythonFrame,
    TfFunction,
    WorksFor,
    thread_label,
)
from ..core.tensorflow import executors
from . import opcall, pyop, userlibs, verdict
from .frames import event_thread, mark_thread


def make_event(kind: EventKind, capture: Capture, native_all: bool = False,
               in_flight: Optional[List[Tuple[int, TfFunction]]] = None, **extra: Any) -> Event:
    """Turn one capture into an event (EVENT of the schema), its threads and frames the event's types built of
    the capture's (``frames.event_thread``): the capture stays as it was captured.

    Frames get their ``class``, ``user`` and source line, glue frames are
    hidden (unless ``native_all``) and deep stacks elided; then what the renderers show of them
    (``frames.mark_thread``).  ``extra``: the event's fields of its kind (``location``,
    ``signal``, ``signal_code``, ``fault_address``, ``sent_by``, ``timeout``).
    ``in_flight``: (tid, tf.function) of Python threads outside the
    capture that wait for a tf.function (for executor threads' context).
    """
    selected = capture.selected_tid
    threads = []
    classes = userlibs.library_classes(capture.libraries)
    for captured in capture.threads:
        t = event_thread(captured, glue=native_all)  # the event's own thread: the capture's is not changed
        t.frames = elide(_cleaned(t.frames, classes))
        for f in t.frames:  # a custom op's library, by its path: its reproducer loads it
            if isinstance(f, NativeFrame) and f.frame_class == "user" and f.library:
                f.library_path = capture.libraries.get(f.library)
        t.tf_function = next((f.tf_function for f in t.frames if isinstance(f, PythonFrame) and f.tf_function),
                             None)
        if t.merge == "mismatch":
            t.python_frames = elide(_cleaned(t.python_frames or [], classes))
        else:
            t.python_frames = None
        t.tf_functions_in_flight = None
        mark_thread(t)
        threads.append(t)
    _attribute_executors(threads, in_flight or [])
    _attribute_waiters(threads, selected)
    main_name = next((t.name for t in threads if t.tid == capture.pid), None)
    for t in threads:
        t.label = thread_label(t, main_name)
    # The thread that stopped comes first.
    threads.sort(key=lambda t: t.tid != selected)
    pool = capture.pool
    return Event(kind=kind, **extra, thread=selected, pid=capture.pid,
                 ns_pid=capture.ns_pid,  # the pid inside the process's own PID namespace
                 threads=threads, python=capture.python, via=capture.via, warnings=list(capture.warnings),
                 # a process with TensorFlow's inter-op pool, or running TensorFlow with none (a forked child)
                 pool=pool if pool is not None and (pool.threads or _runs_tensorflow(threads)) else None,
                 samples=capture.samples, held_ms=capture.held_ms, finalizing=capture.finalizing,
                 no_debug_info=userlibs.without_debug_info(threads, capture.libraries) or None)


INJECT_MARK = "/tfnative/inject/"


def numerics_op(event: Event) -> None:
    """A ``numerics`` event (``--check-numerics``): the op from the hook's locals; the hook's frames cut off.

    The stopped thread's frames down to tfnative's hook are tfnative's own
    (the signal it sends itself, the error constructor it wraps): the stack
    starts at the code that was running when TensorFlow reported the NaN/Inf.
    """
    if not event.threads:
        return
    thread = event.threads[0]
    frames = thread.frames
    hook = next((f for f in frames if isinstance(f, PythonFrame) and f.function == "_tfnative_numerics_stop"),
                None)
    locals_ = (hook.locals if hook else None) or {}
    rows = [row.split("\t") for row in (locals_.get("created_at") or "").splitlines()]
    created = creation_frames([(r[0], int(r[1]), r[2]) for r in rows if len(r) == 3 and r[1].isdigit()])
    xla = [name for name in (locals_.get("xla_functions") or "").split(",") if name]
    # from_xla: the op handed on a NaN/Inf it did not make, while functions compiled by XLA ran unchecked
    event.op = Op(type=locals_.get("op_type"), name=locals_.get("op_name"), created_at=created, from_xla=xla or None)
    last = max((i for i, f in enumerate(frames) if INJECT_MARK in (f.file or "")), default=-1)
    if last >= 0:
        # Drop the hook and TensorFlow's error plumbing above the first frame that is not.
        rest = frames[last + 1:]
        while rest and isinstance(rest[0], PythonFrame) and "/tensorflow/python/framework/errors_impl.py" in (
                rest[0].file or ""):
            rest = rest[1:]
        thread.frames = rest
        mark_thread(thread)


def creation_frames(stack: List[Any]) -> List[EventFrame]:
    """The frames (outermost first: they go in an op's ``created_at``) of a Python creation stack given as
    (file, line, function) rows."""
    out: List[EventFrame] = []
    for file, line, function in stack:
        f = EventPythonFrame(function=function, file=file, line=int(line))
        f.user = is_user_frame(f)
        f.source = source_line(f.file, f.line)
        out.append(f)
    return out


_GRAD_RE = re.compile(r"^(?:gradient_tape/|gradients(?:_\d+)?/)?(?P<forward>.+?)(?:_grad)?/[^/]+$")


def add_op_origin(event: Event, origins_path: str) -> None:
    """Where the event's op was created (``--op-origins``): ``created_at`` on the event's op.

    The op is the event's (a ``--break-op`` hit) or the one on the stopped
    thread's frames (a crash in a kernel).  It is looked up by node name in
    the origins the script's hook wrote, preferring the graph of the
    tf.function the thread works for.  A gradient op (``.../Sqrt_grad/SqrtGrad``)
    also gets its forward op's origin (``"forward"``).
    """
    threads = event.threads
    op = event.op or _frames_op(threads[0].frames if threads else [])
    if op is None or not op.name:
        return
    origins: Dict[str, List[Dict[str, Any]]] = {}
    try:
        with open(origins_path) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                origins.setdefault(row.get("node"), []).append(row)
    except OSError:
        return
    fn = threads[0].tf_function if threads else None
    graph = fn.python_function if fn is not None else None

    def find(node: str) -> Optional[Dict[str, Any]]:
        rows = origins.get(node) or []
        return next((r for r in rows if r.get("graph") == graph), rows[-1] if rows else None)

    found = find(op.name)
    if found is None:
        return
    if event.op is None:
        event.op = Op(type=op.type, name=op.name)
    event.op.created_at = creation_frames(found.get("stack") or [])
    forward = _forward_of(op, found, origins)
    if forward is not None:
        event.op.forward = Op(name=forward["node"], type=forward.get("type"),
                              created_at=creation_frames(forward.get("stack") or []))


def _frames_op(frames: List[EventFrame]) -> Optional[Op]:
    """The op of the first kernel frame (a native frame with its op read) among ``frames``."""
    return next((f.op for f in frames if isinstance(f, NativeFrame) and f.op), None)


def _forward_of(op: Op, found: Dict[str, Any], origins: Dict[str, List[Dict[str, Any]]]
                ) -> Optional[Dict[str, Any]]:
    """The forward op of a gradient op (``SqrtGrad`` -> its ``Sqrt``), by type and name scope in its graph.

    ``gradients/a/Sqrt_grad/SqrtGrad`` names its forward op; a tape's
    ``gradient_tape/a/SqrtGrad`` has its scope: the one op of the forward type
    in that scope (or, failing that, in the graph) is taken; never a guess
    between several.
    """
    kind, name = op.type or "", op.name or ""
    if not kind.endswith("Grad") or len(kind) <= 4:
        return None
    m = _GRAD_RE.match(name)
    if m and "_grad/" in name and origins.get(m.group("forward")):
        return origins[m.group("forward")][-1]
    forward_type = kind[:-4]
    same = [r for rows in origins.values() for r in rows
            if r.get("type") == forward_type and r.get("graph") == found.get("graph")]
    scope = name[len("gradient_tape/"):].rpartition("/")[0] if name.startswith("gradient_tape/") else None
    scoped = [r for r in same if scope is not None and r["node"].rpartition("/")[0] == scope]
    for pool in (scoped, same):
        if len(pool) == 1:
            return pool[0]
    return None


_EXECUTOR_RE = re.compile(r"Executor(State|Impl)\b|ExecutorState<")


def in_flight_functions(capture: Capture) -> List[Tuple[int, TfFunction]]:
    """(tid, tf.function) for each thread of a capture that waits for a tf.function."""
    out = []
    for t in capture.threads:
        fn = next((fn for fn in map(tf_function, t.frames) if fn), None)
        if fn:
            out.append((t.tid, fn))
    return out


def _attribute_executors(threads: List[EventThread], extra: List[Tuple[int, TfFunction]]) -> None:
    """Executor threads running kernels say which tf.function, when only one is in flight.

    An executor thread holds no ``quick_execute`` frame that would name its
    function (a ``tf.py_function`` callback runs Python there, but not that);
    when Python threads wait for exactly one tf.function, that is the one
    (JSON ``"tf_function"`` with ``"how": "only tf.function in flight"`` and
    the waiting thread); with several, ``"tf_functions_in_flight"`` lists them.
    """
    waiting = dict(extra)
    waiting.update({t.tid: t.tf_function for t in threads if t.tf_function})
    names: Dict[str, TfFunction] = {}
    for tid, fn in waiting.items():
        names.setdefault(fn.name, dataclasses.replace(fn, called_by=tid))
    for t in threads:
        if t.tf_function:
            continue
        if not any(_EXECUTOR_RE.search(f.function or "") for f in t.frames):
            continue
        if len(names) == 1:
            t.tf_function = dataclasses.replace(next(iter(names.values())), how="only tf.function in flight")
        elif names:
            t.tf_functions_in_flight = sorted(names)


def _runs_tensorflow(threads: List[EventThread]) -> bool:
    return any(getattr(f, "frame_class", None) == "tensorflow-native" for t in threads for f in t.frames)


def _attribute_waiters(threads: List[EventThread], selected: Optional[int]) -> None:
    """A thread running TensorFlow's work with no Python frame of its own (a pool worker running a kernel,
    an executor, a tf.data runner) that no tf.function claims says which Python thread waits for that work
    (JSON ``"works_for": {"tid", "waits_in", "how"}``): the only Python thread waiting inside TensorFlow, or
    the only one waiting for a tf.data iterator where the worker runs tf.data's work.  Its user line is the
    user's line of a crash on the worker.  Where several could be waiting, none is named."""
    waiting = [(t, what) for t in threads for what in [executors.tf_wait(t)] if what]
    if not waiting:
        return
    for t in threads:
        if t.tf_function or t.tf_functions_in_flight or not executors.runs_tf_work(t):
            continue
        if t.tid != selected and not executors.runs_kernel(t):
            continue
        candidates = waiting
        if len(candidates) > 1 and executors.pool_of(t) == executors.TF_DATA:
            candidates = [(w, what) for w, what in waiting if what == executors.WAIT_TF_DATA]
        if len(candidates) == 1:
            w, what = candidates[0]
            how = ("only thread waiting in TensorFlow" if len(waiting) == 1
                   else "only thread waiting for a tf.data iterator")
            t.works_for = WorksFor(w.tid, what, how)


def _cleaned(frames: List[EventFrame], classes: Optional[Dict[str, str]] = None) -> List[EventFrame]:
    """The event's frames (innermost first: its own, built of the capture's) as the event shows them: each
    with its ``class`` (a native frame's from ``classes``, its library's class by the library's path,
    where that decides it) and its source line; a Python frame with ``user`` and, on a ``quick_execute``
    frame, the tf.function it runs (not where its caller is a generated op's eager fallback: that runs one
    op)."""
    python = [f for f in frames if isinstance(f, PythonFrame)]
    # each frame's caller outside TensorFlow's eager/execute.py (execute_with_callbacks...)
    callers = {id(f): next((c for c in python[i + 1:] if not c.file or not c.file.endswith(_EXECUTE_PY)), None)
               for i, f in enumerate(python)}
    for f in frames:
        if isinstance(f, PythonFrame):
            f.file = normal_path(f.file)
            f.user = is_user_frame(f)
            f.tf_function = tf_function(f, callers.get(id(f)))
        if isinstance(f, NativeFrame):
            f.frame_class = native_class(f, classes.get(f.library or "") if classes else None)
        elif isinstance(f, PythonFrame):
            f.frame_class = frame_class(f)
        if isinstance(f, (NativeFrame, PythonFrame)):
            f.source = f.source or source_line(f.file, f.line)
    return frames


_INFERENCE_RE = re.compile(r"^__(?:inference|forward|backward)_(.+)_(\d+)$")


def normal_path(path: Optional[str]) -> Optional[str]:
    """A Python file's path without ``..`` and ``.`` parts: ``python ../app.py`` run in ``/x/core`` names
    its file ``/x/core/../app.py`` (CPython makes the script's path absolute, not normal)."""
    if not path or not path.startswith("/") or ("/." not in path and "//" not in path):
        return path
    return os.path.normpath(path)


def tf_function(frame: Frame, caller: Optional[PythonFrame] = None) -> Optional[TfFunction]:
    """The tf.function a ``quick_execute`` frame runs: its graph function name and Python name.

    ``quick_execute`` also runs single eager ops: a generated op's ``*_eager_fallback`` (``caller``, the
    Python frame that called it, through ``execute_with_callbacks`` where op callbacks are on) passes the op's
    type as ``op_name``; that is an eager op (``pyop.python_op``), not a tf.function."""
    if not isinstance(frame, PythonFrame):
        return None
    name = (frame.locals or {}).get("op_name")
    if not name or not (frame.function or "").endswith("quick_execute"):
        return None
    if caller is not None and _is_eager_fallback(caller):
        return None
    m = _INFERENCE_RE.match(name)
    return TfFunction(name=name, python_function=m.group(1) if m else None)


_EXECUTE_PY = "/eager/execute.py"


_GEN_OPS_RE = re.compile(r"/gen_\w+_ops\.py$")


def _is_eager_fallback(frame: PythonFrame) -> bool:
    """A generated op wrapper's eager fallback: in TensorFlow's ``gen_*_ops.py``, or in the wrappers
    ``tf.load_op_library`` generates for a custom op's library and runs as exec'd code (file ``<string>``)."""
    return (bool(_GEN_OPS_RE.search(frame.file or "")) or frame.file == "<string>") and \
        (frame.function or "").endswith("_eager_fallback")


_EAGER_RE = re.compile(r"^TFE_(Py_)?Execute|^TFE_Py_FastPathExecute|^tensorflow::EagerExecute\(")


def ran_eagerly(thread: EventThread) -> bool:
    """Whether the thread's op runs eagerly: it dispatches an op (``TFE_Execute``, the fast path, an op
    wrapper's eager fallback) and runs no tf.function."""
    if thread.tf_function is not None:
        return False
    return any(_EAGER_RE.search(f.function or "") if isinstance(f, NativeFrame)
               else isinstance(f, PythonFrame) and _is_eager_fallback(f) for f in thread.frames)


def source_line(path: Optional[str], line: Optional[int]) -> Optional[str]:
    """The text of ``path:line`` (stripped), when the file is there to read."""
    return sourcelines.line(path, line)


def document_triage(doc: Document) -> CrashSummary:
    """What happened, in a few fields (the TRIAGE of a document that says how the process ended): hits per
    location, the signal, the op, the user frame nearest the last event, the tf.function, dumps, children."""
    hits: Dict[str, int] = {}
    for e in doc.events:
        if e.kind == "breakpoint":
            where = e.location if e.location is not None else "?"
            hits[where] = hits.get(where, 0) + 1
    # a core's event is the signal the process died of (kind "core")
    signals = [e for e in doc.events if (e.kind == "signal" or (e.kind == "core" and e.signal)) and doc.own(e)]
    signal_event = next((e for e in signals if e.fatal is not False), None)
    numerics = next((e for e in doc.events if e.kind == "numerics"), None)
    last = signal_event or numerics or (signals[-1] if signals else None) or (
        doc.events[-1] if doc.events else None)
    op = next((e.op for e in ([last] if last else []) + doc.events if e.op), None)
    out = CrashSummary(breakpoints=hits, signal=signal_event.signal if signal_event else None,
                       handled_signals=[e.signal for e in signals if e.fatal is False and e.signal is not None],
                       numerics=sum(e.kind == "numerics" for e in doc.events), dumps=len(doc.dumps),
                       children_killed=["%d %s" % (c.pid, c.signal) for c in doc.children_killed])
    if last is not None and last.threads:
        thread = last.threads[0]
        if op is None or last.op is None:
            # a crash in a kernel: the op on the stopped thread's frames
            op = _frames_op(thread.frames) or op
        if op is None and last is signal_event:
            # no kernel frame left (a C++ exception unwound it): the op's Python wrapper
            op = pyop.python_op(thread.frames + (thread.python_frames or []))
        if thread.cxx_exception:
            out.cxx_exception = thread.cxx_exception
        nearest = _nearest_user_frame(thread, last.threads[1:])
        if nearest is not None:
            out.nearest_user_frame = {"function": nearest.function, "file": nearest.file, "line": nearest.line}
        out.tf_function = thread.tf_function
        out.eager = op is not None and ran_eagerly(thread)
    out.op = _triage_op(op) if op else None
    if last is not None and last.log:
        out.log = last.log
    return out


def _nearest_user_frame(thread: EventThread, others: List[EventThread]) -> Optional[EventPythonFrame]:
    """The user's frame nearest the stopped ``thread``: on its merged stack, else its Python stack alone (a
    thread whose merge failed); an executor thread has no Python frame: then that of the thread that called
    its tf.function, among ``others`` (it follows it)."""
    caller = ((thread.tf_function.called_by if thread.tf_function else None)
              or (thread.works_for.tid if thread.works_for else None))
    for t in [thread] + [t for t in others if caller is not None and t.tid == caller]:
        nearest = next((f for f in t.frames + (t.python_frames or [])
                        if isinstance(f, PythonFrame) and f.user), None)
        if nearest is not None:
            return nearest
    return None


def _created_where(origin: Op) -> Optional[Dict[str, Any]]:
    """``{"file", "line", "function"}`` of the user's frame nearest the op's creation, from its ``created_at``."""
    created = next((f for f in reversed(origin.created_at or []) if isinstance(f, PythonFrame) and f.user), None)
    if created is None:
        return None
    return {"file": created.file, "line": created.line, "function": created.function}


def _triage_op(op: Op) -> Op:
    """The triage's op: its type and name, where it came from (no kernel frame: its Python wrapper,
    ``analysis/pyop.py``; --check-numerics: the XLA functions the NaN/Inf came out of), the crashing kernel's
    inputs and attributes (``core/tensorflow/kernelinputs.py``, ``core/tensorflow/nodeattrs.py``), and where the
    user created it (and its forward op, for a gradient op)."""
    forward = op.forward
    forward_where = _created_where(forward) if forward is not None else None
    return Op(type=op.type, name=op.name, kernel_type=op.kernel_type, from_=op.from_, from_xla=op.from_xla,
              inputs=op.inputs, inputs_unread=op.inputs_unread, attrs=op.attrs, attrs_unread=op.attrs_unread,
              call=op.call, created_where=_created_where(op),
              forward=Op(type=forward.type, name=forward.name, created_where=forward_where)
              if forward is not None and forward_where is not None else None)


def analyze(kind: EventKind, capture: Capture, native_all: bool = False, hang: bool = False,
            in_flight: Optional[List[Tuple[int, TfFunction]]] = None, cluster: Optional[Dict[str, Any]] = None,
            **extra: Any) -> Event:
    """The one way from a capture to the event users read (``stack``, ``core``, ``attach`` call it alike):
    the event (``make_event``: merged frames, op types, executor threads' work, thread labels), its
    ``cluster`` where one is known and, with ``hang``, its hang verdict (``verdict.triage``: thread roles and
    pools, the wait-for graph) stored as its ``triage``."""
    event = make_event(kind, capture, native_all=native_all, in_flight=in_flight, **extra)
    opcall.name_calls(event)  # the crashing op's argument names, its attributes off their defaults
    if cluster:
        event.cluster = cluster
    if hang:
        event.triage = verdict.triage(event)
    return event


def snapshot_document(doc: Document, capture: Capture, native_all: bool,
                      cluster: Optional[Dict[str, Any]]) -> Document:
    """``stack``'s document of one live process: its facts of the process (``doc``, no event yet) and one
    ``snapshot`` event of ``capture`` with the hang verdict, stored as the document's ``triage`` too."""
    event = analyze("snapshot", capture, native_all=native_all, hang=True, cluster=cluster)
    doc.events.append(event)
    doc.triage = event.triage
    return doc


def core_document(capture: Capture, argv: List[str], pid: Optional[int], said: Dict[str, Any], native_all: bool,
                  log: Optional[str] = None) -> Document:
    """The document of a core: one event of kind "core" (what the core ``said`` of its signal: ``signal``,
    ``signal_code``, ``fault_address``, ``sent_by`` where another process sent it; TensorFlow's fatal ``log``
    line), the exit (``{"signal": NAME}``: the process died of it; None without a signal) and the triage.

    The fatal-signal triage (``document_triage``: the signal, the op, the nearest user frame, the tf.function)
    applies to every core with a signal; the hang verdict (``verdict.py``) only where the signal came from
    outside or there is none, since a crash is no hang.  A core holds no kernel state and no samples, so the
    verdict says nothing about either."""
    event = analyze("core", capture, native_all=native_all, hang=not said["signal"] or "sent_by" in said, **said)
    doc = Document(argv=argv, pid=pid, events=[event])
    if said["signal"]:
        doc.exit, doc.has_exit = {"signal": event.signal}, True
    if log is not None:
        event.log = log
    return finish(doc)  # the crash triage, once the document has all it says (the fatal log line too)


def finish(doc: Document) -> Document:
    """A document that says how its process ended gets its crash summary as its ``triage`` (computed here,
    stored on the model, only serialized by ``output``); before it is printed or written."""
    if doc.has_exit:
        doc.triage = document_triage(doc)
    return doc
