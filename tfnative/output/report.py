"""What the user sees: the text report on stderr and the JSON document.

A capture (``model.Capture``: the gdb side's over MI, ``snapshot/pipeline.py``'s, a
core's) becomes a ``model.Event`` here (``make_event``); events stay typed in
a ``model.Document`` (``Document`` here is that class) until it is written
(``write``: JSON schema version 1, see docs/json-schema.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, Callable, ClassVar, Dict, List, Optional, Set, TextIO, Tuple

from ..core import executors, kstate, model, sourcelines
from ..core.model import (
    Capture,
    CrashSummary,
    Document,
    Event,
    EventKind,
    Frame,
    NativeFrame,
    PythonFrame,
    TfFunction,
    Thread,
)
from ..files import write_output
from . import pyop, render, threadgroups
from .elide import elide
from .fit import cut_line, terminal_width, wrap

SCHEMA = model.SCHEMA


def make_event(kind: EventKind, capture: Capture, native_all: bool = False,
               in_flight: Optional[List[Tuple[int, TfFunction]]] = None, **extra: Any) -> Event:
    """Turn one capture into an event (EVENT of the schema); the event takes over its threads and frames.

    Frames get their ``class``, ``user`` and source line, glue frames are
    hidden (unless ``native_all``) and deep stacks elided.  ``extra``: the event's fields of its kind (``location``,
    ``signal``, ``signal_code``, ``fault_address``, ``sent_by``, ``timeout``).
    ``in_flight``: (tid, tf.function) of Python threads outside the
    capture that wait for a tf.function (for executor threads' context).
    """
    selected = capture.selected_tid
    threads = []
    for t in capture.threads:
        frames = t.frames if native_all else render.hide_glue(t.frames)
        t.frames = elide(_cleaned(frames))
        t.tf_function = next((f.tf_function for f in t.frames if isinstance(f, PythonFrame) and f.tf_function),
                             None)
        if t.merge == "mismatch":
            t.python_frames = elide(_cleaned(t.python_frames or []))
        else:
            t.python_frames = None
        t.tf_functions_in_flight = None
        threads.append(t)
    _attribute_executors(threads, in_flight or [])
    _attribute_waiters(threads, selected)
    main_name = next((t.name for t in threads if t.tid == capture.pid), None)
    for t in threads:
        t.label = thread_label(t, main_name)
    # The thread that stopped comes first.
    threads.sort(key=lambda t: t.tid != selected)
    pool = capture.pool or {}
    return Event(kind=kind, **extra, thread=selected, pid=capture.pid,
                 ns_pid=capture.ns_pid,  # the pid inside the process's own PID namespace
                 threads=threads, python=capture.python, via=capture.via, warnings=list(capture.warnings),
                 # a process with TensorFlow's inter-op pool, or running TensorFlow with none (a forked child)
                 pool=pool if pool.get("threads") or (pool and _runs_tensorflow(threads)) else None,
                 samples=capture.samples, held_ms=capture.held_ms, finalizing=capture.finalizing)


# The pools of an unnamed pool summary (``executors.pool_summary``'s "pools"), as a thread's title says them.
POOL_PHRASES = {"inter-op": "inter-op pool", "intra-op": "intra-op pool", "tf.data": "tf.data",
                "other": "a TensorFlow pool"}


def pool_phrase(tid: Optional[int], pool: Optional[Dict[str, Any]]) -> str:
    """`` (inter-op pool)``: which of TensorFlow's pools a thread works in, where the OS names do not say it
    (TensorFlow 2.16 to 2.20: the summary's "pools"); "" elsewhere."""
    for key, tids in ((pool or {}).get("pools") or {}).items():
        if tid in tids and key in POOL_PHRASES:
            return " (%s)" % POOL_PHRASES[key]
    return ""


INJECT_MARK = "/tfnative/inject/"
# Text mark on a thread header line for its "gil" state.
GIL_MARKS = {"held": "[holds the GIL]", "waiting": "[waiting for the GIL]"}


def thread_label(t: Thread, main_name: Optional[str]) -> str:
    """The name a thread is shown by (JSON ``"label"``): ``threading``'s name where the OS name is the one
    every thread inherits (the main thread's, ``main_name``) or unknown (a core keeps no thread names), else
    the OS name that native code gave it."""
    name, py = t.name or "", t.python_name
    if py is not None and (not name or main_name is None or name == main_name):
        return py
    return name


def thread_display_name(t: Thread, main_name: Optional[str]) -> str:
    """The quoted name a thread is shown by (``thread_label``), with the Python name beside an OS name that
    native code gave it (``"tf_Compute" (Python "Dummy-1")``); ``""`` for a thread with no name known."""
    label = t.label if t.label is not None else thread_label(t, main_name)
    py = t.python_name
    if py is None or py == label:
        return '"%s"' % label
    return '"%s" (Python "%s")' % (label, py)


def state_marks(t: Thread) -> str:
    """`` [holds the GIL] [gc] [S in futex] [stuck 2.0 s]``: a thread's states as its header shows them."""
    marks = [GIL_MARKS[t.gil]] if t.gil in GIL_MARKS else []
    if t.gc:
        marks.append("[in a garbage collection]")
    if t.kernel:
        marks.append("[%s]" % kstate.text(t.kernel))
    if t.progress == "stuck":
        marks.append("[stuck %.1f s]" % (t.stuck_s or 0.0))
    elif t.progress == "moving":
        marks.append("[moving]")
    return "".join(" " + m for m in marks)


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
    event.op = {"type": locals_.get("op_type"), "name": locals_.get("op_name"), "created_at": created}
    xla = [name for name in (locals_.get("xla_functions") or "").split(",") if name]
    if xla:
        # the op handed on a NaN/Inf it did not make, while functions compiled by XLA ran unchecked
        event.op["from_xla"] = xla
    last = max((i for i, f in enumerate(frames) if INJECT_MARK in (f.file or "")), default=-1)
    if last >= 0:
        # Drop the hook and TensorFlow's error plumbing above the first frame that is not.
        rest = frames[last + 1:]
        while rest and isinstance(rest[0], PythonFrame) and "/tensorflow/python/framework/errors_impl.py" in (
                rest[0].file or ""):
            rest = rest[1:]
        thread.frames = rest


def numerics_title(op: Dict[str, Any]) -> str:
    """"NaN/Inf made by op Log", or, where the op only handed on a NaN/Inf that came out of a function
    compiled by XLA (not instrumented), which function, with the switch that checks its ops."""
    if op.get("from_xla"):
        return ("NaN/Inf out of the XLA-compiled function %s (seen by op %s; XLA functions are not "
                "instrumented: rerun with --numerics-no-xla to find the op that made it)"
                % (", ".join(op["from_xla"]), render.op_label(op)))
    return "NaN/Inf made by op %s" % render.op_label(op)


def creation_frames(stack: List[Any]) -> List[Dict[str, Any]]:
    """FRAMEs (outermost first, as JSON: they go in an op's ``created_at``) of a Python creation stack given
    as (file, line, function) rows."""
    out = []
    for file, line, function in stack:
        f = PythonFrame(function=function, file=file, line=int(line))
        f.user = render.is_user_frame(f)
        f.source = source_line(f.file, f.line)
        out.append(f.to_json())
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
    if not op or not op.get("name"):
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

    found = find(op["name"])
    if found is None:
        return
    event.op = dict({"type": op.get("type"), "name": op["name"]}, **(event.op or {}))
    event.op["created_at"] = creation_frames(found.get("stack") or [])
    forward = _forward_of(op, found, origins)
    if forward is not None:
        event.op["forward"] = {"name": forward["node"], "type": forward.get("type"),
                               "created_at": creation_frames(forward.get("stack") or [])}


def _frames_op(frames: List[Frame]) -> Optional[Dict[str, Any]]:
    """The op of the first kernel frame (a native frame with its op read) among ``frames``, as JSON."""
    return next((f.op.to_json() for f in frames if isinstance(f, NativeFrame) and f.op), None)


def _forward_of(op: Dict[str, Any], found: Dict[str, Any], origins: Dict[str, List[Dict[str, Any]]]
                ) -> Optional[Dict[str, Any]]:
    """The forward op of a gradient op (``SqrtGrad`` -> its ``Sqrt``), by type and name scope in its graph.

    ``gradients/a/Sqrt_grad/SqrtGrad`` names its forward op; a tape's
    ``gradient_tape/a/SqrtGrad`` has its scope: the one op of the forward type
    in that scope (or, failing that, in the graph) is taken; never a guess
    between several.
    """
    kind, name = op.get("type") or "", op["name"]
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


def _attribute_executors(threads: List[Thread], extra: List[Tuple[int, TfFunction]]) -> None:
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


def _runs_tensorflow(threads: List[Thread]) -> bool:
    return any(getattr(f, "frame_class", None) == "tensorflow-native" for t in threads for f in t.frames)


def _attribute_waiters(threads: List[Thread], selected: Optional[int]) -> None:
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
            t.works_for = {"tid": w.tid, "waits_in": what, "how": how}


def _cleaned(frames: List[Frame]) -> List[Frame]:
    """Captured frames (innermost first) as the event shows them: each with its ``class`` and its source
    line; a Python frame with ``user`` and, on a ``quick_execute`` frame, the tf.function it runs (not where
    its caller is a generated op's eager fallback: that runs one op)."""
    python = [f for f in frames if isinstance(f, PythonFrame)]
    # each frame's caller outside TensorFlow's eager/execute.py (execute_with_callbacks...)
    callers = {id(f): next((c for c in python[i + 1:] if not c.file or not c.file.endswith(_EXECUTE_PY)), None)
               for i, f in enumerate(python)}
    for f in frames:
        if isinstance(f, PythonFrame):
            f.file = normal_path(f.file)
            f.user = render.is_user_frame(f)
            f.tf_function = tf_function(f, callers.get(id(f)))
        if isinstance(f, (NativeFrame, PythonFrame)):
            f.frame_class = render.frame_class(f)
            f.source = f.source or source_line(f.file, f.line)
    return frames


def signal_title(event: Event) -> str:
    """How a ``signal`` event is named: fatal only where the process died of it (or has no handler for it)."""
    name = event.signal
    if event.fatal is False:
        return "signal %s (handled by the script)" % name
    if event.fatal is None and event.handler:
        return "signal %s (the script has a handler for it)" % name
    return "fatal signal %s" % name


def summary_phrases(t: CrashSummary, code: str = "") -> List[str]:
    """A document's crash summary (``document_triage``) as short phrases; ``code`` quotes names (a backtick
    for Markdown)."""
    def q(text: str) -> str:
        return "%s%s%s" % (code, text, code)

    parts = [", ".join("%s x%d" % (q(loc), n) for loc, n in t.breakpoints.items()) or "no breakpoint hit"]
    if t.signal:
        parts.append("fatal %s" % t.signal)
    for name in t.handled_signals:
        parts.append("signal %s (handled by the script)" % name)
    if t.numerics:
        parts.append("%d NaN/Inf event(s)" % t.numerics)
    if t.cxx_exception:
        parts.append("C++ exception %s" % render.cxx_exception_text(t.cxx_exception, q))
    if t.op and (t.op.get("created_at") or "op %s" % t.op["type"] not in t.breakpoints):
        parts.append(_op_phrase(t.op, q))
    if t.nearest_user_frame:
        u = t.nearest_user_frame
        parts.append("nearest user frame %s at %s" % (q(u["function"]), q("%s:%s" % (u["file"], u["line"]))))
    if t.tf_function:
        parts.append("in tf.function %s" % q(t.tf_function.name))
    if t.dumps:
        parts.append("%d dump file(s)" % t.dumps)
    if t.children_killed:
        parts.append("child %s" % ", ".join("%s" % q(c) for c in t.children_killed))
    if t.cxx_exception and CXA_THROW not in t.breakpoints:
        parts.append(cxx_throw_hint(q))
    return parts


def _op_phrase(op: Dict[str, Any], q: Callable[[str], str]) -> str:
    """``op `Log` created at `app.py:3``` : the summary's op, where it came from and where it was created."""
    text = "op %s" % q(render.op_label(op))
    if op.get("from"):
        text += " (from %s)" % q(op["from"])
    if op.get("from_xla"):
        text += " (NaN/Inf out of XLA-compiled %s: --numerics-no-xla checks its ops)" % ", ".join(
            q(name) for name in op["from_xla"])
    if op.get("created_at"):
        text += " created at %s" % q("%s:%s" % (op["created_at"]["file"], op["created_at"]["line"]))
    if (op.get("forward") or {}).get("created_at"):
        fwd = op["forward"]
        text += ", forward op %s at %s" % (q(fwd.get("type") or "?"),
                                           q("%s:%s" % (fwd["created_at"]["file"], fwd["created_at"]["line"])))
    return text


CXA_THROW = "__cxa_throw"


def cxx_throw_hint(q: Any = str) -> str:
    """How to see where the C++ exception in flight was thrown."""
    return ("to see where it was thrown: rerun with %s (%s where other exceptions come first: the last hit is "
            "the throw)" % (q("--break " + CXA_THROW), q("--max-hits N")))


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
    return bool(_GEN_OPS_RE.search(frame.file or "")) and (frame.function or "").endswith("_eager_fallback")


def source_line(path: Optional[str], line: Optional[int]) -> Optional[str]:
    """The text of ``path:line`` (stripped), when the file is there to read."""
    return sourcelines.line(path, line)


PROCESS_CMDLINE_CHARS = 80  # of a process's command line in an event's header


def process_phrase(process: Dict[str, Any]) -> str:
    """``in child 1234 (python3 worker.py, worker:1)``: how a text header names an event's process."""
    cmdline = process.get("cmdline") or "?"
    if len(cmdline) > PROCESS_CMDLINE_CHARS:
        cmdline = cmdline[:PROCESS_CMDLINE_CHARS - 3] + "..."
    task = process.get("task")
    if isinstance(task, dict) and task.get("type"):
        cmdline += ", %s:%s" % (task["type"], task.get("index", "?"))
    return "in child %s (%s)" % (process.get("pid"), cmdline)


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
    out.op = _triage_op(op) if op else None
    if last is not None and last.log:
        out.log = last.log
    return out


def _nearest_user_frame(thread: Thread, others: List[Thread]) -> Optional[PythonFrame]:
    """The user's frame nearest the stopped ``thread``: on its merged stack, else its Python stack alone (a
    thread whose merge failed); an executor thread has no Python frame: then that of the thread that called
    its tf.function, among ``others`` (it follows it)."""
    caller = (thread.tf_function.called_by if thread.tf_function else None) or (thread.works_for or {}).get("tid")
    for t in [thread] + [t for t in others if caller is not None and t.tid == caller]:
        nearest = next((f for f in t.frames + (t.python_frames or [])
                        if isinstance(f, PythonFrame) and f.user), None)
        if nearest is not None:
            return nearest
    return None


def _created_where(origin: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """``{"file", "line", "function"}`` of the user's frame nearest the op's creation, from its ``created_at``."""
    created = next((f for f in reversed(origin.get("created_at") or []) if f.get("user")), None)
    if created is None:
        return None
    return {"file": created["file"], "line": created["line"], "function": created["function"]}


def _triage_op(op: Dict[str, Any]) -> Dict[str, Any]:
    """The triage's op: its type and name, where it came from, and where the user created it (and its
    forward op, for a gradient op)."""
    out = {"type": op.get("type"), "name": op.get("name")}
    if op.get("kernel_type"):
        out["kernel_type"] = op["kernel_type"]  # oneDNN's rewrite: the type the kernel itself carries
    if op.get("from"):
        out["from"] = op["from"]  # no kernel frame on the stack: the op's Python wrapper (output/pyop.py)
    if op.get("from_xla"):
        out["from_xla"] = op["from_xla"]  # --check-numerics: the NaN/Inf came out of these XLA functions
    where = _created_where(op)
    if where is not None:
        out["created_at"] = where
    forward = op.get("forward")
    where = _created_where(forward) if forward else None
    if forward and where is not None:
        out["forward"] = {"type": forward.get("type"), "name": forward.get("name"), "created_at": where}
    return out


def write(doc: Document, path: str) -> None:
    """Write the document to the output ``path`` (``-``: stdout; see ``files.open_output`` for the rules); a
    document that says how the process ended gets its ``triage`` from its events here."""
    if doc.has_exit:
        doc.triage = document_triage(doc)
    write_output(path, (json.dumps(doc.to_json(), indent=1) + "\n").encode())


def op_lines(event: Event, full: bool = False, width: Optional[int] = None) -> List[str]:
    """The op of a ``--break-op`` or ``numerics`` event, and where it was created, as text lines (within
    ``width``, a terminal's)."""
    op = event.op or {}
    lines: List[str] = []
    if event.kind == "breakpoint" and op:
        lines.extend(wrap("Op: %s" % render.op_label(op), width, sep=" "))
    for title, origin in (("Op", op), ("Its forward op %s" % render.op_label(op.get("forward") or {}),
                                       op.get("forward") or {})):
        if not origin.get("created_at"):
            continue
        lines.extend(wrap("%s created at (innermost last%s):" % (title, "" if full else "; --full for every frame"),
                          width, sep=" "))
        for f in _created_at_plan(origin["created_at"], full):
            if f is None:
                lines.append("    ...")
                continue
            mark = "  <-- your code" if f.get("user") else ""
            lines.append(cut_line("    %s:%s in %s%s" % (f["file"], f["line"], f["function"], mark), width,
                                  keep_end=mark))
            if f.get("user") and f.get("source"):
                lines.append(cut_line("      | %s" % f["source"], width))
        lines.append("")
    return lines


def _created_at_plan(frames: List[Dict[str, Any]], full: bool) -> List[Optional[Dict[str, Any]]]:
    """The frames of an op's creation stack worth printing: the user's, and the TF call each makes."""
    if full:
        return list(frames)
    keep: Set[int] = set()
    for i, f in enumerate(frames):
        if f.get("user"):
            keep.update((i, i + 1))
    out: List[Optional[Dict[str, Any]]] = []
    for i, f in enumerate(frames):
        if i in keep:
            out.append(f)
        elif out and out[-1] is not None or not out:
            out.append(None)
    return out


NOTE_INDENT = " " * len("tfnative: ")  # a note's lines after its first, on a terminal


def note_lines(text: str, width: Optional[int]) -> List[str]:
    """``tfnative: TEXT`` as lines within ``width`` (a terminal's: broken after its "; ", else between words)."""
    return wrap("tfnative: %s" % text, width, indent=NOTE_INDENT)


def write_note(stream: TextIO, text: str) -> None:
    """``tfnative: TEXT`` on ``stream``, wrapped to its width where it is a terminal."""
    stream.write("".join(line + "\n" for line in note_lines(text, terminal_width(stream))))
    stream.flush()


class Printer:
    """Writes events as text, one line a frame, innermost first.

    On a terminal, every line fits in its width (``fit.terminal_width``: the
    terminal's size, or ``COLUMNS``): frame lines are shortened, prose is
    wrapped.  Written to a file or a pipe, or with ``full``, nothing is cut.
    """

    def __init__(self, out: TextIO, native_all: bool = False, full: bool = False, group: bool = False,
                 width: Optional[int] = None, fit: bool = True) -> None:
        """``group``: threads with identical stacks are printed once, with their count and ids.  ``width``:
        the columns to fit the text to; by default the terminal's where ``out`` is one (``fit``); never with
        ``full``."""
        self.out = out
        self.native_all = native_all
        self.full = full
        self.group = group
        if width is None and fit:
            width = terminal_width(out)
        self.width = None if full else width

    def note(self, text: str) -> None:
        self.out.write("".join(line + "\n" for line in note_lines(text, self.width)))
        self.out.flush()

    @staticmethod
    def _breakpoint_title(event: Event, hit: Optional[int], max_hits: Optional[int]) -> str:
        title = "breakpoint %s hit" % event.location
        if hit is not None:
            title += " (hit %d of %d)" % (hit, max_hits or hit)
        return title

    @staticmethod
    def _signal_title(event: Event, hit: Optional[int], max_hits: Optional[int]) -> str:
        return signal_title(event)

    @staticmethod
    def _core_title(event: Event, hit: Optional[int], max_hits: Optional[int]) -> str:
        return "core of pid %s, fatal signal %s" % (event.pid, event.signal)

    @staticmethod
    def _numerics_title(event: Event, hit: Optional[int], max_hits: Optional[int]) -> str:
        return numerics_title(event.op or {})

    @staticmethod
    def _timeout_title(event: Event, hit: Optional[int], max_hits: Optional[int]) -> str:
        return "timeout: pid %s still runs after %g s" % (event.pid, event.timeout or 0)

    @staticmethod
    def _snapshot_title(event: Event, hit: Optional[int], max_hits: Optional[int]) -> str:
        return "snapshot of pid %s" % event.pid

    # An event's title by its kind (``hit``/``max_hits``: a breakpoint's count); another kind is a snapshot's.
    TITLES: ClassVar[Dict[str, Callable[[Event, Optional[int], Optional[int]], str]]] = {
        "breakpoint": _breakpoint_title, "signal": _signal_title, "core": _core_title,
        "numerics": _numerics_title, "timeout": _timeout_title, "snapshot": _snapshot_title}

    def event(self, event: Event, hit: Optional[int] = None, max_hits: Optional[int] = None) -> None:
        title = self.TITLES.get(event.kind, Printer._snapshot_title)(event, hit, max_hits)
        if event.process:
            title += " " + process_phrase(event.process)
        if event.ns_pid is not None:
            title += " (pid %s in its PID namespace)" % event.ns_pid
        python = ", Python %s" % event.python if event.python else ", no Python found"
        width = self.width
        lines = [""] + wrap("=== tfnative: %s%s ===" % (title, python), width, sep=" ")
        for w in event.warnings:
            lines.extend(wrap("warning: %s" % w, width, sep=" "))
        if event.finalizing:
            lines.append("The interpreter is shutting down (Py_FinalizeEx has begun).")
        if event.log:
            lines.extend(wrap("TensorFlow's log: %s" % event.log, width, sep=" "))
        lines.extend(op_lines(event, self.full, width))
        main_name = next((t.name for t in event.threads if t.tid == event.pid), None)
        headed = [(t, self._header(t, event)) for t in event.threads]
        groups = threadgroups.group_threads(headed) if self.group else [[t] for t, _ in headed]
        rest = {id(t): h for t, h in headed}
        for members in groups:
            t = members[0]
            inside = " (%s inside)" % t.ns_tid if t.ns_tid is not None else ""
            title = ("Thread %s%s %s" % (t.tid, inside, thread_display_name(t, main_name)) if len(members) == 1
                     else threadgroups.group_title(members))
            lines.extend(render.thread_block(t, title + rest[id(t)], fold=not self.full, width=width))
            lines.append("")
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()

    @staticmethod
    def _header(t: Thread, event: Event) -> str:
        """A thread's title after its id and name: the pool it works in (where TensorFlow did not name the
        thread), its tf.function, "(stopped here)", its states."""
        head = pool_phrase(t.tid, event.pool)
        if t.tf_function:
            fn = t.tf_function
            if fn.how:
                head += " working for tf.function %s (%s; %s, called by thread %s)" % (
                    fn.python_function or "?", fn.name, fn.how, fn.called_by)
            else:
                head += " in tf.function %s (%s)" % (fn.python_function or "?", fn.name)
        elif t.tf_functions_in_flight:
            head += " working for one of the tf.functions in flight: %s" % ", ".join(t.tf_functions_in_flight)
        elif t.works_for:
            head += " working for thread %s, which waits for %s" % (t.works_for["tid"], t.works_for["waits_in"])
        if t.tid == event.thread and event.kind not in ("snapshot", "timeout"):
            head += " (stopped here)"
        return head + state_marks(t)

    def summary(self, notes: List[str], doc: Document) -> None:
        for line in notes:
            self.note(line)
        if doc.dumps:
            self.note("%d file(s) dumped: %s" % (len(doc.dumps), ", ".join(doc.dumps[:5])
                                                  + (" ..." if len(doc.dumps) > 5 else "")))
        if doc.exit is not None:
            if "signal" in doc.exit:
                self.note("%s was killed by %s" % (doc.target_name(), doc.exit["signal"]))
            elif doc.exit["code"] != 0:
                self.note("%s exited with status %d" % (doc.target_name(), doc.exit["code"]))
        parts = summary_phrases(document_triage(doc))
        self.note("triage: " + "; ".join(parts))
