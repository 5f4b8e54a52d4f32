"""Which kind of frame a frame is (pure): the interpreter's call glue, the user's own code, TensorFlow's,
the interpreter's, the system's.  Facts about the model's frames that analysis computes with and that the
renderers show (``analysis/frames.py`` marks the frames with them; ``output/`` reads the marks)."""

import re
from functools import lru_cache
from typing import Callable, Iterable, List, Optional, Sequence

from .model import AnyFrame, EventNativeFrame, Frame, NativeFrame, PythonFrame

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
GCC_CLONE_RE = re.compile(r"(\.(lto_priv|constprop|isra|part|cold|localalias)(\.\d+)?)+$")


def is_glue(frame: Frame) -> bool:
    if not isinstance(frame, NativeFrame):
        return False
    return glue_name(frame.function or "")


@lru_cache(maxsize=1 << 16)  # a merge asks of the same few hundred names some 100,000 times
def glue_name(name: str) -> bool:
    """Whether a native function of this name is the interpreter's call glue."""
    base = GCC_CLONE_RE.sub("", name.split("(", 1)[0].split("@", 1)[0].strip())
    return base in GLUE_EXACT or (base.startswith(GLUE_PREFIXES) and base not in GLUE_NOT)


def hide_glue(frames: Iterable[AnyFrame]) -> List[AnyFrame]:
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


def may_hold_interpreter(name: str) -> bool:
    """Whether a file named ``name`` (a base name) may be the interpreter, whose symbols say where its runtime
    is: ``python3.11``, ``python3.14d``, ``libpython3.11.so.1.0`` (checked by the caller in the file itself)."""
    return re.match(r"(lib)?python\d", name) is not None


# C++'s standard library: its namespaces, and the directories of its headers (libstdc++'s include/c++/12/bits/,
# libc++'s include/c++/v1/).
_STD_NAMESPACES = ("std::", "__gnu_cxx::", "__cxxabiv1::", "__gnu_debug::", "__pstl::")
_STD_HEADER_RE = re.compile(r"/include/c\+\+/")


def is_standard_library(frame: NativeFrame) -> bool:
    """Code of C++'s standard library, wherever it was compiled: a template instantiated or inlined into the
    user's own library (``std::vector<float>::_M_range_check`` at ``stl_vector.h``) is still not the user's.
    Told by the function's own scope (a template function's return type, ``std::enable_if<...>::type``, is not
    its scope) or by its source file, a standard header."""
    if frame.file and _STD_HEADER_RE.search(frame.file):
        return True
    name = frame.function or ""
    if not name.startswith(_STD_NAMESPACES) and " std::" not in name:
        return False
    from .binary.cxxnames import split_demangled  # only for a name that may be the standard library's

    split = split_demangled(name)
    return (split[0] if split else name).startswith(_STD_NAMESPACES)


def native_class(frame: NativeFrame, by_library: Optional[str]) -> str:
    """A native frame's class: ``system`` for the standard library's code wherever it lies; else what its
    library's path says (``by_library``: ``library_class``'s answer, where it decides); else ``frame_class``."""
    if is_standard_library(frame):
        return "system"
    return by_library or frame_class(frame)


def frame_class(frame: Frame) -> str:
    """user, tensorflow-python, tensorflow-native, interpreter or system.

    A native frame already classed ``user`` (its library is the user's own: ``library_class``, which needs
    the library's path) stays so; otherwise a native frame is classed by its library's name."""
    if isinstance(frame, EventNativeFrame) and frame.frame_class == "user":
        return "user"
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


# Where a library that is nobody's own code lives: the system's directories, installed packages, TensorFlow's
# wheel.  A path that starts with one of SYSTEM_DIRS, or holds one of PACKAGE_PARTS, or lies under the
# interpreter's prefix.
SYSTEM_DIRS = ("/lib/", "/lib32/", "/lib64/", "/libx32/", "/usr/", "/snap/", "/nix/store/", "/gnu/store/",
               "/proc/", "/memfd:")
PACKAGE_PARTS = _SYSTEM_PARTS
_TF_WHEEL_RE = re.compile(r"/(site|dist)-packages/tensorflow/")
# PluggableDevice plugins, which TensorFlow loads itself at import (Intel's, Apple's): not the program's
_TF_PLUGINS_RE = re.compile(r"/(site|dist)-packages/tensorflow-plugins/")


def interpreter_prefixes(paths: Iterable[str]) -> List[str]:
    """The installation prefixes (``<prefix>/``) of the interpreter among library ``paths``: the directory
    above the ``bin/`` or ``lib/`` that holds ``python3.X`` or ``libpython3.X.so``; above ``lib/python3.X/``
    for its ``lib-dynload/`` modules."""
    out: List[str] = []
    for path in paths:
        head, name = path.rsplit("/", 1) if "/" in path else ("", path)
        prefix = None
        if INTERPRETER_LIB_RE.match(name) and head.endswith(("/bin", "/lib", "/lib64")):
            prefix = head.rsplit("/", 1)[0]
        elif "/lib-dynload/" in path:
            prefix = path.split("/lib-dynload/", 1)[0].rsplit("/", 2)[0]
        if prefix and prefix + "/" not in out and prefix.count("/") >= 2:  # never "/usr/" alone... nor "/"
            out.append(prefix + "/")
    return out


def library_class(path: Optional[str], links_tensorflow: Callable[[], bool],
                  prefixes: Sequence[str] = ()) -> Optional[str]:
    """The class of the frames of the library at ``path`` where its path decides it, else None (its name
    does: ``frame_class``).  The rule (docs/kernels.md, "Which frames are yours"):

    * TensorFlow's own libraries (by name, or anywhere under TensorFlow's wheel, ``.../site-packages/tensorflow/``)
      are ``tensorflow-native``;
    * the interpreter's (``python3.X``, ``libpython3.X``, ``lib-dynload/``) are not the user's, nor the
      PluggableDevice plugins TensorFlow loads itself (``site-packages/tensorflow-plugins/``);
    * an op library, one that links TensorFlow's framework library (``links_tensorflow()``, asked only
      here), is ``user``, wherever it lies: ``tf.load_op_library``'s library in the user's tree, or a
      custom-op package installed in site-packages;
    * any other library is ``user`` when it lies outside the system's directories (``SYSTEM_DIRS``),
      installed packages (``site-packages``, ``dist-packages``: numpy's, scipy's) and the interpreter's
      ``prefixes`` (a conda environment's ``lib/``): a ``ctypes.CDLL`` or an extension module of the
      user's own project.
    """
    if not path or not path.startswith("/"):
        return None
    name = path.rsplit("/", 1)[-1]
    if _TF_LIB_RE.match(name) or _TF_WHEEL_RE.search(path):
        return "tensorflow-native"
    if INTERPRETER_LIB_RE.match(name) or "/lib-dynload/" in path or _TF_PLUGINS_RE.search(path):
        return None
    elsewhere = path.startswith(SYSTEM_DIRS) or any(p in path for p in PACKAGE_PARTS) or any(
        path.startswith(p) for p in prefixes)
    if not elsewhere:
        return "user"
    if path.startswith(SYSTEM_DIRS[-2:]):
        return None
    return "user" if links_tensorflow() else None
