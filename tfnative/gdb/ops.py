"""TensorFlow ops in a native session: which op a kernel frame runs, and ``--break-op``.

**Op context.**  After a capture, the native frames that run an op (a
kernel's ``Compute``/``ComputeAsync``, the device's ``Compute`` that calls it)
get ``"op": {"type", "name", "kernel"}``, read by gdb from the ``OpKernel``
in the stopped process (``tfnative/core/opkernel.py``: memory reads only).

**Break by op.**  ``--break-op MatMul`` cannot be a breakpoint on a name: no
``MatMulOp`` class exists in TF 2.16+ (``BaseBatchMatMulOp<...>::Compute``
serves MatMul, and one class serves several op types and dtypes).  So:

1. the op type is checked against the op types of the TensorFlow the script
   will import (``gen_*_ops.py``), and a name that is not one gets the
   candidates it may mean;
2. a *dispatch* breakpoint on ``ThreadPoolDevice::Compute`` (through which
   the CPU device runs every kernel) stops the first time a kernel class runs
   an op of that type; gdb filters every other op without a round trip;
3. tfnative arms that class's ``Compute`` (found in the kernel's vtable) with
   a breakpoint that stops only when the kernel's op type is the one asked
   for, and resumes: the kernel breakpoint fires at once, for that op, and
   again for every later op of that type.
"""

from __future__ import annotations

import difflib
import glob
import json
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Set, TextIO, Tuple

from ..core import procfs
from ..core.model import Capture, Op
from ..core.opkernel import KERNEL_RE, inherit_device_ops, op_frames
from ..errors import GdbError, TfnativeError
from ..toolchain.tfinstall import tensorflow_package_dirs
from .breakpoints import Breakpoints
from .mi import Gdb, mi_quote

# Where the CPU device runs kernels (libtensorflow_framework.so.2):
# ThreadPoolDevice::Compute(OpKernel*, OpKernelContext*) and ::ComputeAsync(AsyncOpKernel*, ...,
# std::function<void ()>).  Mangled: an exact lookup in the symbol index, where a C++
# name would make us demangle every symbol that mentions Eigen::ThreadPoolDevice (seconds).
DISPATCH_FUNCTIONS = (
    "_ZN10tensorflow16ThreadPoolDevice7ComputeEPNS_8OpKernelEPNS_15OpKernelContextE",
    "_ZN10tensorflow16ThreadPoolDevice12ComputeAsyncEPNS_13AsyncOpKernelEPNS_15OpKernelContextESt8functionIFvvEE",
)
_OP_HELPER_RE = re.compile(rb'_apply_op_helper\(\s*"([A-Za-z0-9_]+)"')


def op_location(op_type: str) -> str:
    return "op %s" % op_type


# ---------------------------------------------------------------- op types


def op_types(tf_dir: str) -> Set[str]:
    """The op types TensorFlow's Python wrappers create (``gen_*_ops.py``)."""
    found: Set[str] = set()
    for path in glob.glob(os.path.join(tf_dir, "python", "**", "gen_*.py"), recursive=True):
        try:
            with open(path, "rb") as f:
                found.update(m.decode() for m in _OP_HELPER_RE.findall(f.read()))
        except OSError:
            continue
    return found


def candidates(name: str, known: Iterable[str], limit: int = 8) -> List[str]:
    """Op types ``name`` may mean: same name in another case, names containing it, close spellings."""
    known = sorted(known)
    low = name.lower()
    exactish = [k for k in known if k.lower() == low]
    containing = sorted((k for k in known if low in k.lower() and k not in exactish), key=lambda k: (len(k), k))
    close = difflib.get_close_matches(name, known, n=limit, cutoff=0.75)
    out: List[str] = []
    for k in exactish + containing + close:
        if k not in out:
            out.append(k)
    return out[:limit]


def loaded_tensorflow_dirs(pid: int) -> List[str]:
    """The package directory of the TensorFlow that process ``pid`` has loaded (the directory of its mapped
    ``libtensorflow_framework.so.2``/``libtensorflow_cc.so.2``); [] when it has loaded none (or its maps
    cannot be read).  A process run from a venv has the base interpreter as its executable, which cannot
    import the venv's TensorFlow: what it mapped is the truth."""
    try:
        rows = procfs.maps(pid)
    except OSError:
        return []
    for row in rows:
        name = row.path or ""
        if os.path.basename(name) in ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2") \
                and os.path.isdir(os.path.join(os.path.dirname(name), "python")):
            return [os.path.dirname(name)]
    return []


def check_op_types(requested: List[str], python: str, env: Optional[Dict[str, str]] = None,
                   tf_dirs: Optional[List[str]] = None) -> None:
    """Each ``--break-op`` must name an op type of the TensorFlow the script imports (``tf_dirs``: the one a
    running process has loaded, else the one ``python`` would import); raise otherwise."""
    if not requested:
        return
    try:
        dirs = tf_dirs or tensorflow_package_dirs(python, env)
    except TfnativeError:
        dirs = []
    if not dirs:
        raise TfnativeError("--break-op needs TensorFlow, and %s cannot import it" % python)
    tf_dir = dirs[0]
    known = op_types(tf_dir)
    if not known:
        raise TfnativeError("--break-op: no op wrappers (gen_*_ops.py) under %s" % tf_dir)
    for name in requested:
        if name in known:
            continue
        maybe = candidates(name, known)
        hint = ("; candidates: %s" % ", ".join(maybe)) if maybe else ""
        raise TfnativeError("--break-op %s: TensorFlow has no op type of that name%s" % (name, hint))


# ---------------------------------------------------------------- op context


def annotate(gdb: Gdb, capture: Capture) -> None:
    """Set ``op`` on the kernel and device frames of a capture (names already symbolized).

    A frame's ``start`` (its function's entry) is known where tfnative named
    it (surrogate libraries); gdb finds the others.
    """
    requests: List[Tuple[Any, str]] = []
    for t in capture.threads:
        for f, device in op_frames(t.frames):
            start = f.start or 0
            requests.append((f, "%d:%d:0x%x%s" % (t.tid, f.level or 0, start, ":device" if device else "")))
    if not requests:
        return
    try:
        res = gdb.command("-tfnative-op-context " + " ".join(r[1] for r in requests), timeout=60)
        ops = json.loads(res["json"])
    except (GdbError, KeyError, ValueError):
        return
    for (f, _req), op in zip(requests, ops):
        if op:
            f.op = Op.from_json(op)
    for t in capture.threads:
        inherit_device_ops(t.frames)


# ---------------------------------------------------------------- --break-op


class OpBreaks:
    """The ``--break-op`` locations of a session and the kernels armed for them."""

    def __init__(self, op_types_wanted: List[str], bps: Breakpoints) -> None:
        self.types = list(dict.fromkeys(op_types_wanted))
        self.bps = bps
        self.armed: Dict[int, str] = {}  # kernel entry address -> function name
        for t in self.types:
            bps.add_op(op_location(t))
        for fn in DISPATCH_FUNCTIONS if self.types else ():
            bps.add_op(fn, internal=True, op_types=self.types)

    @property
    def dispatch_functions(self) -> List[str]:
        return list(DISPATCH_FUNCTIONS) if self.types else []

    def is_dispatch(self, number: Any) -> bool:
        loc = self.bps.location_of(number)
        return loc is not None and loc.internal

    def on_dispatch(self, gdb: Gdb, name_of: Any, err: TextIO) -> None:
        """A dispatch stop: arm the ``Compute`` of the kernel class about to run an op we want.

        ``name_of(address)`` names a code address (tfnative's index for
        surrogate libraries); gdb's own names come with the vtable.
        """
        res = gdb.command("-tfnative-op-dispatch", timeout=60)
        info = json.loads(res.get("json") or "null")
        if not info or info.get("type") not in self.types:
            return
        slots = [int(a, 16) for a in info.get("slots", [])]
        names = list(info.get("names") or [None] * len(slots))
        entry = None
        for i, addr in enumerate(slots):
            name = names[i] if i < len(names) and names[i] else name_of(addr)
            if name and KERNEL_RE.search(name):
                entry, fn = addr, name
                break
        if entry is None:
            err.write("tfnative: warning: --break-op %s: cannot find the Compute of the kernel at %s\n"
                      % (info["type"], info.get("kernel")))
            return
        if entry in self.armed:
            return
        self.armed[entry] = fn
        res = gdb.command("-tfnative-break-op-kernel *0x%x %s" % (entry, " ".join(mi_quote(t) for t in self.types)),
                          timeout=60)
        number = str(res.get("number"))
        # One kernel breakpoint serves every wanted type its class runs; the
        # hit is reported under the type found on the kernel at that stop.
        for t in self.types:
            self.bps.add_number(op_location(t), number)
        err.write("tfnative: --break-op %s: armed %s\n" % (info["type"], fn))
        err.flush()
