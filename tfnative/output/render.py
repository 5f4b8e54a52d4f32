"""Text form of mixed stacks, and the frame filters it applies (pure).

Shared by gdb's ``tf-bt`` and the ``tfnative`` CLI so that both print the
same thing.  Frames and threads are those of the typed model (``model.py``).
"""

import re
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Union

from ..core.model import ElidedFrame, Frame, NativeFrame, Op, PythonFrame, Thread
from .elide import elided_text
from .fit import compact_cpp, cut_line, cut_middle, cut_name, cut_path, wrap

# Native frames of the interpreter that only move a call along: hidden by
# default (``--native-all`` shows them).  Exact names or prefixes.
GLUE_EXACT = frozenset(
    """
    _PyEval_Vector _PyEval_EvalFrame _PyFunction_Vectorcall _PyObject_VectorcallTstate
    PyObject_Vectorcall PyObject_VectorcallDict PyObject_VectorcallMethod _PyObject_MakeTpCall
    _PyObject_Call _PyObject_Call_Prepend PyObject_Call PyObject_CallObject
    PyObject_CallOneArg PyObject_CallNoArgs PyObject_CallFunction PyObject_CallMethod
    PyObject_CallFunctionObjArgs PyObject_CallMethodObjArgs _PyObject_CallMethod
    _PyObject_CallMethodIdObjArgs _PyObject_FastCallDictTstate _PyObject_FastCall
    _PyObject_FastCallDict PyVectorcall_Call _PyVectorcall_Call _PyObject_VectorcallDictTstate
    PyEval_EvalCode PyEval_EvalCodeEx run_eval_code_obj run_mod pyrun_file builtin_exec
    builtin_exec_impl cfunction_call cfunction_vectorcall_FASTCALL
    cfunction_vectorcall_FASTCALL_KEYWORDS cfunction_vectorcall_NOARGS cfunction_vectorcall_O
    method_vectorcall method_vectorcall_FASTCALL method_vectorcall_FASTCALL_KEYWORDS
    method_vectorcall_NOARGS method_vectorcall_O method_vectorcall_VARARGS
    method_vectorcall_VARARGS_KEYWORDS method_vectorcall_FASTCALL_KEYWORDS_METHOD
    slot_tp_call slot_tp_init type_call vectorcall_method vectorcall_unbound object_vacall
    _PyObject_CallFunctionVa callmethod call_function do_call_core
    Py_RunMain Py_BytesMain pymain_run_python pymain_run_file pymain_run_file_obj
    pymain_main _PyRun_SimpleFileObject _PyRun_AnyFileObject PyRun_AnyFileExFlags
    PyRun_SimpleFileExFlags _PyRun_SimpleFileObject.constprop.0
    thread_run t_bootstrap pythread_wrapper PyObject_CallOneArg
    partial_call partial_vectorcall functools_partial_call gen_send_ex gen_send_ex2
    _PyEval_EvalCode function_code_fastcall _PyFunction_Vectorcall.part.0
    context_run _PyObject_Call.constprop.0
    """.split()
)
GLUE_PREFIXES = ("cfunction_vectorcall_", "method_vectorcall_", "_PyObject_Call", "pymain_",
                 "_PyRun_", "PyRun_")
# Names a prefix takes in that are no call glue: the allocator is where a thread is, not how it got there.
GLUE_NOT = frozenset(("_PyObject_Calloc",))

_SYSTEM_PARTS = ("/site-packages/", "/dist-packages/")
_STDLIB_RE = re.compile(r"/lib(64)?/python3\.\d+/")


# The suffix GCC gives a copy it made of a function (``cfunction_call.lto_priv.0``,
# ``_PyObject_MakeTpCall.constprop.1``: the names of an LTO build such as Debian's 3.14 and 3.15).
_GCC_CLONE_RE = re.compile(r"(\.(lto_priv|constprop|isra|part|cold|localalias)(\.\d+)?)+$")


def is_glue(frame: Frame) -> bool:
    if not isinstance(frame, NativeFrame):
        return False
    name = frame.function or ""
    base = _GCC_CLONE_RE.sub("", name.split("(", 1)[0].split("@", 1)[0].strip())
    return base in GLUE_EXACT or (base.startswith(GLUE_PREFIXES) and base not in GLUE_NOT)


def hide_glue(frames: Iterable[Frame]) -> List[Frame]:
    return [f for f in frames if not is_glue(f)]


def is_user_frame(frame: Frame) -> bool:
    """A Python frame of the user's own code: not the stdlib, not an installed package."""
    if not isinstance(frame, PythonFrame):
        return False
    path = frame.file or ""
    if not path or path.startswith("<"):
        return False
    if any(p in path for p in _SYSTEM_PARTS):
        return False
    return not _STDLIB_RE.search(path)


_TF_LIB_RE = re.compile(r"^(libtensorflow|_pywrap_|lib_pywrap_|libpywrap_|pywrap_|_tf_stack|_op_def|_dtypes"
                        r"|fast_module_type|flags_pybind|_proto_comparators|_errors_test_helper)")
_TF_NATIVE_NAMES = ("tensorflow::", "tsl::", "Eigen::", "xla::", "mlir::", "TFE_", "TF_", "pybind11::",
                    "absl::")
INTERPRETER_LIB_RE = re.compile(r"^(libpython3\.\d+|python3(\.\d+)?$|python$)")  # the interpreter's own files


def frame_class(frame: Frame) -> str:
    """user, tensorflow-python, tensorflow-native, interpreter or system."""
    if isinstance(frame, PythonFrame):
        if is_user_frame(frame):
            return "user"
        path = frame.file or ""
        if "/tensorflow/" in path or "/keras/" in path or "/tf_keras/" in path:
            return "tensorflow-python"
        return "system"
    lib = (frame.library if isinstance(frame, NativeFrame) else None) or ""
    name = frame.function or ""
    if _TF_LIB_RE.match(lib):
        return "tensorflow-native"
    if INTERPRETER_LIB_RE.match(lib):
        return "interpreter"
    if name.startswith(_TF_NATIVE_NAMES) and lib.endswith(".so") and "tensorflow" in lib:
        return "tensorflow-native"
    return "system"


_LANDMARK_RE = re.compile(r"^(TFE?_\w+$|.*::Compute(Async)?\()")


def is_landmark(frame: Frame) -> bool:
    """Frames never folded: TensorFlow's C API entry points and kernel/device Compute calls."""
    return isinstance(frame, NativeFrame) and bool(_LANDMARK_RE.match(frame.function or ""))


# How a thread that aborts gets from the failed check to the signal: libc's raise/abort, assert's and
# fortify's reporters, and the fatal logging of absl, tsl and TensorFlow (``LogMessageFatal``), C++'s
# ``std::terminate``.  A run of them at the top of a thread is one line of the text.
_RAISING = frozenset("""
    raise gsignal abort pthread_kill __pthread_kill __pthread_kill_implementation __pthread_kill_internal
    """.split())
_ABORT_EXACT = _RAISING | frozenset("""
    __assert_fail __assert_fail_base __assert_perror_fail __libc_message __libc_fatal __fortify_fail
    __chk_fail __stack_chk_fail malloc_printerr
    """.split())
_FATAL_LOG_RE = re.compile(r"^(absl::(\w+::)?(raw_)?log_internal::|(tsl|tensorflow)::internal::LogMessage"
                           r"|google::LogMessage)")
# (``__cxa_throw`` is not one: it says where an exception came from, and stays in view.)
_TERMINATE_RE = re.compile(r"^(std::terminate\b|__gnu_cxx::__verbose_terminate_handler|__cxxabiv1::__terminate"
                           r"|std::__terminate)")
MIN_ABORT_RUN = 3  # a shorter run is shown whole: one line of fold would hide nothing


def _abort_part(frame: Frame) -> Optional[str]:
    """Which part of an abort a native frame is: "raise", "abort" (libc's reporters), "log" (a fatal log
    message), "terminate"; None for any other frame."""
    if not isinstance(frame, NativeFrame):
        return None
    name = frame.function or ""
    base = _GCC_CLONE_RE.sub("", name.split("(", 1)[0].split("@", 1)[0].strip())
    base = base[len("__GI_"):] if base.startswith("__GI_") else base
    if base in _RAISING:
        return "raise"
    if base in _ABORT_EXACT:
        return "abort"
    if _FATAL_LOG_RE.match(base):
        return "log"
    if _TERMINATE_RE.match(base):
        return "terminate"
    return None


def abort_run(frames: List[Frame]) -> int:
    """How many frames at the top of ``frames`` only deliver an abort (signal, abort(), a fatal log message,
    ``std::terminate``); 0 unless they raise a signal."""
    n = 0
    while n < len(frames) and _abort_part(frames[n]) is not None:
        n += 1
    return n if any(_abort_part(f) == "raise" for f in frames[:n]) else 0


def abort_text(frames: List[Frame]) -> str:
    """``... 6 frames of abort() and TensorFlow's fatal log ...``: a folded abort run, as one line."""
    parts = {_abort_part(f) for f in frames}
    what = ["abort()"]
    if "log" in parts:
        what.append("TensorFlow's fatal log")
    if "terminate" in parts:
        what.append("std::terminate")
    if any((f.function or "").startswith(("__assert", "__GI___assert")) for f in frames):
        what.append("a failed assert")
    said = what[0] if len(what) == 1 else ", ".join(what[:-1]) + " and " + what[-1]
    return "... %d frames of %s ..." % (len(frames), said)


def fold_plan(frames: List[Frame], keep_head: int = 2, keep_tail: int = 2, min_run: int = 8) -> List[Any]:
    """Indices to print, with ``("fold", n)`` markers for runs of TensorFlow-internal frames.

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
        cls = frame_class(frames[i])
        if not cls.startswith("tensorflow"):
            out.append(i)
            i += 1
            continue
        if is_landmark(frames[i]):
            out.append(i)
            i += 1
            continue
        j = i
        while j < n and frame_class(frames[j]).startswith("tensorflow") and not is_landmark(frames[j]):
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


def frame_line(index: int, f: Frame, name_width: int = 160, verbose: bool = False, bare: bool = False,
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
        mark = "  <-- your code" if f.user or is_user_frame(f) else ""
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
    mark = "  <-- op %s" % op_label(f.op) if f.op else ""
    source = "\n           | %s" % f.source.strip() if f.file and f.source and not bare else ""
    if width is None:
        # the source line goes under the frame's line, not inside it
        return head + _short(name, name_width) + where + lib + address + extra + mark + source
    parts = _NativeParts(head, name, where, lib, address, extra, mark)
    return _fit_native(parts, f, width) + cut_line(source, width + 1)


class _NativeParts(NamedTuple):
    """The pieces of a native frame's line, in order (``#3      name at file:line in lib [address] extra mark``)."""

    head: str
    name: str
    where: str
    lib: str
    address: str
    extra: str
    mark: str


def _fit_native(parts: _NativeParts, f: Frame, width: int) -> str:
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


def op_label(op: Union[Op, Dict[str, Any]]) -> str:
    """``MatMul "model/dense/MatMul"``: an op's type and node name; where oneDNN rewrote the op, the type its
    kernel carries, labelled (``Conv2D (oneDNN kernel _MklNativeConv2D)``).  An eager op's node is named
    after its type, a rewritten one after the kernel's type: no name is shown for those.  ``op``: a kernel
    frame's ``Op``, or an op as JSON (an event's, a triage's)."""
    if isinstance(op, Op):
        op = op.to_json()
    label = op.get("type") or "?"
    kernel = op.get("kernel_type")
    if op.get("name") and op["name"] not in (label, kernel):
        label += ' "%s"' % op["name"]
    if kernel and kernel != op.get("type"):
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


def is_marked(frame: Frame) -> bool:
    """A frame the text points at in its left margin (``>``): the user's code, a kernel with its op."""
    if isinstance(frame, PythonFrame):
        return bool(frame.user or is_user_frame(frame))
    return isinstance(frame, NativeFrame) and bool(frame.op)


MARGIN = "> "  # in front of a marked frame's line, where the others have two spaces


def thread_block(thread: Thread, header: Optional[str] = None, fold: bool = True,
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


def variable_lines(frame: Frame, width: Optional[int] = None) -> List[str]:
    """A Python frame's arguments and locals (``--locals``), one per line under the frame (within ``width``)."""
    variables = frame.variables if isinstance(frame, PythonFrame) else None
    return [cut_line("               %s = %s%s" % (v["name"], v["repr"], "  (argument)" if v.get("arg") else ""),
                     width) for v in variables or []]


def _levels(frames: List[Frame]) -> List[int]:
    """Each frame's depth in the thread's stack, counting the frames an elided entry stands for."""
    out, level = [], 0
    for f in frames:
        out.append(level)
        level += f.count if isinstance(f, ElidedFrame) else 1
    return out
