"""Text form of mixed stacks (pure).

Shared by gdb's ``tf-bt`` and the ``tfnative`` CLI so that both print the
same thing.  Frames and threads are those of the typed model (``model.py``),
as analysis marked them (``analysis/frames.py``: which frames fold, which
deliver an abort, which are the user's): the text reads those marks and
decides nothing of its own.
"""

from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional

from ..core.elide import elided_text
from ..core.model import (
    ElidedFrame,
    EventFrame,
    EventNativeFrame,
    EventThread,
    NativeFrame,
    Op,
    PythonFrame,
)
from .fit import compact_cpp, cut_line, cut_middle, cut_name, cut_path, wrap

MIN_ABORT_RUN = 3  # a shorter run is shown whole: one line of fold would hide nothing


def abort_run(frames: List[EventFrame]) -> int:
    """How many frames at the top of ``frames`` only deliver an abort (signal, abort(), a fatal log message,
    ``std::terminate``): those analysis gave their part in it (``EventNativeFrame.abort``)."""
    for n, f in enumerate(frames):
        if not isinstance(f, NativeFrame) or f.abort is None:
            return n
    return len(frames)


def abort_text(frames: List[EventFrame]) -> str:
    """``... 6 frames of abort() and TensorFlow's fatal log ...``: a folded abort run, as one line."""
    parts = {f.abort for f in frames if isinstance(f, NativeFrame)}
    what = ["abort()"]
    if "log" in parts:
        what.append("TensorFlow's fatal log")
    if "terminate" in parts:
        what.append("std::terminate")
    if "assert" in parts:
        what.append("a failed assert")
    said = what[0] if len(what) == 1 else ", ".join(what[:-1]) + " and " + what[-1]
    return "... %d frames of %s ..." % (len(frames), said)


def _foldable(frame: EventFrame) -> bool:
    return isinstance(frame, (NativeFrame, PythonFrame)) and frame.foldable


def fold_plan(frames: List[EventFrame], keep_head: int = 2, keep_tail: int = 2, min_run: int = 8) -> List[Any]:
    """Indices to print, with ``("fold", n)`` markers for runs of TensorFlow-internal frames (those analysis
    made ``foldable``).

    Runs shorter than ``min_run`` are shown whole; of a longer run, the first
    two frames (where the thread is) and the last two (where TensorFlow was
    entered) stay.  At the top of a thread that aborts, the frames that only
    deliver the abort (``abort_run``) are one ``("fold", n, text)``.
    ``--full`` prints everything; JSON always has everything.
    """
    out: List[Any] = []
    i = 0
    n = len(frames)
    top = abort_run(frames)
    if top >= MIN_ABORT_RUN and top < n:
        out.append(("fold", top, abort_text(frames[:top])))
        i = top
    while i < n:
        if not _foldable(frames[i]):
            out.append(i)
            i += 1
            continue
        j = i
        while j < n and _foldable(frames[j]):
            j += 1
        run = list(range(i, j))
        if len(run) >= min_run:
            head = run[: max(keep_head, 1 if i == 0 else keep_head)]
            tail = run[-keep_tail:]
            out.extend(head)
            out.append(("fold", len(run) - len(head) - len(tail)))
            out.extend(tail)
        else:
            out.extend(run)
        i = j
    return out


def _short(name: str, width: int) -> str:
    """``name`` cut in the middle to ``width``: the start (namespace, class) and the end (the method, its
    last arguments) stay."""
    return cut_middle(name, width)


# What a native frame's name keeps, in order, when its line is too wide for the terminal: the name whole,
# without template arguments, without parameters.
_NAME_FORMS = ((False, False), (True, False), (True, True))
MIN_NAME = 30  # a cut name or path keeps at least this much before the other gives way


def frame_line(index: int, f: EventFrame, name_width: int = 160, verbose: bool = False, bare: bool = False,
               width: Optional[int] = None) -> str:
    """The frame as ``stack`` prints it (``bare``: without a native frame's address and source line).

    ``width``: the line (and the source line under it) fits in that many
    columns (a terminal): the address is left out (but for a frame without
    a name: it is in ``--full`` and the JSON), a C++ name loses its template
    arguments, then its parameters, then the library, then its middle; a
    path loses its leading directories; the marks (``<-- op``, ``<-- your
    code``) stay.  ``None``: everything, the name cut only past ``name_width``.
    """
    if isinstance(f, ElidedFrame):
        return cut_line("       %s" % elided_text(f), width)
    if isinstance(f, PythonFrame):
        mark = "  <-- your code" if f.user_code else ""
        conv = f.converted
        if conv:
            mark += "  [AutoGraph" + (": ran as %s at %s:%s]" % (conv.get("function"), conv.get("file"),
                                                                conv.get("line")) if verbose else "]")
        head = "#%-3d [py] " % index
        line_no = ":%s" % (f.line if f.line is not None else "?")
        function = f.function or "?"
        path = f.file or "?"
        if width is None:
            return "%s%s at %s%s%s" % (head, _short(function, name_width), path, line_no, mark)
        fixed = len(head) + len(" at ") + len(line_no) + len(mark)
        path = cut_path(path, max(width - fixed - len(function), min(len(path), MIN_NAME)))
        function = cut_middle(function, max(width - fixed - len(path), 12))
        return cut_line("%s%s at %s%s%s" % (head, function, path, line_no, mark), width, keep_end=mark)
    head = "#%-3d      " % index
    name = f.function or "??"
    where = " at %s:%s" % (f.file, f.line) if f.file else ""
    lib = " in %s" % (f.library or "??")
    address = "" if bare else " [%s]" % (f.address if f.address is not None else "?")
    extra = " (recovered by %s: no CFI below)" % f.recovered if f.recovered else ""
    mark = native_mark(f)
    source = "\n           | %s" % f.source.strip() if f.file and f.source and not bare else ""
    if width is None:
        # the source line goes under the frame's line, not inside it
        return head + _short(name, name_width) + where + lib + address + extra + mark + source
    parts = _NativeParts(head, name, where, lib, address, extra, mark)
    return _fit_native(parts, f, width) + cut_line(source, width + 1)


def native_mark(f: EventNativeFrame) -> str:
    """What the text points out on a native frame: the user's kernel and its op (``<-- your kernel, op
    ZeroOut``), other code of the user's (``<-- your code``), another kernel's op (``<-- op MatMul``)."""
    if f.frame_class == "user":
        return "  <-- your kernel, op %s" % op_label(f.op) if f.op else "  <-- your code"
    return "  <-- op %s" % op_label(f.op) if f.op else ""


class _NativeParts(NamedTuple):
    """The pieces of a native frame's line, in order (``#3      name at file:line in lib [address] extra mark``)."""

    head: str
    name: str
    where: str
    lib: str
    address: str
    extra: str
    mark: str


def _fit_native(parts: _NativeParts, f: EventFrame, width: int) -> str:
    """A native frame's line within ``width`` (see ``frame_line``)."""
    head, name, where, lib, address, extra, mark = parts
    if name == "??":
        extra = address + extra  # a named frame's address is in --full and the JSON
    fixed = len(head) + len(extra) + len(mark)
    for templates, params in _NAME_FORMS:
        shown = compact_cpp(name, params) if templates else name
        if fixed + len(shown) + len(where) + len(lib) <= width:
            return head + shown + where + lib + extra + mark
    shown = compact_cpp(name, params=True)
    if name != "??":
        lib = ""  # the name and its source file before the library
    room = width - fixed - len(lib)
    if where:
        file_room = max(room - min(len(shown), MIN_NAME) - len(" at :%s" % f.line), 12)
        where = " at %s:%s" % (cut_path(f.file or "", file_room), f.line)
    shown = cut_name(shown, max(room - len(where), 12))
    return cut_line(head + shown + where + lib + extra + mark, width, keep_end=mark)


def op_label(op: Op) -> str:
    """``MatMul "model/dense/MatMul"``: an op's type and node name; where oneDNN rewrote the op, the type its
    kernel carries, labelled (``Conv2D (oneDNN kernel _MklNativeConv2D)``).  An eager op's node is named
    after its type, a rewritten one after the kernel's type: no name is shown for those.  ``op``: a kernel
    frame's, an event's, a triage's."""
    label = op.type or "?"
    kernel = op.kernel_type
    if op.name and op.name not in (label, kernel):
        label += ' "%s"' % op.name
    if kernel and kernel != op.type:
        label += " (oneDNN kernel %s)" % kernel
    return label


CXX_STATES = {"caught": "being handled", "uncaught": "thrown, not caught yet", "thrown": "being thrown",
              "terminate": "not caught: std::terminate"}


def cxx_exception_text(exc: Dict[str, Any], q: Callable[[str], str] = str) -> str:
    """``std::length_error: "vector::_M_default_append" (being handled)``: a C++ exception (``q`` quotes
    its type)."""
    text = q(exc.get("type") or "?")
    if exc.get("what") is not None:
        text += ': "%s"' % exc["what"]
    return text + " (%s)" % CXX_STATES.get(exc.get("state") or "", "in flight")


def cxx_exception_line(exc: Dict[str, Any]) -> str:
    """The line under a thread's title: ``C++ exception in flight: std::length_error: "..." (being handled)``."""
    return "C++ exception in flight: " + cxx_exception_text(exc)


def is_marked(frame: EventFrame) -> bool:
    """A frame the text points at in its left margin (``>``): the user's code, a kernel with its op."""
    if isinstance(frame, PythonFrame):
        return frame.user_code
    return isinstance(frame, NativeFrame) and (bool(frame.op) or frame.frame_class == "user")


MARGIN = "> "  # in front of a marked frame's line, where the others have two spaces


def thread_block(thread: EventThread, header: Optional[str] = None, fold: bool = True,
                 width: Optional[int] = None) -> List[str]:
    """A thread as text lines: its title, then a line a frame, innermost first; marked frames (the user's
    code, kernels with their op) start with ``>``.  ``fold``: runs of internal frames as one line each
    (``fold_plan``).  ``width``: every line fits in that many columns (a terminal; the title wraps)."""
    title = header or 'Thread %s "%s"' % (thread.tid, thread.name or "")
    lines = wrap(title, width, sep=" ")
    inner = width - 2 if width is not None else None
    if thread.cxx_exception:
        lines.extend(wrap("  " + cxx_exception_line(thread.cxx_exception), width, sep=" "))
    frames = thread.frames
    plan = fold_plan(frames) if fold else list(range(len(frames)))
    levels = _levels(frames)
    for item in plan:
        if isinstance(item, tuple):
            text = item[2] if len(item) > 2 else "... %d TensorFlow frames ..." % item[1]
            lines.append(cut_line("       " + text, width))
        else:
            f = frames[item]
            lines.append((MARGIN if is_marked(f) else "  ") + frame_line(levels[item], f, verbose=not fold,
                                                                          width=inner))
            lines.extend(variable_lines(f, width))
    if not frames:
        lines.append("  (no frames)")
    if thread.merge == "mismatch":
        lines.extend(wrap("  !! Python and native stacks could not be matched (%s); the Python stack alone:"
                          % (thread.merge_detail if thread.python_frames is not None else ""), width, sep=" "))
        python = thread.python_frames or []
        for level, f in zip(_levels(python), python):
            lines.append((MARGIN if is_marked(f) else "  ") + frame_line(level, f, width=inner))
    if thread.error:
        lines.extend(wrap("  !! %s" % thread.error, width, sep=" "))
    return lines


def variable_lines(frame: EventFrame, width: Optional[int] = None) -> List[str]:
    """A frame's arguments and locals (``--locals``: a Python frame's; a native frame's of the user's own code,
    with DWARF), one per line under the frame (within ``width``)."""
    variables = frame.variables if isinstance(frame, (PythonFrame, NativeFrame)) else None
    return [cut_line("               %s = %s%s" % (v["name"], v["repr"], "  (argument)" if v.get("arg") else ""),
                     width) for v in variables or []]


def _levels(frames: List[EventFrame]) -> List[int]:
    """Each frame's depth in the thread's stack, counting the frames an elided entry stands for."""
    out, level = [], 0
    for f in frames:
        out.append(level)
        level += f.count if isinstance(f, ElidedFrame) else 1
    return out


def describe_rank(scheduler: Optional[Mapping[str, Any]], host: Optional[str] = None) -> Optional[str]:
    """``rank 2 on node vm (slurm job 12, step 0)``, ``rank 3 in pod train-3 (kubernetes)``, ``rank 1
    (local rank 1) on host h (torchrun)``: a scheduler's rank (``Document.scheduler``, from
    ``core/ranks.scheduler_of``) in words; None without one."""
    if not isinstance(scheduler, Mapping) or scheduler.get("rank") is None:
        return None
    kind = scheduler.get("kind")
    text = "rank %s" % scheduler["rank"]
    if kind == "slurm":
        node = scheduler.get("node") or host
        if node:
            text += " on node %s" % node
        extra = "slurm job %s" % scheduler.get("job", "?")
        if scheduler.get("step") is not None:
            extra += ", step %s" % scheduler["step"]
        return "%s (%s)" % (text, extra)
    if kind == "kubernetes":
        if scheduler.get("pod"):
            text += " in pod %s" % scheduler["pod"]
        return text + " (kubernetes)"
    if scheduler.get("local_rank") is not None:
        text += " (local rank %s)" % scheduler["local_rank"]
    if host:
        text += " on host %s" % host
    return "%s (%s)" % (text, kind or "launcher")
