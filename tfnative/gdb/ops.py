"""TensorFlow ops in a native session: which op a kernel frame runs, and ``--break-op``.

**Op context.**  After a capture, the native frames that run an op (a
kernel's ``Compute``/``ComputeAsync``, the device's ``Compute`` that calls it)
get ``"op": {"type", "name", "kernel"}``, read by gdb from the ``OpKernel``
in the stopped process (``tfnative/core/tensorflow/opkernel.py``: memory reads only).

**Break by op.**  ``--break-op MatMul`` cannot be a breakpoint on a name: no
``MatMulOp`` class exists in TF 2.16+ (``BaseBatchMatMulOp<...>::Compute``
serves MatMul, and one class serves several op types and dtypes).  So:

1. the op type is checked against the op types of the TensorFlow the script
   will import (``gen_*_ops.py``); one that is not one is *pending*: a
   library (a custom op) may register it when it loads.  Such a library gets
   gdb's symbols (it holds the type's name, ``SymbolLoader.want_names``), so
   that its kernel's ``Compute`` is named at step 3 whatever its class is
   called.  At the end of a run where no op of a pending type ran, one line
   says whether a loaded library registers it (the name in the ``.rodata`` of
   a library that calls TensorFlow's registrars), else the close names;
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
from ..core.binary.elf import ElfError, ElfFile
from ..core.binary.mapfile import map_file
from ..core.model import Capture, Op
from ..core.tensorflow.opkernel import KERNEL_RE, inherit_device_ops, op_frames
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
ASYNC_WRAPPER = "tensorflow::AsyncOpKernel::Compute("
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


_TYPE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def close_names(name: str, known: Iterable[str], limit: int = 5) -> List[str]:
    """Op types that are spelled close to ``name`` (the same name in another case, or difflib's ratio of 0.8
    and up): what a typo may have meant, never merely a name that shares a word with it."""
    known = sorted(known)
    low = name.lower()
    out = [k for k in known if k.lower() == low and k != name]
    for k in difflib.get_close_matches(name, known, n=limit, cutoff=0.8):
        if k not in out and k != name:
            out.append(k)
    return out[:limit]


def check_op_types(requested: List[str], python: str, env: Optional[Dict[str, str]] = None,
                   tf_dirs: Optional[List[str]] = None) -> Tuple[Dict[str, List[str]], str]:
    """Check each ``--break-op`` against the op types of the TensorFlow the script imports (``tf_dirs``: the
    one a running process has loaded, else the one ``python`` would import).

    A type TensorFlow itself has not is no error: a library (a custom op) may register it when it loads; but
    one that is a stock type in another case (``matmul``) is refused at once, naming it: a typo, which would
    otherwise wait for a library that never comes (forever, on a running job).
    Returns those *pending* types, each with the stock names close to it (said at the end of a run where no
    op of that type ran), and the package directory of that TensorFlow.  Raises on a name that cannot be an
    op type, or without TensorFlow.
    """
    if not requested:
        return {}, ""
    for name in requested:
        if not _TYPE_NAME_RE.match(name):
            raise TfnativeError("--break-op %r: not an op type name (letters, digits and _, e.g. MatMul)" % name)
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
        same = [k for k in sorted(known) if k.lower() == name.lower() and k != name]
        if name not in known and same:  # op types are case-sensitive: a stock type in another case is a typo
            raise TfnativeError("--break-op %s: TensorFlow has no op type of that name; candidates: %s (op types "
                                "are case-sensitive)" % (name, ", ".join(same)))
    return {name: close_names(name, known) for name in dict.fromkeys(requested) if name not in known}, tf_dir


# A library that registers ops or kernels calls TensorFlow's registrars (its .dynstr names them).
_REGISTRARS = (b"OpKernelRegistrar", b"OpDefBuilderWrapper")
_RODATA_NAME_RE = re.compile(rb"(?<=\0)[A-Za-z_][A-Za-z0-9_]{0,127}(?=\0)")
MAX_RODATA = 256 * 1024 * 1024
MAX_NAMES = 200000


def registering_strings(path: str) -> Optional[bytes]:
    """The ``.rodata`` of the library at ``path`` when it registers ops or kernels (where ``REGISTER_OP`` and
    ``REGISTER_KERNEL_BUILDER(Name(...))`` leave the type's name), else None (no such library, or not ELF)."""
    try:
        with map_file(path) as mm:
            elf = ElfFile(mm, path)
            dynstr, rodata = elf.section(".dynstr"), elf.section(".rodata")
            if dynstr is None or rodata is None or rodata.size > MAX_RODATA:
                return None
            names = mm[dynstr.offset:dynstr.offset + min(dynstr.size, MAX_RODATA)]
            if not any(r in names for r in _REGISTRARS):
                return None
            return b"\0" + mm[rodata.offset:rodata.offset + rodata.size]
    except (OSError, ValueError, ElfError):
        return None


def string_names(rodata: bytes) -> Set[str]:
    """The identifier-like C strings of a ``.rodata`` (at most ``MAX_NAMES``): the op types it may register."""
    out: Set[str] = set()
    for m in _RODATA_NAME_RE.finditer(rodata):
        out.add(m.group().decode())
        if len(out) >= MAX_NAMES:
            break
    return out


# ---------------------------------------------------------------- op context


def annotate(gdb: Gdb, capture: Capture) -> None:
    """Set ``op`` on the kernel and device frames of a capture (names already symbolized).

    A frame's ``start`` (its function's entry) is known where tfnative named
    it (surrogate libraries); gdb finds the others.
    """
    requests: List[Tuple[Any, str]] = []
    for t in capture.threads:
        inputs = t.tid == capture.selected_tid  # the thread that stopped: its innermost kernel's inputs too
        for f, device in op_frames(t.frames):
            start = f.start or 0
            flag = ":device" if device else ":inputs" if inputs else ""
            inputs = inputs and device
            requests.append((f, "%d:%d:0x%x%s" % (t.tid, f.level or 0, start, flag)))
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
        self.pending: Dict[str, List[str]] = {}  # types stock TensorFlow has not -> close stock names
        self.ran: Set[str] = set()  # types a kernel was seen to run (a dispatch stop)
        self.libraries: List[str] = []  # libraries the target loaded (as it sees their paths), in order
        self.stock_dir = ""  # TensorFlow's package directory (``set_pending``)
        for t in self.types:
            bps.add_op(op_location(t))
        for fn in DISPATCH_FUNCTIONS if self.types else ():
            bps.add_op(fn, internal=True, op_types=self.types)

    def set_pending(self, pending: Dict[str, List[str]], stock_dir: str, err: TextIO,
                    loaded: Iterable[str] = ()) -> None:
        """The wanted types stock TensorFlow has not (``check_op_types``), one line each, now: the library
        among those ``loaded`` already (``--pid``; paths where this host reads them) that registers it, else
        pending until one does.  ``stock_dir``: TensorFlow's package directory, whose own libraries register
        none of them."""
        self.pending = dict(pending)
        self.stock_dir = os.path.realpath(stock_dir) + os.sep if stock_dir else ""
        for path in loaded:
            self.note_library(path)
        for t, close in self.pending.items():
            by = self.registered_by(t) if self.libraries else None
            if by:
                err.write("tfnative: --break-op %s: registered by %s, loaded already\n" % (t, os.path.basename(by)))
                continue
            hint = " (TensorFlow's own close names: %s)" % ", ".join(close) if close else ""
            err.write("tfnative: --break-op %s: pending until a library registers it%s\n" % (t, hint))
        err.flush()

    def registered_by(self, op_type: str) -> Optional[str]:
        """The first library loaded (``note_library``) that registers ``op_type``, or None."""
        needle = op_type.encode() + b"\0"
        for path in self.libraries:
            data = registering_strings(path)
            if data is not None and needle in data:
                return path
        return None

    def note_library(self, path: str) -> None:
        """A library the target loaded (an ``=library-loaded`` record; ``path`` where this host reads it):
        looked at only at the end of the run (``unseen``), and only for a type no op of which ran."""
        if not self.pending or not path or path in self.libraries:
            return
        if self.stock_dir and os.path.realpath(path).startswith(self.stock_dir):
            return  # TensorFlow's own: a name in it is no registration of a type its wrappers do not have
        self.libraries.append(path)

    def unseen(self) -> List[str]:
        """At the end of a run: one line for each pending type no op of which ran: the library loaded that
        registers it (its name is in the ``.rodata`` of a library that calls TensorFlow's registrars), else
        the names close to it, TensorFlow's own and those such libraries hold."""
        wanted = [t for t in self.pending if t not in self.ran]
        if not wanted:
            return []
        libs = [(p, data) for p in self.libraries if (data := registering_strings(p)) is not None]
        lines = []
        for t in wanted:
            needle = t.encode() + b"\0"
            by = [p for p, data in libs if needle in data]
            if by:
                lines.append("--break-op %s: %s registers it, but no op of that type ran on the CPU"
                             % (t, os.path.basename(by[0])))
                continue
            theirs: Set[str] = set()
            for _p, data in libs:
                theirs |= string_names(data)
            close = list(dict.fromkeys(self.pending[t] + close_names(t, theirs)))[:5]
            hint = ("; close names: %s" % ", ".join(close)) if close else ""
            lines.append("--break-op %s: no library the process loaded registers an op type of that name%s"
                         % (t, hint))
        return lines

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
        self.ran.add(info["type"])
        slots = [int(a, 16) for a in info.get("slots", [])]
        names = list(info.get("names") or [None] * len(slots))
        # The first Compute in the vtable, except TensorFlow's AsyncOpKernel::Compute (which calls the kernel's
        # own ComputeAsync and waits): then the ComputeAsync after it, the kernel's own (pure virtual there).
        # Later slots may be past the vtable's end (another class's): never looked at beyond that one.
        found: List[Tuple[int, str]] = []
        for i, addr in enumerate(slots):
            name = names[i] if i < len(names) and names[i] else name_of(addr)
            if not name or not KERNEL_RE.search(name):
                continue
            found.append((addr, name))
            if not name.startswith(ASYNC_WRAPPER) or len(found) > 1:
                break
        if len(found) > 1 and "::ComputeAsync" not in found[-1][1]:
            found = found[:1]
        entry, fn = found[-1] if found else (None, "")
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
