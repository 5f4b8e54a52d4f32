"""What the user sees: the text report on stderr and the JSON document.

The events are made by ``analysis/event.py`` (``analysis.event.make_event``, from a capture); they stay
typed in a ``model.Document`` (``Document`` here is that class) until it is written (``write``: JSON
schema version 1, see docs/json-schema.md).  Nothing here computes what the document says: it prints it.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Any, Callable, ClassVar, Dict, Iterable, List, NamedTuple, Optional, Set, TextIO

from ..core import kstate, model
from ..core.model import (
    CrashSummary,
    Document,
    Event,
    EventFrame,
    EventThread,
    Op,
    Pool,
    PythonFrame,
    thread_label,
)
from ..files import write_output
from . import render, threadgroups
from .fit import cut_line, terminal_width, wrap
from .opinputs import crash_inputs_line
from .verdicttext import verdict_lines

SCHEMA = model.SCHEMA




# The pools of an unnamed pool summary (``executors.pool_summary``'s "pools"), as a thread's title says them.
POOL_PHRASES = {"inter-op": "inter-op pool", "intra-op": "intra-op pool", "tf.data": "tf.data",
                "other": "a TensorFlow pool"}


def pool_phrase(tid: Optional[int], pool: Optional[Pool]) -> str:
    """`` (inter-op pool)``: which of TensorFlow's pools a thread works in, where the OS names do not say it
    (TensorFlow 2.16 to 2.20: the summary's "pools"); "" elsewhere."""
    for key, tids in ((pool.pools if pool is not None else None) or {}).items():
        if tid in tids and key in POOL_PHRASES:
            return " (%s)" % POOL_PHRASES[key]
    return ""


# Text mark on a thread header line for its "gil" state.
GIL_MARKS = {"held": "[holds the GIL]", "waiting": "[waiting for the GIL]"}




def thread_display_name(t: EventThread, main_name: Optional[str]) -> str:
    """The quoted name a thread is shown by (``thread_label``), with the Python name beside an OS name that
    native code gave it (``"tf_Compute" (Python "Dummy-1")``); ``""`` for a thread with no name known."""
    label = t.label if t.label is not None else thread_label(t, main_name)
    py = t.python_name
    if py is None or py == label:
        return '"%s"' % label
    return '"%s" (Python "%s")' % (label, py)


def state_marks(t: EventThread) -> str:
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




def numerics_title(op: Op) -> str:
    """"NaN/Inf made by op Log", or, where the op only handed on a NaN/Inf that came out of a function
    compiled by XLA (not instrumented), which function, with the switch that checks its ops."""
    if op.from_xla:
        return ("NaN/Inf out of the XLA-compiled function %s (seen by op %s; XLA functions are not "
                "instrumented: rerun with --numerics-no-xla to find the op that made it)"
                % (", ".join(op.from_xla), render.op_label(op)))
    return "NaN/Inf made by op %s" % render.op_label(op)
























def signal_title(event: Event) -> str:
    """How a ``signal`` event is named: fatal only where the process died of it (or has no handler for it)."""
    name = event.signal
    if event.fatal is False:
        return "signal %s (handled by the script)" % name
    if event.fatal is None and event.handler:
        return "signal %s (the script has a handler for it)" % name
    return "fatal signal %s" % name


class Said(enum.Enum):
    """What one phrase of a crash summary says: its callers keep or change a phrase by this, never by its words."""

    BREAKPOINTS = "breakpoints"  # the hits per location, or that none was hit
    SIGNAL = "signal"  # the fatal signal
    HANDLED_SIGNAL = "handled signal"
    NUMERICS = "numerics"
    CXX_EXCEPTION = "C++ exception"
    OP = "op"
    USER_FRAME = "nearest user frame"
    TF_FUNCTION = "tf.function"
    EAGER = "eager"
    DUMPS = "dumps"
    CHILDREN = "children killed"
    THROW_HINT = "throw hint"  # how to stop where a C++ exception was thrown


class Phrase(NamedTuple):
    """One phrase of a crash summary: what it says (``Said``) and its text."""

    said: Said
    text: str


def summary_parts(t: CrashSummary, code: str = "") -> List[Phrase]:
    """A document's crash summary (``document_triage``) as short phrases, each with what it says; ``code``
    quotes names (a backtick for Markdown)."""
    def q(text: str) -> str:
        return "%s%s%s" % (code, text, code)

    parts = [Phrase(Said.BREAKPOINTS,
                    ", ".join("%s x%d" % (q(loc), n) for loc, n in t.breakpoints.items()) or "no breakpoint hit")]
    if t.signal:
        parts.append(Phrase(Said.SIGNAL, "fatal %s" % t.signal))
    for name in t.handled_signals:
        parts.append(Phrase(Said.HANDLED_SIGNAL, "signal %s (handled by the script)" % name))
    if t.numerics:
        parts.append(Phrase(Said.NUMERICS, "%d NaN/Inf event(s)" % t.numerics))
    if t.cxx_exception:
        parts.append(Phrase(Said.CXX_EXCEPTION, "C++ exception %s" % render.cxx_exception_text(t.cxx_exception, q)))
    if t.op and (t.op.created_where or "op %s" % t.op.type not in t.breakpoints):
        parts.append(Phrase(Said.OP, _op_phrase(t.op, q)))
    if t.nearest_user_frame:
        u = t.nearest_user_frame
        parts.append(Phrase(Said.USER_FRAME, "nearest user frame %s at %s" % (
            q(u["function"]), q("%s:%s" % (u["file"], u["line"])))))
    if t.tf_function:
        parts.append(Phrase(Said.TF_FUNCTION, "in tf.function %s" % q(t.tf_function.name)))
    elif t.eager:
        parts.append(Phrase(Said.EAGER, "the op ran eagerly"))
    if t.dumps:
        parts.append(Phrase(Said.DUMPS, "%d dump file(s)" % t.dumps))
    if t.children_killed:
        parts.append(Phrase(Said.CHILDREN, "child %s" % ", ".join("%s" % q(c) for c in t.children_killed)))
    if t.cxx_exception and not any(loc == CXA_THROW or loc.startswith("throw") for loc in t.breakpoints):
        parts.append(Phrase(Said.THROW_HINT, cxx_throw_hint(q, t.cxx_exception.get("type"))))
    return parts


def summary_phrases(t: CrashSummary, code: str = "") -> List[str]:
    """A document's crash summary (``document_triage``) as short phrases; ``code`` quotes names (a backtick
    for Markdown)."""
    return [p.text for p in summary_parts(t, code)]


def core_phrases(doc: Document, code: str = "") -> List[Phrase]:
    """The fatal-signal triage of a core's document as short phrases (nothing about breakpoints: a core has
    none; the signal with the pid that sent it, where another process did)."""
    event = doc.events[0]
    if not event.signal:
        return []
    t = crash_summary(doc)
    parts = summary_parts(t, code)
    if not t.breakpoints:  # "no breakpoint hit": true of every core, so nothing to say
        parts = [p for p in parts if p.said is not Said.BREAKPOINTS]
    if event.sent_by is not None:
        parts = [Phrase(p.said, p.text + " (sent by pid %d)" % event.sent_by) if p.said is Said.SIGNAL else p
                 for p in parts]
    return parts


def core_triage_lines(doc: Document) -> List[str]:
    """The lines ``tfnative core`` writes on stderr: ``triage: ...`` and, where it applies, ``verdict: ...``."""
    lines = []
    parts = core_phrases(doc)
    if parts:
        lines.append("triage: " + "; ".join(p.text for p in parts))
    hang = doc.events[0].triage
    if hang is not None:
        lines.extend(verdict_lines(hang, doc.events[0].pid))
    return lines


def _op_phrase(op: Op, q: Callable[[str], str]) -> str:
    """``op `Log` created at `app.py:3``` : the summary's op, where it came from and where it was created."""
    text = "op %s" % q(render.op_label(op))
    if op.from_:
        text += " (from %s)" % q(op.from_)
    if op.from_xla:
        text += " (NaN/Inf out of XLA-compiled %s: --numerics-no-xla checks its ops)" % ", ".join(
            q(name) for name in op.from_xla)
    if op.created_where:
        text += " created at %s" % q("%s:%s" % (op.created_where["file"], op.created_where["line"]))
    fwd = op.forward
    if fwd is not None and fwd.created_where:
        text += ", forward op %s at %s" % (q(fwd.type or "?"),
                                           q("%s:%s" % (fwd.created_where["file"], fwd.created_where["line"])))
    return text


CXA_THROW = "__cxa_throw"


_CLASS_NAME_RE = re.compile(r"^[A-Za-z_]\w*(::[A-Za-z_]\w*)*$")


def cxx_throw_hint(q: Any = str, type_name: Optional[str] = None) -> str:
    """How to see where the C++ exception in flight was thrown: the kernel it escaped from has unwound by the
    time the process dies of it, so a stop at the throw (``attach --break-throw TYPE``) shows it."""
    if type_name and _CLASS_NAME_RE.match(type_name):
        return "to stop where it was thrown (in the kernel it escaped from): rerun with %s" % q(
            "--break-throw " + type_name)
    return ("to stop where it was thrown (in the kernel it escaped from): rerun with %s (%s where other "
            "exceptions come first: the last hit is the throw)" % (q("--break-throw=any"), q("--max-hits N")))












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










def crash_summary(doc: Document) -> CrashSummary:
    """The crash summary analysis stored on a document that says how its process ended
    (``analysis.event.finish``)."""
    if not isinstance(doc.triage, CrashSummary):
        raise TypeError("a document's crash summary is analysis's to compute: analysis.event.finish(doc) first")
    return doc.triage


def write(doc: Document, path: str) -> None:
    """Write the document to the output ``path`` (``-``: stdout; see ``files.open_output`` for the rules); its
    ``triage`` is what analysis stored on it (``analysis.event.finish``)."""
    write_output(path, (json.dumps(doc.to_json(), indent=1) + "\n").encode())


def json_lines(docs: Iterable[Document]) -> bytes:
    """JSON Lines: one compact schema-v1 document per line (``stack --json`` of several processes, ``stack
    --slurm-job --documents``; ``write`` writes one document, indented)."""
    return b"".join(json.dumps(d.to_json(), separators=(",", ":")).encode() + b"\n" for d in docs)


def op_lines(event: Event, full: bool = False, width: Optional[int] = None) -> List[str]:
    """The op of a ``--break-op`` or ``numerics`` event, and where it was created, as text lines (within
    ``width``, a terminal's)."""
    op = event.op
    if op is None:
        return []
    lines: List[str] = []
    if event.kind == "breakpoint":
        lines.extend(wrap("Op: %s" % render.op_label(op), width, sep=" "))
    forward = op.forward or Op()
    for title, origin in (("Op", op), ("Its forward op %s" % render.op_label(forward), forward)):
        if not origin.created_at:
            continue
        lines.extend(wrap("%s created at (innermost last%s):" % (title, "" if full else "; --full for every frame"),
                          width, sep=" "))
        for f in _created_at_plan(origin.created_at, full):
            if f is None:
                lines.append("    ...")
                continue
            user = isinstance(f, PythonFrame) and f.user
            mark = "  <-- your code" if user else ""
            lines.append(cut_line("    %s:%s in %s%s" % (f.file, f.line, f.function, mark), width, keep_end=mark))
            if user and isinstance(f, PythonFrame) and f.source:
                lines.append(cut_line("      | %s" % f.source, width))
        lines.append("")
    return lines


def _created_at_plan(frames: List[EventFrame], full: bool) -> List[Optional[EventFrame]]:
    """The frames of an op's creation stack worth printing: the user's, and the TF call each makes."""
    if full:
        return list(frames)
    keep: Set[int] = set()
    for i, f in enumerate(frames):
        if isinstance(f, PythonFrame) and f.user:
            keep.update((i, i + 1))
    out: List[Optional[EventFrame]] = []
    for i, f in enumerate(frames):
        if i in keep:
            out.append(f)
        elif out and out[-1] is not None or not out:
            out.append(None)
    return out


NOTE_INDENT = " " * len("tfnative: ")  # a note's lines after its first, on a terminal


def no_debug_info_line(lib: Dict[str, Any]) -> str:
    """The one line on a library of the user's without debug info, and the rebuild that gives it."""
    how = "rebuild it with debug info (a Bazel build): " if lib.get("built_by") == "bazel" else "rebuild it with -g: "
    return ("no debug info in your library %s (no file:line, no locals in its frames); %s%s"
            % (lib.get("library") or "?", how, lib.get("rebuild") or "?"))


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
        return numerics_title(event.op or Op())

    @staticmethod
    def _timeout_title(event: Event, hit: Optional[int], max_hits: Optional[int]) -> str:
        return "timeout: pid %s still runs after %g s" % (event.pid, event.timeout or 0)

    @staticmethod
    def _snapshot_title(event: Event, hit: Optional[int], max_hits: Optional[int]) -> str:
        return "snapshot of pid %s" % event.pid

    @staticmethod
    def _hang_title(event: Event, hit: Optional[int], max_hits: Optional[int]) -> str:
        return "hang: pid %s made no progress" % event.pid

    # An event's title by its kind (``hit``/``max_hits``: a breakpoint's count); another kind is a snapshot's.
    TITLES: ClassVar[Dict[str, Callable[[Event, Optional[int], Optional[int]], str]]] = {
        "breakpoint": _breakpoint_title, "signal": _signal_title, "core": _core_title,
        "numerics": _numerics_title, "timeout": _timeout_title, "snapshot": _snapshot_title,
        "hang": _hang_title}

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
        inputs = crash_inputs_line(event)  # the crashing kernel's op and its inputs (issue #45)
        if inputs:
            lines.extend(wrap(inputs, width, sep=" "))
        for lib in event.no_debug_info or []:
            lines.extend(wrap(no_debug_info_line(lib), width, sep=" "))
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
    def _header(t: EventThread, event: Event) -> str:
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
            head += " working for thread %s, which waits for %s" % (t.works_for.tid, t.works_for.waits_in)
        if t.tid == event.thread and event.kind not in ("snapshot", "timeout", "hang"):
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
        parts = summary_phrases(crash_summary(doc))
        self.note("triage: " + "; ".join(parts))
