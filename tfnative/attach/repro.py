"""``--repro FILE`` (issue #45), for ``attach`` and ``core``, and ``watch --out``'s ``crash-N.repro.py``: the
driver's part (here, where ``cli`` and ``watch`` both reach it).  It asks the target's Python for the
crashing op's definition (a subprocess, bounded in time), has analysis make the call and rendering the script,
writes FILE (and ``FILE.npz``) by ``files.py``'s rules, then runs FILE in a fresh process and says in one line
whether it dies as the original did (``--no-repro-check`` skips that)."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, TextIO, Tuple, Union

from ..analysis import shapefnrepro
from ..analysis.reproducer import NoRepro, call_of, document_entry, model_of, model_of_op, snake, stop_op
from ..core.model import CrashSummary, Document, Event, Json, NativeFrame, PythonFrame
from ..core.tensorflow import spool
from ..files import is_stdout, open_output, write_output
from ..output import reprotext
from . import reprominimize
from .reprominimize import Bounds, Tried

OPDEF_TIMEOUT_S = 120.0  # importing TensorFlow on a busy machine
CHECK_TIMEOUT_S = 300.0
# Run with the target's Python: the op's definition (input arguments, attributes and their defaults) and the
# parameters of the function a script calls (tf.raw_ops.OP, or a custom op library's own).
_OPDEF = r"""
import inspect, json, sys
import tensorflow as tf
from tensorflow.python.framework import op_def_registry
op, lib = sys.argv[1], sys.argv[2]
fn, where = getattr(tf.raw_ops, op, None), "tf.raw_ops." + op
if lib:
    module = tf.load_op_library(lib)
    fn, where = getattr(module, sys.argv[3], None), "lib." + sys.argv[3]
d = op_def_registry.get(op)
if d is None or fn is None:
    print(json.dumps({"error": "TensorFlow has no op %s here" % op}))
    sys.exit(0)
def value(v):
    kind = v.WhichOneof("value")
    if kind == "list":
        for f in ("s", "i", "f", "b", "type", "shape"):
            if getattr(v.list, f):
                return {"list": [one(f, x) for x in getattr(v.list, f)]}
        return {"list": []}
    return one(kind, getattr(v, kind))
def one(kind, x):
    if kind == "s":
        return x.decode()
    if kind == "type":
        return tf.as_dtype(x).name
    if kind == "shape":
        return None if x.unknown_rank else [d.size for d in x.dim]
    return x
attrs = {}
for a in d.attr:
    attrs[a.name] = {"type": a.type}
    if a.HasField("default_value"):
        attrs[a.name]["default"] = value(a.default_value)
        if a.type == "shape":
            attrs[a.name]["default"] = {"shape": attrs[a.name]["default"]}
print(json.dumps({"inputs": [{"name": a.name, "number_attr": a.number_attr, "type_list_attr": a.type_list_attr,
                              "type_attr": a.type_attr, "type": tf.as_dtype(a.type).name if a.type else ""}
                             for a in d.input_arg], "attrs": attrs, "function": where,
                  "params": list(inspect.signature(fn).parameters)}))
"""


def _quiet_env() -> Dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONSTARTUP", None)
    return env


def _no_core() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# asked once a session (the --break-op stops of one type): the definition, or the line why there is none
_OPDEFS: Dict[Tuple[str, str, Optional[str]], Union[Json, NoRepro]] = {}


def opdef(python: str, op: str, library: Optional[str]) -> Json:
    """The op's definition as the target's TensorFlow has it (asked once per interpreter, op and library); raises
    NoRepro."""
    key = (python, op, library)
    if key not in _OPDEFS:
        try:
            _OPDEFS[key] = _ask_opdef(python, op, library)
        except NoRepro as exc:
            _OPDEFS[key] = exc
    found = _OPDEFS[key]
    if isinstance(found, NoRepro):
        raise NoRepro(str(found))
    return found


def _ask_opdef(python: str, op: str, library: Optional[str]) -> Json:
    with tempfile.TemporaryDirectory(prefix="tfnative-repro-") as tmp:
        try:
            proc = subprocess.run([python, "-c", _OPDEF, op, library or "", snake(op)], cwd=tmp, env=_quiet_env(),
                                  capture_output=True, text=True, timeout=OPDEF_TIMEOUT_S, preexec_fn=_no_core)
        except subprocess.TimeoutExpired:
            raise NoRepro("%s did not say op %s's definition in %.0f s" % (python, op, OPDEF_TIMEOUT_S)) from None
        except OSError as exc:
            raise NoRepro("cannot run %s: %s" % (python, exc.strerror)) from None
    try:
        found: Json = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise NoRepro("%s could not say op %s's definition: %s" % (python, op, last)) from None
    if "error" in found:
        raise NoRepro(found["error"])
    return found


def _fatal_line(stderr: str) -> Optional[str]:
    """TensorFlow's ``Check failed`` line on a script's stderr, in absl's log format (``F0000 00:00:17... 1200
    tensor_shape.cc:362] Check failed: ...``, TF 2.20 on) or TensorFlow's own (``2026-11-28 11:19:58.559630: F
    tensorflow/core/framework/tensor_shape.cc:357] Check failed: ...``, TF 2.16's); from its file on."""
    m = re.search(r"^(?:F\S* +[\d:.]+ +\d+|\d{4}-\d\d-\d\d [\d:.]+: F) (\S+:\d+\] Check failed: .*?)\s*$",
                  stderr, re.M)
    return m.group(1) if m else None


def _wrapper_op(stderr: str, op: str) -> Optional[str]:
    """The op the re-run died in, by faulthandler's Python stack: its innermost frame in a generated op wrapper
    (the ``gen_*_ops`` module's ``lrn_grad``, or its ``_eager_fallback``), or a custom op library's call (its
    wrapper is exec'd code: file ``<string>``)."""
    for m in re.finditer(r'File "(?:[^"]*/)?(gen_\w+\.py|[^"/]+)", line \d+ in (\w+)', stderr):
        name = m.group(2).removesuffix("_eager_fallback")
        if m.group(1).startswith("gen_") or name == snake(op):
            return op if name == snake(op) else name
    return None


def _run_alone(python: str, args: List[str], cwd: str, timeout: float,
               env: Optional[Dict[str, str]] = None) -> Optional[subprocess.CompletedProcess[str]]:
    """``python -X faulthandler ARGS`` in ``cwd``, a fresh process with no core and TensorFlow's log quiet (but
    ``env``), its output captured; None where it still ran after ``timeout`` seconds (it is killed)."""
    try:
        return subprocess.run([python, "-X", "faulthandler", *args], cwd=cwd, env=_quiet_env() | (env or {}),
                              capture_output=True, text=True, timeout=timeout, preexec_fn=_no_core, errors="replace")
    except subprocess.TimeoutExpired:
        return None


def check(python: str, path: str, original: CrashSummary, op: str, timeout: float = CHECK_TIMEOUT_S) -> Json:
    """Run the script at ``path`` in a fresh process (``python -X faulthandler``, a fresh temporary directory,
    no core, at most ``timeout`` seconds) and compare: the signal, the op, TensorFlow's ``Check failed`` line."""
    want_log = original.log or ""
    timeout = min(timeout, CHECK_TIMEOUT_S)
    with tempfile.TemporaryDirectory(prefix="tfnative-repro-") as tmp:
        proc = _run_alone(python, [os.path.abspath(path)], tmp, timeout, {"TF_CPP_MIN_LOG_LEVEL": "0"})
    if proc is None:
        return {"outcome": "different", "differs": "it still ran after %.0f s" % timeout}
    died = signal.Signals(-proc.returncode).name if proc.returncode < 0 else None
    log = _fatal_line(proc.stderr)
    out: Json = {"signal": died, "op": _wrapper_op(proc.stderr, op), "log": log}
    if died is None:
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        what = "raised %s" % last[:300] if proc.returncode and last else "exited %d" % proc.returncode
        out["differs"] = "it %s; the original died of %s in op %s" % (what, original.signal, op)
    elif died != original.signal:
        out["differs"] = "it dies of %s, the original of %s" % (died, original.signal)
    elif out["op"] != op:
        out["differs"] = "it dies of %s in %s, not in op %s" % (died, out["op"] or "no op's wrapper", op)
    elif want_log and not (log and want_log.endswith(log)):
        out["differs"] = "it dies of %s in op %s with %s, the original with %s" % (died, op, log or "no Check "
                                                                                 "failed line", want_log)
    out["outcome"] = "different" if "differs" in out else "same"
    return {k: v for k, v in out.items() if v is not None}


def make(doc: Document, path: str, python: str, run_check: bool, err: TextIO,
         minimize: Optional[Bounds] = None) -> None:
    """Write the reproducer of ``doc``'s crash to ``path``, check it, say so on ``err``; the triage gains its
    ``reproducer``.  A crash that gives none is one line (``tfnative: repro: not written: ...``).  ``minimize``
    (``--repro-minimize``, with the check): then shrink its inputs within those bounds
    (``attach/reprominimize.py``) and write the smallest script that still dies the same way."""
    try:
        if shapefnrepro.in_shape_fn(doc):  # a crash in the op's shape function: a script that traces the op
            model = shapefnrepro.model_of(doc)
            call = shapefnrepro.call_of_shape_fn(model, opdef(python, model["op"], model.get("library")))
        else:
            model = model_of(doc)
            call = call_of(model, opdef(python, model["op"], model.get("library")))
    except NoRepro as exc:
        err.write("tfnative: repro: not written: %s\n" % exc)
        _drop_long_values(doc)
        return
    stdout = is_stdout(path)
    name = "stdout" if stdout else os.path.basename(path)
    text, data = _write(call, path, name, stdout)
    triage = doc.triage
    assert isinstance(triage, CrashSummary)
    outcome: Json = {"outcome": "skipped"}
    tried = None
    if run_check and not stdout:
        began = time.monotonic()
        outcome = check(python, path, triage, call["op"])
        if minimize is not None:
            tried = _minimized(python, (call, outcome, time.monotonic() - began), triage, minimize, err)
            if tried is not None and tried.call is not call:
                call, outcome = tried.call, tried.check
                if data is not None:
                    os.unlink(data)  # the smaller script's data file, if it has one, is written anew
                text, data = _write(call, path, name, stdout)
    err.write(reprotext.check_line(name, reprotext.code_lines(text), outcome) + "\n")
    triage.reproducer = document_entry(call, path, data, outcome)
    if tried is not None:
        triage.reproducer["minimized"] = tried.to_json()
    _drop_long_values(doc)


def numbered(path: str, n: int) -> str:
    """The ``n``-th script of a session that writes several (one per ``--break-op`` stop, then a crash's): FILE
    for the first, then FILE with ``.2``, ``.3``... before its suffix (``repro.py``, ``repro.2.py``; ``out``,
    ``out.2``); ``-`` stays stdout."""
    if n <= 1 or is_stdout(path):
        return path
    head, tail = os.path.split(path)
    stem, dot, suffix = tail.rpartition(".")
    if not stem:  # no suffix (or a name that begins with its only dot)
        return os.path.join(head, "%s.%d" % (tail, n))
    return os.path.join(head, "%s.%d%s%s" % (stem, n, dot, suffix))


# Runs a --break-op stop's script as ``python FILE`` would (runpy, ``__main__``), then writes what it did to the
# file given: its outputs' dtypes and shapes (the script keeps them in ``result``), or the exception it raised.
_RUN_STOP = r"""
import json, runpy, sys
path, said = sys.argv[1], sys.argv[2]
try:
    g = runpy.run_path(path, run_name="__main__")
except Exception as exc:
    first = (str(exc).strip().splitlines() or [""])[0]
    out = {"outcome": "raised", "error": ("%s: %s" % (type(exc).__name__, first))[:300]}
else:
    def flat(v):
        if v is None:
            return []
        if isinstance(v, (list, tuple)):
            return [t for x in v for t in flat(x)]
        return [{"dtype": v.dtype.name, "shape": [d if d is not None else -1 for d in v.shape.as_list()]}]
    out = {"outcome": "returned", "outputs": flat(g.get("result"))}
with open(said, "w") as f:
    json.dump(out, f)
"""


def check_stop(python: str, path: str, timeout: float = CHECK_TIMEOUT_S) -> Json:
    """Run a ``--break-op`` stop's script at ``path`` in a fresh process (``python -X faulthandler``, a fresh
    temporary directory, no core, at most ``timeout`` seconds): ``{"outcome": "returned", "outputs": [{"dtype",
    "shape"}...]}``, ``{"outcome": "raised", "error": "InvalidArgumentError: ..."}`` (TensorFlow's error, its
    first line), ``{"outcome": "died", "signal"}`` or ``{"outcome": "timeout", "error"}``."""
    with tempfile.TemporaryDirectory(prefix="tfnative-repro-") as tmp:
        said = os.path.join(tmp, "said.json")
        proc = _run_alone(python, ["-c", _RUN_STOP, os.path.abspath(path), said], tmp, timeout)
        if proc is None:
            return {"outcome": "timeout", "error": "it still ran after %.0f s" % timeout}
        if proc.returncode < 0:
            return {"outcome": "died", "signal": signal.Signals(-proc.returncode).name}
        try:
            with open(said) as f:
                found: Json = json.load(f)
            return found
        except (OSError, ValueError):
            last = (proc.stderr.strip().splitlines() or ["exit status %d" % proc.returncode])[-1]
            return {"outcome": "raised", "error": last[:300]}


def make_stop(event: Event, path_of: Callable[[], str], python: str, run_check: bool, err: TextIO, hit: int
              ) -> bool:
    """``--break-op`` with ``--repro``: write the script of the op the stop ``event`` is at, on the inputs its
    kernel got there (the crash path's readers and rules: ``model_of_op``, ``call_of``), to ``path_of()`` (asked
    once the script is known: a stop that gives none takes no name); run it alone unless ``run_check`` is off;
    say so in one line on ``err``; the event gains its ``reproducer``.  False, with one line, where none is
    written."""
    found = stop_op(event)
    try:
        if found is None:
            raise NoRepro("no kernel frame on the thread that stopped")
        model = model_of_op(found[0], found[1])
        call = call_of(model, opdef(python, model["op"], model.get("library")))
    except NoRepro as exc:
        err.write("tfnative: repro: hit %d: not written: %s\n" % (hit, exc))
        _drop_event_values(event)
        return False
    path = path_of()
    stdout = is_stdout(path)
    name = "stdout" if stdout else os.path.basename(path)
    text, data = _write(call, path, name, stdout, stop=True)
    outcome = check_stop(python, path) if run_check and not stdout else {"outcome": "skipped"}
    err.write(reprotext.stop_check_line(name, reprotext.code_lines(text), call["op"], hit, outcome) + "\n")
    event.reproducer = document_entry(call, path, data, outcome)
    _drop_event_values(event)
    return True


def _write(call: Json, path: str, name: str, stdout: bool, stop: bool = False) -> Tuple[str, Optional[str]]:
    """Write ``call``'s script to ``path`` (and its data file beside it): (the text, the data file's path)."""
    text, big = reprotext.script(call, None if stdout else name + ".npz", stop)
    write_output(path, text.encode())
    if not big:
        return text, None
    with open_output(path + ".npz") as f:  # an input copied to a spool file is written a chunk at a time
        reprotext.write_npz(f, big)
    return text, path + ".npz"


def _minimized(python: str, first: Tuple[Json, Json, float], triage: CrashSummary, bounds: Bounds,
               err: TextIO) -> Optional[Tried]:
    """``--repro-minimize``: what the minimization did (None where the script does not die as the original did:
    nothing to keep); ``first``: the call, its check and the seconds that took.  One line says how it went."""
    call, outcome, seconds = first
    if call.get("shape_fn"):
        err.write("tfnative: repro: not minimized: a shape function's script has shapes, no values to shrink\n")
        return None
    if outcome.get("outcome") != "same":
        err.write("tfnative: repro: not minimized: the script does not crash as the original did\n")
        return None
    tried = reprominimize.minimize(call, outcome, seconds, bounds,
                                   lambda path, left: check(python, path, triage, call["op"], timeout=left))
    err.write(reprotext.minimized_line(tried.to_json()) + "\n")
    return tried


def _drop_long_values(doc: Document) -> None:
    """The values read whole for the data file stay out of the document: it carries those of small inputs.  The
    copies of larger ones (``core/tensorflow/spool.py``) go too."""
    lists: List[Any] = [doc.triage.op.inputs if isinstance(doc.triage, CrashSummary) and doc.triage.op else None]
    for event in doc.events:
        _drop_event_values(event, lists)
    _drop(lists)


def _drop_event_values(event: Event, lists: Optional[List[Any]] = None) -> None:
    """``_drop_long_values`` of one event (a ``--break-op`` stop's, once its script is written: the next stop's
    inputs are read while it is held); with ``lists``, its inputs are added there instead, for the caller."""
    mine: List[Any] = []
    for thread in event.threads:
        mine += [f.op.inputs for f in thread.frames if isinstance(f, NativeFrame) and f.op is not None]
        mine += [f.op_args.get("inputs") for f in thread.frames + (thread.python_frames or [])
                 if isinstance(f, PythonFrame) and f.op_args]  # a generated op wrapper's (no kernel frame)
    if lists is not None:
        lists += mine
        return
    _drop(mine)


def _drop(lists: List[Any]) -> None:
    for inputs in lists:
        # a variable's value, read for the script (core/tensorflow/resources.py), is an entry too
        variables = [(e.get("resource") or {}).get("variable") for e in inputs or []]
        for entry in list(inputs or []) + [v for v in variables if v is not None]:
            spool.release(entry)
            if len(entry.get("values") or ()) > reprotext.INLINE_MAX:
                del entry["values"]


def hint(doc: Document, command: Optional[str] = None) -> Optional[str]:
    """Without ``--repro``: the one line that says how to get the script, where the crash gives one (its op's
    inputs and attributes were read); ``command``: the command line that would (a core's), else attach's
    ``rerun``."""
    try:
        # a crash report reads the values of small inputs alone
        (shapefnrepro.model_of if shapefnrepro.in_shape_fn(doc) else model_of)(doc, whole=False)
    except NoRepro:
        return None
    if command is not None:
        return "tfnative: for a standalone script that crashes the same way: %s --repro FILE" % command
    return "tfnative: rerun with --repro FILE for a standalone script that crashes the same way"


def python_of(doc: Document, given: Optional[str]) -> str:
    """The interpreter that runs the reproducer: the target's as it was started (its argv[0], an absolute path:
    a virtual environment's ``bin/python`` keeps its packages, where the file it links to does not), else the one
    given (a core's executable), else ours."""
    first = doc.argv[0] if doc.argv else ""
    if os.path.isabs(first) and os.access(first, os.X_OK):
        return first
    return given or sys.executable
