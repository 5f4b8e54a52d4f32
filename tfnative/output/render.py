"""Text form of mixed stacks, and the frame filters it applies (pure).

Shared by gdb's ``tf-bt`` and the ``tfnative`` CLI so that both print the
same thing.  Frames are dicts of the JSON schema (see README).
"""

import re
from typing import Dict, Iterable, List, Optional

from .elide import ELIDED, elided_text

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

_SYSTEM_PARTS = ("/site-packages/", "/dist-packages/")
_STDLIB_RE = re.compile(r"/lib(64)?/python3\.\d+/")


def is_glue(frame: Dict) -> bool:
    if frame.get("kind") != "native":
        return False
    name = frame.get("function") or ""
    base = name.split("(", 1)[0]
    return base in GLUE_EXACT or base.startswith(GLUE_PREFIXES)


def hide_glue(frames: Iterable[Dict]) -> List[Dict]:
    return [f for f in frames if not is_glue(f)]


def is_user_frame(frame: Dict) -> bool:
    """A Python frame of the user's own code: not the stdlib, not an installed package."""
    if frame.get("kind") != "python":
        return False
    path = frame.get("file") or ""
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


def frame_class(frame: Dict) -> str:
    """user, tensorflow-python, tensorflow-native, interpreter or system."""
    if frame.get("kind") == "python":
        if is_user_frame(frame):
            return "user"
        path = frame.get("file") or ""
        if "/tensorflow/" in path or "/keras/" in path or "/tf_keras/" in path:
            return "tensorflow-python"
        return "system"
    lib = frame.get("library") or ""
    name = frame.get("function") or ""
    if _TF_LIB_RE.match(lib):
        return "tensorflow-native"
    if _INTERPRETER_LIB_RE.match(lib):
        return "interpreter"
    if name.startswith(_TF_NATIVE_NAMES) and lib.endswith(".so") and "tensorflow" in lib:
        return "tensorflow-native"
    return "system"


_LANDMARK_RE = re.compile(r"^(TFE?_\w+$|.*::Compute(Async)?\()")


def is_landmark(frame: Dict) -> bool:
    """Frames never folded: TensorFlow's C API entry points and kernel/device Compute calls."""
    return frame.get("kind") == "native" and bool(_LANDMARK_RE.match(frame.get("function") or ""))


def fold_plan(frames: List[Dict], keep_head: int = 2, keep_tail: int = 2, min_run: int = 8) -> List:
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


def frame_line(index: int, f: Dict, name_width: int = 160, verbose: bool = False) -> str:
    if f.get("kind") == ELIDED:
        return "       %s" % elided_text(f)
    if f.get("kind") == "python":
        where = "%s:%s" % (f.get("file") or "?", f.get("line") if f.get("line") is not None else "?")
        mark = "  <-- your code" if f.get("user") or is_user_frame(f) else ""
        conv = f.get("converted")
        if conv:
            mark += "  [AutoGraph" + (": ran as %s at %s:%s]" % (conv.get("function"), conv.get("file"),
                                                                conv.get("line")) if verbose else "]")
        return "#%-3d [py] %s at %s%s" % (index, _short(f.get("function") or "?", name_width), where, mark)
    text = "#%-3d      %s" % (index, _short(f.get("function") or "??", name_width))
    if f.get("file"):
        text += " at %s:%s" % (f["file"], f.get("line"))
    text += " in %s" % (f.get("library") or "??")
    text += " [%s]" % f.get("address", "?")
    if f.get("recovered"):
        text += " (recovered by %s: no CFI below)" % f["recovered"]
    if f.get("op"):
        text += "  <-- op %s" % op_label(f["op"])
    if f.get("file") and f.get("source"):
        text += "\n           | %s" % f["source"].strip()  # under the frame's line, not inside it
    return text


def op_label(op: Dict) -> str:
    """``MatMul "model/dense/MatMul"``: an op's type and node name."""
    label = op.get("type") or "?"
    if op.get("name") and op["name"] != label:
        label += ' "%s"' % op["name"]
    return label


def thread_block(thread: Dict, header: Optional[str] = None, fold: bool = True) -> List[str]:
    lines = []
    title = header or 'Thread %s "%s"' % (thread.get("tid"), thread.get("name") or "")
    lines.append(title)
    frames = thread.get("frames") or []
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
    if thread.get("merge") == "mismatch":
        lines.append("  !! Python and native stacks could not be matched (%s); the Python stack alone:"
                     % thread.get("merge_detail", ""))
        python = thread.get("python_frames") or []
        for level, f in zip(_levels(python), python):
            lines.append("  " + frame_line(level, f))
    if thread.get("error"):
        lines.append("  !! %s" % thread["error"])
    return lines


def variable_lines(frame: Dict) -> List[str]:
    """A Python frame's arguments and locals (``--locals``), one per line under the frame."""
    return ["               %s = %s%s" % (v["name"], v["repr"], "  (argument)" if v.get("arg") else "")
            for v in frame.get("variables") or []]


def _levels(frames: List[Dict]) -> List[int]:
    """Each frame's depth in the thread's stack, counting the frames an elided entry stands for."""
    out, level = [], 0
    for f in frames:
        out.append(level)
        level += f.get("count", 1) if f.get("kind") == ELIDED else 1
    return out
