"""Read each thread's Python frames from the target's memory.

Works from symbols alone (``_PyRuntime``, ``Py_Version``), so it needs no
debug info for the interpreter: ``.dynsym`` is enough.  The walk is the one
pystack and py-spy do: ``_PyRuntime`` -> interpreters -> thread states -> the
current frame -> ``previous``/``f_back`` links, cut into one group per
``_PyEval_EvalFrameDefault`` call (see ``pylayout`` for the three shapes).

``memory`` is any object with ``read(addr, size) -> bytes`` that raises
``MemoryError`` on an unreadable address.
"""

import os
import re
import struct
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from ..memory import Memory
from ..model import PythonFrame
from .linetable import line_for
from .pylayout import (
    DEBUG_OFFSETS_MAX,
    ENTRY_OWNER_MIN,
    LAYOUTS,
    STACKREF_INT_TAG,
    STACKREF_TAG_BITS,
    Layout,
    UnsupportedLayout,
    debug_offsets_layout,
)
from .pyobjects import ObjectReader

# A code object's (qualified name, file name, first line, line table), read once per capture.
CodeInfo = Tuple[str, Optional[str], int, bytes]

MAX_FRAMES = 1 << 17  # a bound on any walk; far more than a C stack holds
MAX_THREADS = 4096


# Locals worth reading, by (function, file name suffix): TensorFlow's eager
# ``quick_execute`` runs a tf.function under the name in ``op_name``
# (``__inference_<python name>_<uid>``); ``_apply_op_helper`` adds an op of type ``op_type_name`` to a graph.
WANTED_LOCALS = {
    ("quick_execute", "/tensorflow/python/eager/execute.py"): ("op_name",),
    # graph construction (a tf.function traced, TF1): the type of the op being added, whose shape function runs
    ("_apply_op_helper", "/tensorflow/python/framework/op_def_library.py"): ("op_type_name",),
    # tfnative's --check-numerics hook: the op that made a NaN/Inf.
    ("_tfnative_numerics_stop", "/tfnative/inject/sitecustomize.py"): (
        "op_type", "op_name", "created_at", "xla_functions"),
}
# Locals kept as object addresses: AutoGraph's ``converted_call`` holds the
# converted function, whose ``ag_source_map`` maps generated lines back.
WANTED_OBJECTS = {
    ("converted_call", "/tensorflow/python/autograph/impl/api.py"): ("converted_f",),
}


class PyFrame:
    __slots__ = ("function", "file", "line", "address", "code", "locals", "objects", "converted", "variables",
                 "op_args")

    def __init__(self, function: str, file: Optional[str], line: Optional[int], address: int, code: int = 0):
        self.function = function
        self.file = file
        self.line = line
        self.address = address
        self.code = code  # the code object it runs
        self.locals: Dict[str, str] = {}
        self.objects: Dict[str, int] = {}
        self.converted: Optional[Dict[str, Any]] = None
        self.variables: Optional[List[Dict[str, Any]]] = None  # --locals: {"name", "repr", "arg"} in order
        self.op_args: Optional[Dict[str, Any]] = None  # a generated op wrapper's (core/tensorflow/wrapperargs.py)

    def to_frame(self) -> PythonFrame:
        """The frame as the model's (a capture's Python frame: no ``class``, ``user`` or source yet)."""
        return PythonFrame(function=self.function, file=self.file, line=self.line,
                           locals=dict(self.locals) if self.locals else None,
                           converted=dict(self.converted) if self.converted else None,
                           variables=list(self.variables) if self.variables is not None else None,
                           op_args=self.op_args)


class ThreadPy:
    """The Python side of one thread: frames grouped per eval-loop call."""

    def __init__(self, tstate: int, native_id: Optional[int], pthread_id: int):
        self.tstate = tstate
        self.native_id = native_id
        self.pthread_id = pthread_id
        self.groups: List[List[PyFrame]] = []  # innermost group first, frames innermost first
        # 3.12+: the address of the entry frame under each group (a local of that eval call's C frame)
        self.entries: List[int] = []
        self.error: Optional[str] = None
        self.name: Optional[str] = None  # threading's name for it, where the program imported threading
        self.daemon: Optional[bool] = None  # and whether it is a daemon thread
        self.holds_gil = False  # set by whoever read the runtime's GIL holder
        self.gc_collecting = False  # the same: the interpreter's collector runs (whoever holds the GIL runs it)
        self.frames_read = False  # read_frames has run: a second call keeps what the first read
        self.after_release = False  # snapshot.take: its frames needed memory read after the process ran on

    @property
    def frames(self) -> List[PyFrame]:
        return [f for g in self.groups for f in g]


class PythonReader:
    def __init__(self, memory: Memory, layout: Layout, runtime_addr: int, code_type: Optional[int] = None,
                 str_type: Optional[int] = None, bytes_type: Optional[int] = None):
        self.mem = memory
        self.layout = layout
        self.runtime = runtime_addr
        self.code_type = code_type
        self.str_type = str_type
        self.bytes_type = bytes_type
        self._strings: Dict[int, Optional[str]] = {}
        self._code: Dict[int, CodeInfo] = {}
        self._lines: Dict[Tuple[int, int], Optional[int]] = {}  # (code object, instruction offset) -> line
        self.want_variables = False  # --locals: read each frame's arguments and locals
        self.objects = ObjectReader(self)

    # -- primitive reads -------------------------------------------------
    def u64(self, addr: int) -> int:
        value: int = struct.unpack("<Q", self.mem.read(addr, 8))[0]
        return value

    def i64(self, addr: int) -> int:
        value: int = struct.unpack("<q", self.mem.read(addr, 8))[0]
        return value

    def i32(self, addr: int) -> int:
        value: int = struct.unpack("<i", self.mem.read(addr, 4))[0]
        return value

    def u8(self, addr: int) -> int:
        return self.mem.read(addr, 1)[0]

    def ref(self, addr: int) -> int:
        """The object a frame slot at ``addr`` holds: a ``_PyStackRef`` (3.14+) with its tag bits cleared, or
        a plain pointer (older versions, whose objects are aligned: the same read); 0 for none and for a
        tagged int (``tagged_int``)."""
        bits = self.u64(addr)
        return 0 if bits & STACKREF_TAG_BITS == STACKREF_INT_TAG else bits & ~STACKREF_TAG_BITS

    @staticmethod
    def tagged_int(bits: int) -> Optional[int]:
        """The value of a tagged-int ``_PyStackRef`` (low bits ``Py_INT_TAG``, 3.14+), else None."""
        if bits & STACKREF_TAG_BITS != STACKREF_INT_TAG:
            return None
        return (bits - (1 << 64) if bits >> 63 else bits) >> 2

    def string(self, obj: int) -> Optional[str]:
        """A ``str`` object's value (compact strings: all that code objects hold)."""
        if obj in self._strings:
            return self._strings[obj]
        L = self.layout
        value: Optional[str] = None
        try:
            length = self.i64(obj + L.unicode_length)
            state = struct.unpack("<I", self.mem.read(obj + L.unicode_state, 4))[0]
            kind = (state >> 2) & 7
            compact = (state >> 5) & 1
            ascii_ = (state >> 6) & 1
            if 0 <= length < 1 << 20 and kind in (1, 2, 4):
                if compact:
                    data = obj + (L.unicode_ascii_size if ascii_ else L.unicode_compact_size)
                else:
                    data = self.u64(obj + L.unicode_compact_size)
                raw = self.mem.read(data, length * kind) if length else b""
                codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
                value = raw.decode(codec, "replace")
        except MemoryError:
            value = None
        self._strings[obj] = value
        return value

    def bytes_value(self, obj: int) -> bytes:
        size = self.i64(obj + self.layout.bytes_size)
        if not 0 <= size < 1 << 26:
            raise MemoryError("implausible bytes size")
        return self.mem.read(obj + self.layout.bytes_sval, size) if size else b""

    # -- threads ---------------------------------------------------------
    def thread_states(self) -> List[ThreadPy]:
        L = self.layout
        out: List[ThreadPy] = []
        interp = self.u64(self.runtime + L.runtime_interpreters_head)
        seen: Set[int] = set()
        while interp and interp not in seen and len(seen) < 64:
            seen.add(interp)
            ts = self.u64(interp + L.interp_threads_head)
            while ts and len(out) < MAX_THREADS:
                native = None
                if L.tstate_native_thread_id is not None:
                    native = self.u64(ts + L.tstate_native_thread_id)
                out.append(ThreadPy(ts, native, self.u64(ts + L.tstate_thread_id)))
                ts = self.u64(ts + L.tstate_next)
            interp = self.u64(interp + L.interp_next)
        return out

    def thread_list_heads(self) -> List[int]:
        """The address of each interpreter's ``threads.head`` field: a new thread state is put there, so a
        list whose heads hold what they held before has gained no thread (a snapshot's hold checks them)."""
        L = self.layout
        out: List[int] = []
        interp = self.u64(self.runtime + L.runtime_interpreters_head)
        while interp and interp + L.interp_threads_head not in out and len(out) < 64:
            out.append(interp + L.interp_threads_head)
            interp = self.u64(interp + L.interp_next)
        return out

    def gil_holder(self) -> Optional[int]:
        """The thread state that holds the GIL (``last_holder`` while ``locked`` is 1), or None when it is
        free or the layout does not say where the GIL is."""
        L = self.layout
        if L.runtime_gil is not None:
            gil = self.runtime + L.runtime_gil
        elif L.interp_gil is not None:
            interp = self.u64(self.runtime + L.runtime_interpreters_head)
            gil = self.u64(interp + L.interp_gil) if interp else 0
        else:
            return None
        if not gil or self.i32(gil + L.gil_locked) != 1:
            return None
        return self.u64(gil + L.gil_last_holder) or None

    def gc_collecting(self) -> bool:
        """Whether the (main) interpreter's garbage collector is running a collection now."""
        L = self.layout
        if L.interp_gc_collecting is None:
            return False
        interp = self.u64(self.runtime + L.runtime_interpreters_head)
        return bool(interp) and self.i32(interp + L.interp_gc_collecting) == 1

    def finalizing(self) -> bool:
        """Whether the interpreter is shutting down (``Py_FinalizeEx`` has set ``_PyRuntime._finalizing``)."""
        L = self.layout
        return L.runtime_finalizing is not None and bool(self.u64(self.runtime + L.runtime_finalizing))

    def read_frames(self, thread: ThreadPy) -> ThreadPy:
        """Read ``thread``'s frames into it (once: ``snapshot.take`` reads them while the process is held)."""
        if thread.frames_read:
            return thread
        thread.frames_read = True
        try:
            if self.layout.chain == "frameobject":
                self._read_310(thread)
            else:
                self._read_interp_frames(thread)
        except MemoryError as exc:
            thread.error = "cannot read Python frames: %s" % exc
        return thread

    # -- code objects ----------------------------------------------------
    def _code_info(self, code: int) -> CodeInfo:
        info = self._code.get(code)
        if info is None:
            L = self.layout
            name_obj = self.u64(code + (L.code_qualname if L.code_qualname is not None else L.code_name))
            info = (
                self.string(name_obj) or "<unknown>",
                self.string(self.u64(code + L.code_filename)),
                self.i32(code + L.code_firstlineno),
                self.bytes_value(self.u64(code + L.code_linetable)),
            )
            self._code[code] = info
        return info

    def _is_code(self, obj: int) -> bool:
        if not obj:
            return False
        if self.code_type is None:
            return True
        return self.u64(obj + self.layout.ob_type) == self.code_type

    def _frame(self, code: int, addr_bytes: int, frame_addr: int) -> PyFrame:
        name, filename, first, table = self._code_info(code)
        key = (code, addr_bytes)
        line = self._lines.get(key, -1)
        if line == -1:
            line = self._lines[key] = line_for(self.layout.version, table, first, addr_bytes)
        frame = PyFrame(name, filename, line, frame_addr, code)
        if self.want_variables:
            try:
                frame.variables = self.objects.variables(code, frame_addr)
            except MemoryError as exc:
                frame.variables = [{"name": "?", "repr": "<cannot read the locals: %s>" % exc, "arg": False}]
        short = name.rsplit(".", 1)[-1]
        for (fn, suffix), wanted in WANTED_LOCALS.items():
            if short == fn and (filename or "").endswith(suffix):
                try:
                    frame.locals = self.string_locals(code, frame_addr, wanted)
                except MemoryError:
                    pass
        for (fn, suffix), wanted in WANTED_OBJECTS.items():
            if short == fn and (filename or "").endswith(suffix):
                try:
                    frame.objects = self.local_objects(code, frame_addr, wanted)
                except MemoryError:
                    pass
        return frame

    def local_objects(self, code: int, frame_addr: int, names: Sequence[str]) -> Dict[str, int]:
        """Addresses of the objects bound to the locals ``names`` of a frame (unbound ones are left out)."""
        L = self.layout
        if L.frame_localsplus is None or L.code_localsplusnames is None:
            return {}
        tup = self.u64(code + L.code_localsplusnames)
        out: Dict[str, int] = {}
        for i, item in enumerate(self.tuple_items(tup)):
            local_name = self.string(item)
            if local_name is not None and local_name in names:
                obj = self.ref(frame_addr + L.frame_localsplus + 8 * i)
                if obj:
                    out[local_name] = obj
        return out

    def string_locals(self, code: int, frame_addr: int, names: Sequence[str]) -> Dict[str, str]:
        """Values of the str/bytes locals ``names`` of a frame (others are skipped)."""
        out: Dict[str, str] = {}
        for local_name, obj in self.local_objects(code, frame_addr, names).items():
            value = self.text(obj)
            if value is not None:
                out[local_name] = value
        return out

    # -- objects ---------------------------------------------------------
    def type_of(self, obj: int) -> int:
        return self.u64(obj + self.layout.ob_type)

    def text(self, obj: int) -> Optional[str]:
        """A str's value, or a bytes' decoded; None for anything else."""
        otype = self.type_of(obj)
        if self.str_type is not None and otype == self.str_type:
            return self.string(obj)
        if self.bytes_type is not None and otype == self.bytes_type:
            return self.bytes_value(obj)[:4096].decode("utf-8", "replace")
        return None

    def tuple_items(self, obj: int) -> List[int]:
        L = self.layout
        count = self.i64(obj + L.tuple_size)
        if not 0 <= count <= 4096:
            raise MemoryError("implausible tuple size")
        raw = self.mem.read(obj + L.tuple_items, 8 * count) if count else b""
        return list(struct.unpack("<%dQ" % count, raw))

    def int_value(self, obj: int) -> int:
        """A (small) int's value; 30-bit digits."""
        L = self.layout
        if L.long_lv_tag:
            tag = self.u64(obj + 16)
            ndigits, negative = tag >> 3, (tag & 3) == 2
        else:
            size = self.i64(obj + 16)
            ndigits, negative = abs(size), size < 0
        if ndigits > 4:
            raise MemoryError("int too large")
        value = 0
        for i in range(ndigits):
            value |= (struct.unpack("<I", self.mem.read(obj + 24 + 4 * i, 4))[0] & 0x3FFFFFFF) << (30 * i)
        return -value if negative else value

    def dict_items(self, obj: int) -> List[Tuple[int, int]]:
        """(key, value) object addresses of a dict, in insertion order."""
        return list(self.dict_entries(obj))

    def dict_entries(self, obj: int) -> Iterator[Tuple[int, int]]:
        """The same, read as they are asked for (a lookup stops at its key)."""
        L = self.layout
        keys = self.u64(obj + L.dict_keys)
        values = self.u64(obj + L.dict_values)
        if L.version < (3, 11):
            size = self.i64(keys + 8)
            nentries = self.i64(keys + 32)
            ix = 1 if size <= 0xFF else 2 if size <= 0xFFFF else 4 if size <= 0xFFFFFFFF else 8
            entries, entry_size, key_at, value_at = keys + 40 + size * ix, 24, 8, 16
        else:
            log2_index_bytes = self.u8(keys + 9)
            kind = self.u8(keys + 10)
            nentries = self.i64(keys + 24)
            entries = keys + 32 + (1 << log2_index_bytes)
            entry_size, key_at, value_at = (24, 8, 16) if kind == 0 else (16, 0, 8)
        if not 0 <= nentries <= 1 << 20:
            raise MemoryError("implausible dict size")
        for i in range(nentries):
            key = self.u64(entries + i * entry_size + key_at)
            if not key:
                continue
            if values:
                value = self.u64(values + L.dict_values_offset + 8 * i)
            else:
                value = self.u64(entries + i * entry_size + value_at)
            if value:
                yield key, value

    def _read_310(self, thread: ThreadPy) -> None:
        L = self.layout
        f = self.u64(thread.tstate + L.tstate_frame)
        seen: Set[int] = set()
        while f:
            if _stop(thread, f, seen):
                return
            try:
                code = self.u64(f + L.frame_code)
                lasti = self.i32(f + L.frame_instr)
                frame = self._frame(code, lasti * 2, f)
            except MemoryError as exc:
                thread.error = _unreadable(f, len(seen) - 1, exc)
                return
            thread.groups.append([frame])
            f = self.u64(f + L.frame_previous)

    def _sentinel(self, thread: ThreadPy, frame: int) -> bool:
        """Whether an interpreter-owned frame is the thread state's own bottom frame (3.15: the thread state
        points to it from ``base_frame``, whose offset ``_Py_DebugOffsets`` publishes), not an eval call's
        entry frame."""
        base = self.layout.tstate_base_frame
        return base is not None and frame == self.u64(thread.tstate + base)

    def _read_interp_frames(self, thread: ThreadPy) -> None:
        L = self.layout
        if L.cframe_current_frame is not None:
            cframe = self.u64(thread.tstate + L.tstate_frame)
            f = self.u64(cframe + L.cframe_current_frame) if cframe else 0
        else:
            f = self.u64(thread.tstate + L.tstate_frame)
        group: List[PyFrame] = []
        seen: Set[int] = set()
        while f:
            if _stop(thread, f, seen):
                break
            try:
                owner = self.u8(f + L.frame_owner) if L.frame_owner is not None else 0
                if L.chain == "cstack_shim" and owner >= ENTRY_OWNER_MIN:
                    if not self._sentinel(thread, f):
                        thread.groups.append(group)
                        thread.entries.append(f)
                    group = []
                    f = self.u64(f + L.frame_previous)
                    continue
                code = self.ref(f + L.frame_code)
                if self._is_code(code):
                    instr = self.u64(f + L.frame_instr)
                    start = code + L.code_code
                    group.append(self._frame(code, instr - start if instr else -1, f))
                entry = L.chain == "entry_flag" and L.frame_is_entry is not None and self.u8(f + L.frame_is_entry)
                f = self.u64(f + L.frame_previous)
            except MemoryError as exc:
                thread.error = _unreadable(f, len(seen) - 1, exc)
                break
            if entry:
                thread.groups.append(group)
                group = []
        if group:
            # Frames below the last entry marker: no eval call owns them, which
            # only happens while a thread is being set up or torn down (or
            # where the walk stopped, said in ``thread.error``).
            thread.groups.append(group)


def _stop(thread: ThreadPy, frame: int, seen: Set[int]) -> bool:
    """Whether the walk stops before ``frame``: the chain loops back on itself, or is implausibly long."""
    if frame in seen:
        thread.error = ("the Python frame chain loops back to frame 0x%x after %d frames: memory corrupted; "
                        "the frames up to there are shown" % (frame, len(seen)))
        return True
    if len(seen) >= MAX_FRAMES:
        thread.error = "stopped after %d Python frames (the limit): the outermost ones are not shown" % MAX_FRAMES
        return True
    seen.add(frame)
    return False


def _unreadable(frame: int, index: int, exc: Exception) -> str:
    return ("cannot read Python frame %d (at 0x%x): %s; the frames before it are shown, none after"
            % (index, frame, exc))


NO_RUNTIME = "no _PyRuntime symbol: the target does not run CPython (or it is not loaded yet)"


def open_reader(memory: Memory, symbol: Callable[[str], Optional[int]],
                library: Callable[[int], str]) -> Tuple[Optional[PythonReader], Optional[str]]:
    """A PythonReader for the target's interpreter, or (None, why).

    ``symbol(name)`` is the run-time address of a symbol (None when absent);
    ``library(address)`` the file that holds an address.  3.13+ describe their
    own layout (``_Py_DebugOffsets`` at the start of ``_PyRuntime``); older
    versions are told by ``Py_Version`` (3.11, 3.12) or by the name of the
    file holding ``_PyRuntime`` (``libpython3.10.so``, ``python3.10``).
    """
    runtime = symbol("_PyRuntime")
    if runtime is None:
        return None, NO_RUNTIME
    layout = None
    try:
        layout = debug_offsets_layout(_head(memory, runtime))
    except UnsupportedLayout as exc:
        return None, str(exc)
    if layout is None:
        version = None
        at = symbol("Py_Version")
        if at is not None:
            try:
                hexv = int.from_bytes(memory.read(at, 4), "little")
                version = ((hexv >> 24) & 0xFF, (hexv >> 16) & 0xFF)
            except MemoryError:
                pass
        if version is None:
            m = re.search(r"python(\d)\.(\d+)", os.path.basename(library(runtime)))
            version = (int(m.group(1)), int(m.group(2))) if m else None
        if version is None:
            return None, "cannot tell the target's Python version"
        layout = LAYOUTS.get(version)
        if layout is None:
            return None, "Python %d.%d is not supported (supported: 3.10 to 3.15)" % version
    return PythonReader(memory, layout, runtime, symbol("PyCode_Type"), symbol("PyUnicode_Type"),
                        symbol("PyBytes_Type")), None


def _head(memory: Memory, runtime: int) -> bytes:
    """The head of ``_PyRuntime`` (where 3.13+ keep ``_Py_DebugOffsets``): as much of the first
    ``DEBUG_OFFSETS_MAX`` bytes as can be read; b"" when none can."""
    size = DEBUG_OFFSETS_MAX
    while size >= 64:
        try:
            return memory.read(runtime, size)
        except MemoryError:
            size //= 2
    return b""
