"""A reproducer's text (issue #45, ``--repro FILE``): the script of the call ``analysis/reproducer.call_of`` made,
its inputs as exact literals (``tf.zeros``/``tf.ones`` where every value is that; others of more than
``INLINE_MAX`` elements in ``FILE.npz``, whose bytes are made here too; a variable's handle as ``tf.Variable(...)``
of its value, passed as ``.handle``), and the lines that say how its check and
its minimization went."""

from __future__ import annotations

import io
import math
import struct
import zipfile
from typing import Any, BinaryIO, Dict, List, Optional, Tuple

from ..core.model import Json

INLINE_MAX = 64
# numpy's dtype descriptors (.npy format 1.0) and struct formats
_NPY = {"float16": ("<f2", "e"), "float32": ("<f4", "f"), "float64": ("<f8", "d"), "int8": ("|i1", "b"),
        "int16": ("<i2", "h"), "int32": ("<i4", "i"), "int64": ("<i8", "q"), "uint8": ("|u1", "B"),
        "uint16": ("<u2", "H"), "uint32": ("<u4", "I"), "uint64": ("<u8", "Q"), "bool": ("|b1", "?")}


def _number(value: Any) -> str:
    if isinstance(value, str):  # "nan", "inf", "-inf": JSON's spelling of a float it cannot carry
        return 'float("%s")' % value
    if isinstance(value, float) and not math.isfinite(value):
        return 'float("%r")' % value
    return repr(value)


def _attr(value: Any, kind: str) -> str:
    """An attribute's value in Python; ``kind`` is its OpDef type (``type``, ``list(int)``...)."""
    if isinstance(value, dict) and "list" in value:
        return "[%s]" % ", ".join(_attr(v, kind[5:-1]) for v in value["list"])
    if isinstance(value, dict) and "shape" in value:
        return repr(value["shape"])
    if kind == "type":
        return "tf.%s" % value
    if isinstance(value, str) and kind != "float":  # a float's "nan" is JSON's spelling; a string is itself
        return repr(value)
    return _number(value)


def _uniform(entry: Json) -> Optional[str]:
    """``zeros`` or ``ones`` where every value of a tensor of more than one element is exactly that (a float's
    0.0, not -0.0; a bool's False), else None."""
    values = entry["values"]
    if len(values) < 2:
        return None
    by_bytes = getattr(values, "uniform", None)  # a spool.Raw: by its bytes, a chunk at a time
    if by_bytes is not None:
        named: Optional[str] = by_bytes()
        return named
    kind = bool if entry["dtype"] == "bool" else float if entry["dtype"].startswith("float") else int
    for name, fill in (("zeros", 0), ("ones", 1)):
        if all(type(v) is kind and v == fill and math.copysign(1.0, v) > 0 for v in values):
            return name
    return None


def _literal(entry: Json) -> str:
    values, shape = entry["values"], entry["shape"]
    uniform = _uniform(entry)
    if uniform:
        return "tf.%s(%r, dtype=tf.%s)" % (uniform, shape, entry["dtype"])
    if not shape:
        return "tf.constant(%s, dtype=tf.%s)" % (_number(values[0]), entry["dtype"])
    return "tf.constant([%s], shape=%r, dtype=tf.%s)" % (", ".join(_number(v) for v in values), shape,
                                                          entry["dtype"])


def script(call: Json, data_name: Optional[str], stop: bool = False) -> Tuple[str, Dict[str, Json]]:
    """(the script's text, the inputs that go to the data file by their array name).  ``data_name``: the data
    file's name (the script loads ``__file__ + ".npz"``), None where there may be none (FILE is ``-``): then
    every input is a literal.  ``stop``: a ``--break-op`` stop's script, which keeps the op's outputs in
    ``result`` and prints them (a crash's calls the op alone).  A crash in the op's shape function: the script
    that traces it (``traced_script``)."""
    if call.get("shape_fn"):
        return traced_script(call), {}
    lines: List[str] = []
    if call.get("onednn"):
        why = "the op ran in oneDNN's kernel" if stop else "the crash is in oneDNN's kernel"
        lines += ["import os", "", 'os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"  # %s' % why]
    lines.append("import tensorflow as tf")
    big: Dict[str, Json] = {}
    body: List[str] = []
    if call.get("library"):
        body.append("lib = tf.load_op_library(%r)" % call["library"])
    used: Dict[str, int] = {}
    named: List[str] = []
    for k, entry in enumerate(call["inputs"]):
        name = _name(call, k, used)
        named.append(name)
        if data_name is not None and len(entry["values"]) > INLINE_MAX and not _uniform(entry):
            big[name] = entry
            value = "tf.constant(data[%r])" % name
        else:
            value = _literal(entry)
        # a variable's handle: the variable is made with the value it had, and its handle passed
        body.append("%s = %s" % (name, "tf.Variable(%s)" % value if entry.get("variable") else value))
        if entry.get("variable"):
            named[-1] = name + ".handle"
    if big:
        lines += ["import numpy as np", "", 'data = np.load(__file__ + ".npz")  # %s, beside this script' % data_name]
    lines += [""] + body
    parts = []
    for arg, which in call["args"]:
        parts.append("%s=%s" % (arg, "[%s]" % ", ".join(named[i] for i in which) if isinstance(which, list)
                                else named[which]))
    parts += ["%s=%s" % (k, _attr(v, call["attr_types"].get(k, ""))) for k, v in sorted(call["call_attrs"].items())]
    lines.append("%s%s(%s)" % ("result = " if stop else "", call["function"], ", ".join(parts)))
    if stop:
        lines.append("print(result)")
    return "\n".join(lines) + "\n", big


def traced_script(call: Json) -> str:
    """The script of a crash in an op's shape function: a ``tf.function`` whose ``input_signature`` has the shapes
    the shape function saw (``None`` for an unknown dim, ``tf.TensorSpec(None, ...)`` for an unknown rank), its
    constant inputs as literals inside it, the op's call, and the function traced (``get_concrete_function``):
    the shape function runs on those shapes, no kernel runs."""
    lines = ["import tensorflow as tf", ""]
    if call.get("library"):
        lines += ["lib = tf.load_op_library(%r)" % call["library"], ""]
    used: Dict[str, int] = {}
    named = [_name(call, k, used) for k in range(len(call["inputs"]))]
    specs, params, body = [], [], []
    for name, entry in zip(named, call["inputs"]):
        if "values" in entry:  # a constant the shape function was given
            body.append("    %s = %s" % (name, _literal(entry)))
            continue
        shape = "None" if entry["shape"] is None else repr(entry["shape"])
        specs.append("tf.TensorSpec(%s, tf.%s)" % (shape, entry["dtype"]))
        params.append(name)
    parts = []
    for arg, which in call["args"]:
        parts.append("%s=%s" % (arg, "[%s]" % ", ".join(named[i] for i in which) if isinstance(which, list)
                                else named[which]))
    parts += ["%s=%s" % (k, _attr(v, call["attr_types"].get(k, ""))) for k, v in sorted(call["call_attrs"].items())]
    lines += ["", "@tf.function(input_signature=[%s])" % ", ".join(specs), "def traced(%s):" % ", ".join(params)]
    lines += body + ["    return %s(%s)" % (call["function"], ", ".join(parts)), "", ""]
    lines.append("traced.get_concrete_function()  # tracing runs %s's shape function on these shapes" % call["op"])
    return "\n".join(lines) + "\n"


def _name(call: Json, k: int, used: Dict[str, int]) -> str:
    """The variable of input ``k``: its argument's name (with its index in a list argument)."""
    for arg, which in call["args"]:
        if which == k:
            base = arg
            break
        if isinstance(which, list) and k in which:
            base = "%s_%d" % (arg, which.index(k))
            break
    else:
        base = "input_%d" % k
    if base in ("tf", "np", "os", "lib", "data", "result", "traced"):
        base += "_"
    used[base] = used.get(base, 0) + 1
    return base if used[base] == 1 else "%s_%d" % (base, used[base])


def _npy_head(entry: Json) -> bytes:
    descr = _NPY[entry["dtype"]][0]
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, tuple(entry["shape"]))
    pad = 64 - (10 + len(header) + 1) % 64
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) + pad + 1) + (header + " " * pad + "\n").encode()


def write_npz(f: BinaryIO, arrays: Dict[str, Json]) -> None:
    """An ``.npz`` (a zip of ``.npy`` files, format 1.0) of ``arrays`` on ``f``: each entry's exact values.  An
    input copied to a spool file (``core/tensorflow/spool.py``'s ``Raw``, whose ``chunks()`` gives its raw
    bytes) is written from it a chunk at a time."""
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, entry in arrays.items():
            values = entry["values"]
            chunks = getattr(values, "chunks", None)  # a spool.Raw: the raw bytes, a chunk at a time
            if chunks is not None:
                with z.open(name + ".npy", "w", force_zip64=True) as member:
                    member.write(_npy_head(entry))
                    for raw in chunks():
                        member.write(raw)
                continue
            fmt = _NPY[entry["dtype"]][1]
            values = [float(v) if isinstance(v, str) else v for v in values]
            z.writestr(name + ".npy", _npy_head(entry) + struct.pack("<%d%s" % (len(values), fmt), *values))


def npz(arrays: Dict[str, Json]) -> bytes:
    """``write_npz``'s bytes."""
    out = io.BytesIO()
    write_npz(out, arrays)
    return out.getvalue()


def code_lines(text: str) -> int:
    """The lines of a script that are code (not blank, not only a comment)."""
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def check_line(name: str, lines: int, check: Json) -> str:
    """``tfnative: repro: repro.py (9 lines) dies of SIGABRT in op LRNGrad, as the original did: Check failed:
    ...``, or what differs."""
    head = "tfnative: repro: %s (%d lines)" % (name, lines)
    if check.get("outcome") == "skipped":
        return "%s written; not run (--no-repro-check)" % head
    if check.get("outcome") == "same":
        tail = ": %s" % check["log"] if check.get("log") else ""
        return "%s dies of %s in op %s, as the original did%s" % (head, check["signal"], check["op"], tail)
    return "%s does not crash as the original did: %s" % (head, check.get("differs"))


def stop_check_line(name: str, lines: int, op: str, hit: int, check: Json) -> str:
    """``tfnative: repro: repro.py (5 lines) runs op MatMul on the inputs of hit 1; alone, it returned
    float32[2,2]``: what a ``--break-op`` stop's script did when run alone (it reproduces no crash)."""
    head = "tfnative: repro: %s (%d lines) runs op %s on the inputs of hit %d" % (name, lines, op, hit)
    outcome = check.get("outcome")
    if outcome == "skipped":
        return "%s; not run (--no-repro-check)" % head
    if outcome == "returned":
        outputs = check.get("outputs") or []
        said = ", ".join("%s[%s]" % (o["dtype"], ",".join(str(d) for d in o["shape"])) for o in outputs)
        return "%s; alone, it returned %s" % (head, said or "no output")
    if outcome == "died":
        return "%s; alone, it died of %s" % (head, check.get("signal"))
    if outcome == "timeout":
        return "%s; alone, %s" % (head, check.get("error"))
    return "%s; alone, it raised %s" % (head, check.get("error"))


def minimized_line(tried: Json) -> str:
    """``tfnative: repro: minimized in 7 tries, 31 s (3 kept): 12,197 -> 17 elements``, from the reproducer's
    ``minimized`` (``attach/reprominimize.Tried``); or that no smaller input died the same way."""
    took = "%d tr%s, %.0f s" % (tried["tries"], "y" if tried["tries"] == 1 else "ies", tried["seconds"])
    bound = {"tries": "; it stopped at the bound of tries (--repro-minimize-tries)",
             "time": "; it stopped at the bound of time (--repro-minimize-seconds)"}.get(tried.get("stopped", ""), "")
    if not tried["kept"]:
        return "tfnative: repro: not minimized: no smaller input died the same way (%s)%s" % (took, bound)
    before, after = tried["elements"]
    shrunk = "%s -> %s elements" % (format(before, ","), format(after, ",")) if after < before else \
        "%s elements, values made simpler" % format(after, ",")
    return "tfnative: repro: minimized in %s (%d kept): %s%s" % (took, tried["kept"], shrunk, bound)
