"""Loaded into the script's Python by ``tfnative attach --check-numerics`` (and nothing else).

tfnative puts this directory first on ``PYTHONPATH``; Python imports
``sitecustomize`` at startup.  This module

1. takes its directory back out of ``sys.path`` and ``PYTHONPATH`` (child
   processes of the script see the user's environment) and runs the
   ``sitecustomize`` it shadows, if there is one;
2. when the script imports TensorFlow, turns on
   ``tf.debugging.enable_check_numerics()`` and remembers, for every op it
   instruments inside a graph, the op's type, node name and the stack where
   it was created;
3. when a NaN/Inf error is made (``InvalidArgumentError`` with TensorFlow's
   "Detected Infinity or NaN" text), sends its own thread the signal
   ``TFNATIVE_NUMERICS_SIGNAL``.  gdb stops the thread there and swallows the
   signal (the process ignores it anyway, should gdb be gone); tfnative reads
   the op from the locals of ``_tfnative_numerics_stop``, then lets the error
   go on as it would without tfnative.  An error built while that one is
   being handled (Keras rebuilds it with more context) is the same failure:
   no second stop;
5. with ``TFNATIVE_OP_ORIGINS`` (``--op-origins``), appends to that file one
   JSON line per op traced into a graph: the graph, the node name, the op
   type and the Python stack that created it (nothing else changes);
4. leaves functions that XLA compiles (``jit_compile=True``) as they are: XLA
   has no kernel for the check ops, so instrumenting them would break the
   script.  It says once, on stderr, which functions were left out.  When a
   later eager op trips on a NaN/Inf it only handed on (it was in its inputs,
   or the op passes a value through, as ``OptionalGetValue`` does), the stop
   names those functions (``xla_functions``); with ``TFNATIVE_NUMERICS_NO_XLA``
   (``--numerics-no-xla``) such functions run without XLA and are checked;
6. adds its own directory to TensorFlow's and Keras's traceback filters when
   it stops the script, so that the user's traceback shows none of its frames.
"""

import importlib.machinery
import importlib.util
import os
import re
import signal
import sys
import threading
import traceback
import weakref
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, Dict, List, Optional, Set, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))
_SIGNAL = int(os.environ.pop("TFNATIVE_NUMERICS_SIGNAL", "0") or 0)
_ORIGINS = os.environ.pop("TFNATIVE_OP_ORIGINS", "")
_NO_XLA = os.environ.pop("TFNATIVE_NUMERICS_NO_XLA", "") == "1"
# A frame of a creation stack: (file, line, function); the line None where Python knows none.
StackRow = Tuple[str, Optional[int], str]
# instrumented graph op: error message -> (type, node name, creation stack)
_OPS: Dict[str, Tuple[str, str, List[StackRow]]] = {}
_XLA_SKIPPED: Set[str] = set()  # names of the XLA-compiled functions left uninstrumented
# The last eager op's check: (its error message, op type, weak references to its inputs); looked at only when
# that check fails, so that no op pays more than the references.
_LAST_EAGER: List[Any] = []
# Ops that hand on a value they were given (an Optional's, an iterator's): a NaN/Inf in their output came in.
_PASS_THROUGH = frozenset(("OptionalGetValue", "Identity", "IdentityN", "IteratorGetNext", "Snapshot"))
_NAN_RE = re.compile(r'Detected Infinity or NaN in output \d+ of (?:graph|eagerly-executing) op "([^"]+)"')


def _restore_path() -> None:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    saved = os.environ.pop("TFNATIVE_SAVED_PYTHONPATH", None)
    if saved is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = saved


def _chain() -> None:
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None and spec.origin != __file__:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _tfnative_numerics_stop(op_type: str, op_name: str, created_at: str,
                            xla_functions: str) -> Tuple[str, str, str, str]:
    """gdb stops this thread here; tfnative reads the four locals."""
    signal.pthread_kill(threading.get_ident(), _SIGNAL)
    return op_type, op_name, created_at, xla_functions


def _stack_text(frames: List[StackRow]) -> str:
    """One "file<TAB>line<TAB>function" row per frame; a frame without a line gets an empty line column
    (``report`` skips such rows)."""
    return "\n".join("%s\t%s\t%s" % (f, "" if line is None else "%d" % line, fn) for f, line, fn in frames)


def _reported(error: Optional[BaseException]) -> bool:
    """Whether ``error`` or an error it was raised from or during has stopped the script already."""
    seen = 0
    while error is not None and seen < 32:
        if getattr(error, "_tfnative_reported", False):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


def _on_error(message: str) -> bool:
    """Stop the script for a NaN/Inf error; whether it was one."""
    m = _NAN_RE.search(message or "")
    if m is None:
        return False
    op_type, op_name, created = m.group(1), m.group(1), None
    for text, info in list(_OPS.items()):
        if text in message:
            op_type, op_name, created = info
            break
    if created is None:  # an eager op is created where it runs (this module's own frames left out)
        created = [(f.filename, f.lineno, f.name) for f in traceback.extract_stack()
                   if os.path.abspath(f.filename) != os.path.abspath(__file__)]
    # a NaN/Inf handed on by an op that did not make it, while functions compiled by XLA ran unchecked
    from_xla = None
    if _XLA_SKIPPED and _LAST_EAGER and _LAST_EAGER[0] in message:
        try:
            if _passed_in(_LAST_EAGER[1], [ref() for ref in _LAST_EAGER[2]]):
                from_xla = _XLA_SKIPPED
        except Exception:  # noqa: BLE001 - never change what the script sees
            pass
    _hide_from_tracebacks()
    _tfnative_numerics_stop(op_type, op_name, _stack_text(created), ",".join(sorted(from_xla or ())))
    return True


def _hide_from_tracebacks() -> None:
    """This module's frames (the callback it wraps) are left out of the tracebacks that TensorFlow's and
    Keras's traceback filters give the user, as those libraries leave out their own."""
    for name in ("tensorflow.python.util.traceback_utils", "keras.src.utils.traceback_utils"):
        module = sys.modules.get(name)
        paths = getattr(module, "_EXCLUDED_PATHS", None)
        if module is not None and isinstance(paths, tuple) and _HERE not in paths:
            setattr(module, "_EXCLUDED_PATHS", paths + (_HERE,))  # noqa: B010 - another library's module


def _enable(tf: ModuleType) -> None:
    if _ORIGINS:
        _record_origins(_ORIGINS)
    if _SIGNAL:
        _enable_numerics(tf)


def _record_origins(path: str) -> None:
    """Append (graph, node, type, creation stack) of every op traced into a graph to ``path``."""
    import json

    from tensorflow.python.framework import op_callbacks
    from tensorflow.python.util import tf_stack  # maps AutoGraph's generated code back to the user's

    out = open(path, "a", buffering=1)  # noqa: SIM115 - kept open for the process's life
    here = os.path.abspath(__file__)

    def origin(op_type: Any, inputs: Any, attrs: Any, outputs: Any, op_name: Any = None, graph: Any = None) -> None:
        if graph is None:
            return None
        try:
            stack = [[f.filename, f.lineno, f.name] for f in tf_stack.extract_stack()
                     if os.path.abspath(f.filename) != here]
            name = op_name.decode() if isinstance(op_name, bytes) else str(op_name)
            kind = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
            out.write(json.dumps({"graph": getattr(graph, "name", None), "node": name, "type": kind,
                                  "stack": stack}) + "\n")
        except Exception:  # noqa: BLE001 - never change what the script sees
            pass
        return None

    op_callbacks.add_op_callback(origin)


def _enable_numerics(tf: ModuleType) -> None:
    from tensorflow.python.debug.lib import check_numerics_callback as cnc
    from tensorflow.python.framework import errors_impl

    make_message = cnc.get_check_numerics_error_message

    def message(*args: Any, **kwargs: Any) -> str:
        text: str = make_message(*args, **kwargs)
        graph, stack = kwargs.get("graph"), kwargs.get("traceback")
        if graph is None and len(args) >= 5 and _XLA_SKIPPED:
            try:
                _LAST_EAGER[:] = [text.strip(), str(args[2]), [weakref.ref(v) for v in args[4] or ()]]
            except TypeError:  # an input that takes no weak reference
                _LAST_EAGER[:] = []
        if graph is not None and len(args) >= 4:
            try:
                name = args[3].op.name
            except AttributeError:
                name = str(args[2])
            frames = [(f[0], f[1], f[2]) for f in (stack or [])]
            _OPS[text.strip()] = (str(args[2]), name, frames)
        return text

    cnc.get_check_numerics_error_message = message
    init = errors_impl.InvalidArgumentError.__init__

    def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        try:
            if _reported(sys.exc_info()[1]):
                self._tfnative_reported = True  # rebuilt while the first is handled: the same failure
            elif _on_error(self.message):
                self._tfnative_reported = True
        except Exception:  # noqa: BLE001 - never change what the script sees
            pass

    errors_impl.InvalidArgumentError.__init__ = checked_init
    if _NO_XLA:
        _run_without_xla()
    _skip_xla(cnc)
    tf.debugging.enable_check_numerics()


def _passed_in(op_type: str, inputs: Any) -> bool:
    """Whether an eager op's NaN/Inf was in its inputs already: a floating input that is not all finite, or
    an op that only hands on what it was given (an Optional's value)."""
    if op_type in _PASS_THROUGH:
        return True
    import numpy as np

    for value in inputs:
        dtype = getattr(value, "dtype", None)
        if dtype is not None and getattr(dtype, "is_floating", False) and not np.isfinite(value.numpy()).all():
            return True
    return False


def _run_without_xla() -> None:
    """``--numerics-no-xla``: every ``tf.function`` made with ``jit_compile=True`` runs without XLA, so that
    its ops are instrumented too; said once per function on stderr."""
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    init = polymorphic_function.Function.__init__

    def without_xla(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if getattr(self, "_jit_compile", None):
            self._jit_compile = None
            os.write(2, ("tfnative: --numerics-no-xla: %s runs without XLA (jit_compile=True left out), its ops "
                         "checked\n" % getattr(self, "_name", "?")).encode())

    polymorphic_function.Function.__init__ = without_xla


_XLA_FUNCTIONS: Dict[str, bool] = {}  # function name -> compiled by XLA


def _xla_function(name: str) -> bool:
    """Whether the eager context's function ``name`` carries ``_XlaMustCompile`` (``jit_compile=True``)."""
    if name not in _XLA_FUNCTIONS:
        from tensorflow.python.eager import context

        fdef = context.context().get_function_def(name)
        attr = fdef.attr.get("_XlaMustCompile")
        _XLA_FUNCTIONS[name] = bool(attr is not None and attr.b)
    return _XLA_FUNCTIONS[name]


def _skip_xla(cnc: ModuleType) -> None:
    """Functions compiled by XLA get no check ops (XLA has no kernel for them): say once which."""
    from tensorflow.python.ops import control_flow_util

    callback = cnc.CheckNumericsCallback.callback

    def outside_xla(self: Any, op_type: Any, inputs: Any, attrs: Any, outputs: Any, op_name: Any = None,
                    graph: Any = None) -> Any:
        try:
            if graph is not None:  # an op traced into a function: is the function compiled by XLA?
                compiled = control_flow_util.GraphOrParentsInXlaContext(graph)
                name = getattr(graph, "name", "?")
            else:  # an eager op: the call of a function compiled by XLA, whose outputs are its own
                function = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
                compiled = function.startswith("__inference_") and _xla_function(function)
                name = re.sub(r"^__inference_(.*)_\d+$", r"\1", function)  # the Python function's name
        except Exception:  # noqa: BLE001 - when in doubt, instrument as TensorFlow would
            compiled = False
        if not compiled:
            return callback(self, op_type, inputs, attrs, outputs, op_name=op_name, graph=graph)
        if name not in _XLA_SKIPPED:
            _XLA_SKIPPED.add(name)
            os.write(2, ("tfnative: --check-numerics: %s is compiled by XLA (jit_compile=True): not "
                         "instrumented\n" % name).encode())
        return None

    cnc.CheckNumericsCallback.callback = outside_xla


class _TensorFlowHook:
    """Runs ``_enable`` right after ``import tensorflow`` completes."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Optional[ModuleSpec]:
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def run(module: ModuleType) -> None:
            exec_module(module)
            _enable(module)

        setattr(spec.loader, "exec_module", run)  # noqa: B010 - a method replaced on this loader alone
        return spec


_restore_path()
if _SIGNAL:
    signal.signal(_SIGNAL, signal.SIG_IGN)
if _SIGNAL or _ORIGINS:
    sys.meta_path.insert(0, _TensorFlowHook())
_chain()
