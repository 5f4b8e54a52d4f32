"""Per-version memory layouts of the CPython structures we read (pure).

Offsets are for 64-bit release builds of CPython (not ``--with-pydebug``), the
same for every patch release of a minor version.  They were read from the
DWARF of pyenv's builds with ``ptype /o`` and are checked against it by
``tests/test_pylayout.py``.  On 3.13+ the interpreter publishes most of them in
``_PyRuntime.debug_offsets`` (``_Py_DebugOffsets``), which we read instead.

Frame chains come in three shapes:

* ``"frameobject"`` (3.10): ``tstate->frame`` is a ``PyFrameObject`` linked by
  ``f_back``; each ``_PyEval_EvalFrameDefault`` call evaluates exactly one.
* ``"entry_flag"`` (3.11): ``_PyInterpreterFrame``\\ s linked by ``previous``;
  the oldest frame of each ``_PyEval_EvalFrameDefault`` call has ``is_entry``.
* ``"cstack_shim"`` (3.12, 3.13): each ``_PyEval_EvalFrameDefault`` call first
  pushes a shim frame whose ``owner`` is ``FRAME_OWNED_BY_CSTACK``; the frames
  it runs sit above that shim in the chain.
"""

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

FRAME_OWNED_BY_CSTACK = 3


@dataclass(frozen=True)
class Layout:
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
GC_COLLECTING = 200  # offsetof(struct _gc_runtime_state, collecting) in 3.10-3.13


def debug_offsets_layout(blob: bytes) -> Optional[Layout]:
    """Build a Layout from the first 352 bytes of ``_PyRuntime`` (3.13+).

    Returns None when the cookie is absent or the version is not one whose
    ``_Py_DebugOffsets`` shape we know.
    """
    import struct

    if len(blob) < 352 or blob[:8] != DEBUG_OFFSETS_COOKIE:
        return None
    q = struct.unpack_from("<43Q", blob, 8)
    version = q[0]
    major, minor = (version >> 24) & 0xFF, (version >> 16) & 0xFF
    if (major, minor) != (3, 13):
        return None
    free_threaded = q[1]
    if free_threaded:
        return None

    def at(off: int) -> int:
        return q[(off - 8) // 8]

    # interpreter_state: gc at 80, imports_modules at 88, ceval_gil (the pointer) at 112, then the GIL
    # struct and its fields (gil_runtime_state 120, locked 136, holder 144); "collecting" is not published in 3.13.
    return Layout(
        version=(3, 13), chain="cstack_shim", interp_gil=at(112),
        gil_locked=at(136) - at(120), gil_last_holder=at(144) - at(120),
        interp_gc_collecting=at(80) + GC_COLLECTING,
        runtime_interpreters_head=at(40), interp_next=at(64), interp_threads_head=at(72),
        tstate_next=at(168), tstate_thread_id=at(192), tstate_native_thread_id=at(200),
        tstate_frame=at(184), cframe_current_frame=None,
        frame_previous=at(232), frame_code=at(240), frame_instr=at(248),
        frame_is_entry=None, frame_owner=at(264),
        code_filename=at(280), code_name=at(288), code_qualname=at(296),
        code_firstlineno=at(312), code_linetable=at(304), code_code=at(344),
        unicode_ascii_size=40, unicode_compact_size=56,
        frame_localsplus=at(256), code_localsplusnames=at(328), long_lv_tag=True, dict_values_offset=8,
        interp_modules=at(88), runtime_finalizing=at(32), **_UNPUBLISHED_313,
    )
