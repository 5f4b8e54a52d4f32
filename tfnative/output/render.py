"""Text form of mixed stacks, and the frame filters it applies (pure).

Shared by gdb's ``tf-bt`` and the ``tfnative`` CLI so that both print the
same thing.  Frames and threads are those of the typed model (``model.py``).
"""

import re
from typing import Callable, Dict, Iterable, List, Optional

from ..core.model import ElidedFrame, Frame, NativeFrame, PythonFrame, Thread
from .elide import elided_text

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
_INTERPRETER_LIB_RE = re.compile(r"^(libpython3\.\d+|python3(\.\d+)?$|python$)")


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
    if _INTERPRETER_LIB_RE.match(lib):
        return "interpreter"
    if name.startswith(_TF_NATIVE_NAMES) and lib.endswith(".so") and "tensorflow" in lib:
        return "tensorflow-native"
    return "system"


_LANDMARK_RE = re.compile(r"^(TFE?_\w+$|.*::Compute(Async)?\()")


def is_landmark(frame: Frame) -> bool:
    """Frames never folded: TensorFlow's C API entry points and kernel/device Compute calls."""
    return isinstance(frame, NativeFrame) and bool(_LANDMARK_RE.match(frame.function or ""))


def fold_plan(frames: List[Frame], keep_head: int = 2, keep_tail: int = 2, min_run: int = 8) -> List:
    """Indices to print, with ``("fold", n)`` markers for runs of TensorFlow-internal frames.

    Runs shorter than ``min_run`` are shown whole; of a longer run, the first
    two frames (where the thread is) and the last two (where TensorFlow was
    entered) stay.  ``--full`` prints everything; JSON always has everything.
    """
    out: List = []
    i = 0
    n = len(frames)
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
    if len(name) <= width:
        return name
    head = width // 3
    return name[:head] + "..." + name[len(name) - (width - head - 3):]


def frame_line(index: int, f: Frame, name_width: int = 160, verbose: bool = False, bare: bool = False) -> str:
    """The frame as ``stack`` prints it (``bare``: without a native frame's address and source line)."""
    if isinstance(f, ElidedFrame):
        return "       %s" % elided_text(f)
    if isinstance(f, PythonFrame):
        where = "%s:%s" % (f.file or "?", f.line if f.line is not None else "?")
        mark = "  <-- your code" if f.user or is_user_frame(f) else ""
        conv = f.converted
        if conv:
            mark += "  [AutoGraph" + (": ran as %s at %s:%s]" % (conv.get("function"), conv.get("file"),
                                                                conv.get("line")) if verbose else "]")
        return "#%-3d [py] %s at %s%s" % (index, _short(f.function or "?", name_width), where, mark)
    text = "#%-3d      %s" % (index, _short(f.function or "??", name_width))
    if f.file:
        text += " at %s:%s" % (f.file, f.line)
    text += " in %s" % (f.library or "??")
    if not bare:
        text += " [%s]" % (f.address if f.address is not None else "?")
    if f.recovered:
        text += " (recovered by %s: no CFI below)" % f.recovered
    if f.op:
        text += "  <-- op %s" % op_label(f.op)
    if f.file and f.source and not bare:
        text += "\n           | %s" % f.source.strip()  # under the frame's line, not inside it
    return text


def op_label(op: Dict) -> str:
    """``MatMul "model/dense/MatMul"``: an op's type and node name."""
    label = op.get("type") or "?"
    if op.get("name") and op["name"] != label:
        label += ' "%s"' % op["name"]
    return label


CXX_STATES = {"caught": "being handled", "uncaught": "thrown, not caught yet", "thrown": "being thrown",
              "terminate": "not caught: std::terminate"}


def cxx_exception_text(exc: Dict, q: Callable[[str], str] = str) -> str:
    """``std::length_error: "vector::_M_default_append" (being handled)``: a C++ exception (``q`` quotes
    its type)."""
    text = q(exc.get("type") or "?")
    if exc.get("what") is not None:
        text += ': "%s"' % exc["what"]
    return text + " (%s)" % CXX_STATES.get(exc.get("state") or "", "in flight")


def cxx_exception_line(exc: Dict) -> str:
    """The line under a thread's title: ``C++ exception in flight: std::length_error: "..." (being handled)``."""
    return "C++ exception in flight: " + cxx_exception_text(exc)


def thread_block(thread: Thread, header: Optional[str] = None, fold: bool = True) -> List[str]:
    lines = []
    title = header or 'Thread %s "%s"' % (thread.tid, thread.name or "")
    lines.append(title)
    if thread.cxx_exception:
        lines.append("  " + cxx_exception_line(thread.cxx_exception))
    frames = thread.frames
    plan = fold_plan(frames) if fold else list(range(len(frames)))
    levels = _levels(frames)
    for item in plan:
        if isinstance(item, tuple):
            lines.append("       ... %d TensorFlow frames ..." % item[1])
        else:
            lines.append("  " + frame_line(levels[item], frames[item], verbose=not fold))
            lines.extend(variable_lines(frames[item]))
    if not frames:
        lines.append("  (no frames)")
    if thread.merge == "mismatch":
        lines.append("  !! Python and native stacks could not be matched (%s); the Python stack alone:"
                     % (thread.merge_detail if thread.python_frames is not None else ""))
        python = thread.python_frames or []
        for level, f in zip(_levels(python), python):
            lines.append("  " + frame_line(level, f))
    if thread.error:
        lines.append("  !! %s" % thread.error)
    return lines


def variable_lines(frame: Frame) -> List[str]:
    """A Python frame's arguments and locals (``--locals``), one per line under the frame."""
    variables = frame.variables if isinstance(frame, PythonFrame) else None
    return ["               %s = %s%s" % (v["name"], v["repr"], "  (argument)" if v.get("arg") else "")
            for v in variables or []]


def _levels(frames: List[Frame]) -> List[int]:
    """Each frame's depth in the thread's stack, counting the frames an elided entry stands for."""
    out, level = [], 0
    for f in frames:
        out.append(level)
        level += f.count if isinstance(f, ElidedFrame) else 1
    return out
