"""Per-version memory layouts of the CPython structures we read (pure).

Offsets are for 64-bit release builds of CPython (not ``--with-pydebug``), the
same for every patch release of a minor version.  They were read from the
DWARF of pyenv's builds with ``ptype /o`` and are checked against it by
``tests/integration/test_pylayout.py``.  On 3.13+ the interpreter publishes
most of them in ``_PyRuntime.debug_offsets`` (``_Py_DebugOffsets``), which we
read instead (``debug_offsets_layout``); the built-in tables are for 3.10 to
3.12 (and a 3.13 fallback).

Frame chains come in three shapes:

* ``"frameobject"`` (3.10): ``tstate->frame`` is a ``PyFrameObject`` linked by
  ``f_back``; each ``_PyEval_EvalFrameDefault`` call evaluates exactly one.
* ``"entry_flag"`` (3.11): ``_PyInterpreterFrame``\\ s linked by ``previous``;
  the oldest frame of each ``_PyEval_EvalFrameDefault`` call has ``is_entry``.
* ``"cstack_shim"`` (3.12+): each ``_PyEval_EvalFrameDefault`` call first
  pushes an entry frame on the C stack; the frames it runs sit above that
  entry frame in the chain.  Its ``owner`` is ``FRAME_OWNED_BY_CSTACK`` (3) in
  3.12 and 3.13; 3.14 inserted ``FRAME_OWNED_BY_INTERPRETER`` (3) before
  ``FRAME_OWNED_BY_CSTACK`` (now 4) and marks the entry frame with it; 3.15
  dropped ``FRAME_OWNED_BY_CSTACK``.  So an owner of 3 or more is the
  interpreter's own frame (``ENTRY_OWNER_MIN``), never a Python function's,
  in each of them, as CPython's own ``_remote_debugging`` reads it.  3.15's
  thread state also embeds a bottom frame (``base_frame``, its offset
  published) below the outermost entry frame, which is no eval call.

From 3.14 the frame's code (``f_executable``) and its locals are
``_PyStackRef``\\ s: a tagged word.  In the default (GIL) build the low two
bits are tags (``Py_TAG_REFCNT`` 1: a borrowed reference; ``Py_INT_TAG`` 3:
a tagged int, value ``bits >> 2``); the object is the word with them cleared
(``Include/internal/pycore_stackref.h``).  Object pointers are 8-aligned,
so clearing them on 3.11-3.13 (plain pointers) changes nothing.

The tail-calling interpreter (3.14+, ``--with-tail-call-interp``, clang 19+)
runs each instruction in its own ``_TAIL_CALL_<INSTRUCTION>`` function, which
tail-call each other; ``_PyEval_EvalFrameDefault`` still starts every eval
call and stays on the C stack under them (its entry frame is a local whose
address goes into the frame chain, so its own call into the first handler
is no tail call).  So one ``_PyEval_EvalFrameDefault`` frame per group holds
there too, with the current handler's frame above it, shown as an
interpreter frame.  Debian's 3.14 and 3.15 are built with GCC without it (no
``_TAIL_CALL_`` symbol in their DWARF): this is read from CPython's source,
untested.
"""

from typing import Dict, NamedTuple, Optional, Tuple

FRAME_OWNED_BY_CSTACK = 3  # 3.12, 3.13 (kept for the tests of those versions)
ENTRY_OWNER_MIN = 3  # an owner >= this marks the interpreter's entry frame (3.12-3.15: see above)
STACKREF_TAG_BITS = 3
STACKREF_INT_TAG = 3


class Layout(NamedTuple):
    """Where CPython keeps what the frame walk reads, for one interpreter build: offsets into its
    structures (an immutable record: a NamedTuple, which costs a tenth of a frozen dataclass's 70 generated
    fields to define at every start)."""

    version: Tuple[int, int]
    chain: str  # "frameobject" | "entry_flag" | "cstack_shim"
    runtime_interpreters_head: int
    interp_next: int
    interp_threads_head: int
    tstate_next: int
    tstate_thread_id: int
    tstate_native_thread_id: Optional[int]
    # 3.10: offset of the PyFrameObject* ; 3.11/3.12: offset of the _PyCFrame*;
    # 3.13: offset of the _PyInterpreterFrame*.
    tstate_frame: int
    cframe_current_frame: Optional[int]  # 3.11/3.12 only
    frame_previous: int
    frame_code: int
    frame_instr: int  # 3.10: f_lasti (int, code units); else pointer to instruction
    frame_is_entry: Optional[int]
    frame_owner: Optional[int]
    code_filename: int
    code_name: int
    code_qualname: Optional[int]
    code_firstlineno: int
    code_linetable: int
    code_code: int  # 3.10: co_code (a bytes object); else co_code_adaptive (inline)
    bytes_size: int = 16
    bytes_sval: int = 32
    unicode_length: int = 16
    unicode_state: int = 32
    unicode_ascii_size: int = 48
    unicode_compact_size: int = 72
    ob_type: int = 8
    # Locals: 3.10: PyFrameObject.f_localsplus + co_varnames; 3.11+:
    # _PyInterpreterFrame.localsplus + co_localsplusnames (a tuple of str).
    frame_localsplus: Optional[int] = None
    code_localsplusnames: Optional[int] = None
    tuple_size: int = 16
    tuple_items: int = 24
    func_code: int = 48
    func_dict: int = 88
    # dicts: 3.10 keeps dk_size (entries of 24 bytes); 3.11+ dk_log2_size,
    # dk_log2_index_bytes and dk_kind (0: 24-byte entries, else 16-byte str-key entries).
    dict_keys: int = 32
    dict_values: int = 40
    dict_values_offset: int = 0  # 3.13: PyDictValues has an 8-byte prefix
    # ints: 3.10/3.11 ob_size (signed digit count); 3.12+ lv_tag (ndigits << 3 | sign bits)
    long_lv_tag: bool = False
    # The GIL (struct _gil_runtime_state): 3.10/3.11 inside _PyRuntime at runtime_gil;
    # 3.12+ behind the pointer at interp_gil in the (main) interpreter.
    runtime_gil: Optional[int] = None
    interp_gil: Optional[int] = None
    gil_last_holder: int = 8
    gil_locked: int = 16
    # The collector's "collecting" flag (struct _gc_runtime_state), from the interpreter's start.
    interp_gc_collecting: Optional[int] = None
    # Objects read by name (thread names, --locals): sys.modules (3.10/3.11 interp->modules, 3.12+
    # interp->imports.modules), a module's md_dict, a heap type's shared instance keys, types' fields.
    interp_modules: Optional[int] = None
    runtime_finalizing: Optional[int] = None  # _PyRuntime._finalizing: set once Py_FinalizeEx tears down
    module_dict: int = 16
    type_name: int = 24
    type_basicsize: int = 32
    type_flags: int = 168
    type_dictoffset: int = 288
    heaptype_cached_keys: Optional[int] = None
    code_argcount: Optional[int] = None
    code_kwonlyargcount: Optional[int] = None
    code_flags: Optional[int] = None
    float_value: int = 16
    list_items: int = 24
    dict_used: int = 16
    cell_ref: int = 16
    # 3.15: the thread state's pointer to its own bottom frame (``base_frame``, below the outermost entry frame).
    tstate_base_frame: Optional[int] = None


# 3.13 fields that _Py_DebugOffsets does not publish (from the DWARF, like the older versions').
_UNPUBLISHED_313 = dict(heaptype_cached_keys=880, code_argcount=52, code_kwonlyargcount=60, code_flags=48)

LAYOUTS: Dict[Tuple[int, int], Layout] = {
    (3, 10): Layout(runtime_gil=352, interp_gc_collecting=816,
        version=(3, 10), chain="frameobject",
        runtime_interpreters_head=32, interp_next=0, interp_threads_head=8,
        tstate_next=8, tstate_thread_id=176, tstate_native_thread_id=None,
        tstate_frame=24, cframe_current_frame=None,
        frame_previous=24, frame_code=32, frame_instr=96,
        frame_is_entry=None, frame_owner=None,
        code_filename=104, code_name=112, code_qualname=None,
        code_firstlineno=40, code_linetable=120, code_code=48,
        frame_localsplus=352, code_localsplusnames=72,
        interp_modules=856, runtime_finalizing=16,
        heaptype_cached_keys=872, code_argcount=16, code_kwonlyargcount=24, code_flags=36,
    ),
    (3, 11): Layout(runtime_gil=360, interp_gc_collecting=848,
        version=(3, 11), chain="entry_flag",
        runtime_interpreters_head=40, interp_next=0, interp_threads_head=16,
        tstate_next=8, tstate_thread_id=152, tstate_native_thread_id=160,
        tstate_frame=56, cframe_current_frame=8,
        frame_previous=48, frame_code=32, frame_instr=56,
        frame_is_entry=68, frame_owner=69,
        code_filename=112, code_name=120, code_qualname=128,
        code_firstlineno=72, code_linetable=136, code_code=184,
        frame_localsplus=72, code_localsplusnames=96,
        interp_modules=888, runtime_finalizing=24,
        heaptype_cached_keys=872, code_argcount=56, code_kwonlyargcount=64, code_flags=48,
    ),
    (3, 12): Layout(interp_gil=384, interp_gc_collecting=312,
        version=(3, 12), chain="cstack_shim",
        runtime_interpreters_head=40, interp_next=0, interp_threads_head=72,
        tstate_next=8, tstate_thread_id=136, tstate_native_thread_id=144,
        tstate_frame=56, cframe_current_frame=0,
        frame_previous=8, frame_code=0, frame_instr=56,
        frame_is_entry=None, frame_owner=70,
        code_filename=112, code_name=120, code_qualname=128,
        code_firstlineno=68, code_linetable=136, code_code=192,
        unicode_ascii_size=40, unicode_compact_size=56,
        frame_localsplus=72, code_localsplusnames=96, long_lv_tag=True,
        interp_modules=944, runtime_finalizing=24,
        heaptype_cached_keys=880, code_argcount=52, code_kwonlyargcount=60, code_flags=48,
    ),
    # 3.13 is read from _Py_DebugOffsets at run time (see debug_offsets_layout);
    # this entry is the fallback for a _PyRuntime whose cookie cannot be read
    # and documents the values we expect.
    (3, 13): Layout(interp_gil=16, interp_gc_collecting=7600,
        version=(3, 13), chain="cstack_shim",
        runtime_interpreters_head=632, interp_next=7264, interp_threads_head=7344,
        tstate_next=8, tstate_thread_id=152, tstate_native_thread_id=160,
        tstate_frame=72, cframe_current_frame=None,
        frame_previous=8, frame_code=0, frame_instr=56,
        frame_is_entry=None, frame_owner=70,
        code_filename=112, code_name=120, code_qualname=128,
        code_firstlineno=68, code_linetable=136, code_code=200,
        unicode_ascii_size=40, unicode_compact_size=56,
        frame_localsplus=72, code_localsplusnames=96, long_lv_tag=True, dict_values_offset=8,
        interp_modules=7656, runtime_finalizing=608, **_UNPUBLISHED_313,
    ),
}

DEBUG_OFFSETS_COOKIE = b"xdebugpy"
GC_COLLECTING = 200  # offsetof(struct _gc_runtime_state, collecting) in 3.13 (which does not publish it)

# The shape of ``_Py_DebugOffsets`` (``Include/internal/pycore_debug_offsets.h``): after the cookie, the
# version (``PY_VERSION_HEX``) and ``free_threaded``, groups of ``uint64_t``.  A minor version keeps its
# shape (CPython only appends groups across minors); the values in it are what a point release may move,
# and those are read from the target.  3.13's is 352 bytes up to ``code_object`` (the part read), 3.14's
# 760 and 3.15's 888 (the DWARF of Debian's 3.14.10 and 3.15.2: ``ptype /o struct _Py_DebugOffsets``;
# the groups after ``unicode_object``/``gc`` are not read and not listed).
_G = Tuple[Tuple[str, Tuple[str, ...]], ...]
_RUNTIME = ("runtime_state", ("size", "finalizing", "interpreters_head"))
_THREAD = ("thread_state", ("size", "prev", "next", "interp", "current_frame", "thread_id", "native_thread_id",
                            "datastack_chunk", "status"))
_CODE_313 = ("code_object", ("size", "filename", "name", "qualname", "linetable", "firstlineno", "argcount",
                             "localsplusnames", "localspluskinds", "co_code_adaptive"))
_OBJECTS = (("pyobject", ("size", "ob_type")), ("type_object", ("size", "tp_name", "tp_repr", "tp_flags")),
            ("tuple_object", ("size", "ob_item", "ob_size")), ("list_object", ("size", "ob_item", "ob_size")))
_SET = (("set_object", ("size", "used", "table", "mask")),)
_VALUES = (("dict_object", ("size", "ma_keys", "ma_values")), ("float_object", ("size", "ob_fval")),
           ("long_object", ("size", "lv_tag", "ob_digit")), ("bytes_object", ("size", "ob_size", "ob_sval")),
           ("unicode_object", ("size", "state", "length", "asciiobject_size")), ("gc", ("size", "collecting")))
_INTERP_314 = ("interpreter_state", ("size", "id", "next", "threads_head", "threads_main", "gc", "imports_modules",
                                     "sysdict", "builtins", "ceval_gil", "gil_runtime_state",
                                     "gil_runtime_state_enabled", "gil_runtime_state_locked",
                                     "gil_runtime_state_holder", "code_object_generation", "tlbc_generation"))
_FRAME_314 = ("interpreter_frame", ("size", "previous", "executable", "instr_ptr", "localsplus", "owner",
                                    "stackpointer", "tlbc_index"))
_CODE_314 = ("code_object", _CODE_313[1] + ("co_tlbc",))
_THREAD_315 = ("thread_state", ("size", "prev", "next", "interp", "current_frame", "base_frame",
                                "last_profiled_frame", "last_profiled_frame_seq", "thread_id", "native_thread_id",
                                "datastack_chunk", "status", "holds_gil", "gil_requested", "current_exception",
                                "exc_state", "exc_value"))
_OBJECTS_315 = (("pyobject", ("size", "ob_type")),
                ("type_object", ("size", "tp_name", "tp_repr", "tp_flags", "tp_basicsize", "tp_dictoffset")),
                ("heap_type_object", ("size", "ht_cached_keys")),
                ("tuple_object", ("size", "ob_item", "ob_size")), ("list_object", ("size", "ob_item", "ob_size")))
_VALUES_315 = _VALUES[:4] + (
    ("unicode_object", ("size", "state", "length", "asciiobject_size", "compactunicodeobject_size")),
    ("gc", ("size", "collecting", "frame", "generation_stats_size", "generation_stats")))
DEBUG_OFFSETS_SHAPES: Dict[Tuple[int, int], _G] = {
    (3, 13): (_RUNTIME,
              ("interpreter_state", ("size", "id", "next", "threads_head", "gc", "imports_modules", "sysdict",
                                     "builtins", "ceval_gil", "gil_runtime_state", "gil_runtime_state_enabled",
                                     "gil_runtime_state_locked", "gil_runtime_state_holder")),
              _THREAD,
              ("interpreter_frame", ("size", "previous", "executable", "instr_ptr", "localsplus", "owner")),
              _CODE_313),
    (3, 14): (_RUNTIME, _INTERP_314, _THREAD, _FRAME_314, _CODE_314) + _OBJECTS + _SET + _VALUES,
    (3, 15): (_RUNTIME, _INTERP_314, _THREAD_315, _FRAME_314, _CODE_314) + _OBJECTS_315 + _SET + _VALUES_315,
}
DEBUG_OFFSETS_MAX = 4096  # bytes read from the start of _PyRuntime: more than any shape needs


def debug_offsets_version(blob: bytes) -> Optional[Tuple[int, int, bool]]:
    """(major, minor, free_threaded) from the head of ``_PyRuntime``; None without the ``xdebugpy`` cookie."""
    import struct

    if len(blob) < 24 or blob[:8] != DEBUG_OFFSETS_COOKIE:
        return None
    version, free_threaded = struct.unpack_from("<QQ", blob, 8)
    return (version >> 24) & 0xFF, (version >> 16) & 0xFF, bool(free_threaded)


def parse_debug_offsets(blob: bytes, shape: _G) -> Optional[Dict[str, int]]:
    """``{"group.field": value}`` of a ``_Py_DebugOffsets`` read with ``shape``; None when the blob is too
    short or the values do not fit the shape (each offset inside its group's ``size``; fields named
    ``*size`` are sizes, not offsets; a PyObject of 16 bytes with ``ob_type`` at 8): a wrong shape gives
    sizes and offsets that break these."""
    import struct

    count = sum(len(fields) for _, fields in shape)
    if len(blob) < 24 + 8 * count:
        return None
    values = struct.unpack_from("<%dQ" % count, blob, 24)
    out: Dict[str, int] = {}
    i = 0
    for group, fields in shape:
        for field in fields:
            out[group + "." + field] = values[i]
            i += 1
    for group, fields in shape:
        size = out.get(group + ".size")
        if size is None:
            continue
        if not 0 < size < 1 << 20:
            return None
        if any(out[group + "." + field] >= size for field in fields if not field.endswith("size")):
            return None
    if "pyobject.size" in out and (out["pyobject.size"], out["pyobject.ob_type"]) != (16, 8):
        return None
    return out


def layout_from_offsets(version: Tuple[int, int], o: Dict[str, int]) -> Layout:
    """A Layout from published offsets (``parse_debug_offsets``); what they do not publish is derived.

    Derived, with the reason each holds (``tests/integration/test_pylayout.py`` checks every one against
    the DWARF of the real 3.13, 3.14 and 3.15 builds):

    * ``co_flags``, ``co_argcount``, ``co_posonlyargcount``, ``co_kwonlyargcount`` are consecutive ints in
      ``PyCodeObject`` since 3.11: flags = argcount - 4, kwonlyargcount = argcount + 8.
    * ``PyHeapTypeObject`` is the ``PyTypeObject`` (its size published from 3.14) followed by the method
      suites (async 4, number 36, mapping 3, sequence 10, buffer 2 pointers) and ``ht_name``, ``ht_slots``,
      ``ht_qualname``: ``ht_cached_keys`` is 58 pointers after it.  ``ObjectReader`` checks it at run time
      on a real class (its ``ht_name`` must be the str its ``tp_name`` ends with).
    * ``PyDictObject``: ``ma_used`` is the field right after the object header (``ma_keys`` - 16 in every
      version); a compact str's data follows ``PyCompactUnicodeObject`` = ``PyASCIIObject`` + utf8_length +
      utf8 (16 bytes).
    * 3.13 publishes neither the type's size nor ``gc.collecting``: its DWARF values are used.
    """
    def at(name: str, default: Optional[int] = None) -> int:
        return _published(o, name, default)

    extra = _code_and_heaptype(o)
    values, collecting = _object_fields(o)
    gil = at("interpreter_state.gil_runtime_state")
    return Layout(
        version=version, chain="cstack_shim", interp_gil=at("interpreter_state.ceval_gil"),
        gil_locked=at("interpreter_state.gil_runtime_state_locked") - gil,
        gil_last_holder=at("interpreter_state.gil_runtime_state_holder") - gil,
        interp_gc_collecting=at("interpreter_state.gc") + collecting,
        runtime_interpreters_head=at("runtime_state.interpreters_head"), interp_next=at("interpreter_state.next"),
        interp_threads_head=at("interpreter_state.threads_head"),
        tstate_next=at("thread_state.next"), tstate_thread_id=at("thread_state.thread_id"),
        tstate_native_thread_id=at("thread_state.native_thread_id"), tstate_frame=at("thread_state.current_frame"),
        tstate_base_frame=o.get("thread_state.base_frame"), cframe_current_frame=None,
        frame_previous=at("interpreter_frame.previous"), frame_code=at("interpreter_frame.executable"),
        frame_instr=at("interpreter_frame.instr_ptr"), frame_is_entry=None,
        frame_owner=at("interpreter_frame.owner"),
        code_filename=at("code_object.filename"), code_name=at("code_object.name"),
        code_qualname=at("code_object.qualname"), code_firstlineno=at("code_object.firstlineno"),
        code_linetable=at("code_object.linetable"), code_code=at("code_object.co_code_adaptive"),
        frame_localsplus=at("interpreter_frame.localsplus"), code_localsplusnames=at("code_object.localsplusnames"),
        long_lv_tag=True, dict_values_offset=8, interp_modules=at("interpreter_state.imports_modules"),
        runtime_finalizing=at("runtime_state.finalizing"), **values, **extra,  # type: ignore[arg-type]
    )


def _published(o: Dict[str, int], name: str, default: Optional[int] = None) -> int:
    """The published offset ``name`` (``default`` where it is not published); there must be one."""
    value = o.get(name, default)
    assert value is not None, name
    return value


def _code_and_heaptype(o: Dict[str, int]) -> Dict[str, int]:
    """The code object's flags and argument counts, and the heap type's ``ht_cached_keys``, derived where
    not published (``layout_from_offsets``); 3.13's DWARF values where nothing says."""
    extra = dict(_UNPUBLISHED_313)
    argcount = _published(o, "code_object.argcount")
    extra.update(code_argcount=argcount, code_flags=argcount - 4, code_kwonlyargcount=argcount + 8)
    if "heap_type_object.ht_cached_keys" in o:  # published from 3.15
        extra["heaptype_cached_keys"] = o["heap_type_object.ht_cached_keys"]
    elif "type_object.size" in o:
        extra["heaptype_cached_keys"] = o["type_object.size"] + 58 * 8
    return extra


def _object_fields(o: Dict[str, int]) -> Tuple[Dict[str, object], int]:
    """The object layouts' fields (type, tuple, list, dict, float, bytes, str) where the offsets publish them,
    and the offset of ``collecting`` in the GC state (``layout_from_offsets``)."""

    def at(name: str, default: Optional[int] = None) -> int:
        """The published offset ``name`` of ``o``."""
        return _published(o, name, default)

    values: Dict[str, object] = {}
    if "pyobject.ob_type" in o:
        ascii_size = at("unicode_object.asciiobject_size")
        values.update(
            ob_type=at("pyobject.ob_type"), type_name=at("type_object.tp_name"), type_flags=at("type_object.tp_flags"),
            tuple_items=at("tuple_object.ob_item"), tuple_size=at("tuple_object.ob_size"),
            list_items=at("list_object.ob_item"), dict_keys=at("dict_object.ma_keys"),
            dict_values=at("dict_object.ma_values"), dict_used=at("dict_object.ma_keys") - 16,
            float_value=at("float_object.ob_fval"), bytes_size=at("bytes_object.ob_size"),
            bytes_sval=at("bytes_object.ob_sval"), unicode_state=at("unicode_object.state"),
            unicode_length=at("unicode_object.length"), unicode_ascii_size=ascii_size,
            unicode_compact_size=o.get("unicode_object.compactunicodeobject_size", ascii_size + 16),
        )
        for name, field in (("type_basicsize", "tp_basicsize"), ("type_dictoffset", "tp_dictoffset")):
            if "type_object." + field in o:  # published from 3.15
                values[name] = o["type_object." + field]
        collecting = at("gc.collecting")
    else:
        values.update(unicode_ascii_size=40, unicode_compact_size=56)
        collecting = GC_COLLECTING
    return values, collecting


class UnsupportedLayout(ValueError):
    """The head of ``_PyRuntime`` names a build tfnative cannot read (free-threaded, or an unknown shape)."""


def debug_offsets_layout(blob: bytes) -> Optional[Layout]:
    """A Layout from the head of ``_PyRuntime`` (3.13+): None without the cookie (older versions).

    The shape is the one of the version the head names; a version newer than any known shape is tried
    with the known shapes, newest first, and read with the first whose values fit (see
    ``parse_debug_offsets``): CPython appends to the struct, so a newer minor often still fits.
    Raises UnsupportedLayout for a free-threaded build or when no shape fits.
    """
    head = debug_offsets_version(blob)
    if head is None:
        return None
    major, minor, free_threaded = head
    if free_threaded:
        raise UnsupportedLayout("Python %d.%d is a free-threaded build (no GIL): not supported" % (major, minor))
    if (major, minor) in DEBUG_OFFSETS_SHAPES:
        candidates = [DEBUG_OFFSETS_SHAPES[(major, minor)]]
    else:
        candidates = [DEBUG_OFFSETS_SHAPES[v] for v in sorted(DEBUG_OFFSETS_SHAPES, reverse=True)
                      if v < (major, minor)]
    for shape in candidates:
        offsets = parse_debug_offsets(blob, shape)
        if offsets is not None:
            return layout_from_offsets((major, minor), offsets)
    raise UnsupportedLayout("Python %d.%d: its _Py_DebugOffsets does not have a shape tfnative knows"
                            % (major, minor))
