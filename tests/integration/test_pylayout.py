"""pylayout's offsets against the DWARF of each pyenv CPython, read by real gdb (``ptype /o``'s arithmetic).

Every offset tfnative reads CPython's structures with is checked here against
the interpreter's own debug info: a wrong one would show as a missing or
garbled Python frame only on that version.  The gdb run reads only the
library's DWARF (no process), well under a second per version.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import pytest

from tfnative.core.python.pylayout import LAYOUTS

from ..utils import pyenv_pythons

pytestmark = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")

COMMON = {
    "runtime_interpreters_head": "&((_PyRuntimeState*)0)->interpreters.head",
    "runtime_finalizing": "&((_PyRuntimeState*)0)->_finalizing",
    "interp_next": "&((PyInterpreterState*)0)->next",
    "tstate_next": "&((PyThreadState*)0)->next",
    "tstate_thread_id": "&((PyThreadState*)0)->thread_id",
    "code_filename": "&((PyCodeObject*)0)->co_filename",
    "code_name": "&((PyCodeObject*)0)->co_name",
    "code_firstlineno": "&((PyCodeObject*)0)->co_firstlineno",
    "code_linetable": "&((PyCodeObject*)0)->co_linetable",
    "bytes_size": "&((PyVarObject*)0)->ob_size",
    "bytes_sval": "&((PyBytesObject*)0)->ob_sval",
    "unicode_length": "&((PyASCIIObject*)0)->length",
    "unicode_state": "&((PyASCIIObject*)0)->state",
    "unicode_ascii_size": "sizeof(PyASCIIObject)",
    "unicode_compact_size": "sizeof(PyCompactUnicodeObject)",
    "ob_type": "&((PyObject*)0)->ob_type",
    "tuple_size": "&((PyVarObject*)0)->ob_size",
    "tuple_items": "&((PyTupleObject*)0)->ob_item",
    "func_code": "&((PyFunctionObject*)0)->func_code",
    "func_dict": "&((PyFunctionObject*)0)->func_dict",
    "dict_keys": "&((PyDictObject*)0)->ma_keys",
    "dict_values": "&((PyDictObject*)0)->ma_values",
    "module_dict": "&((PyModuleObject*)0)->md_dict",
    "type_name": "&((PyTypeObject*)0)->tp_name",
    "type_basicsize": "&((PyTypeObject*)0)->tp_basicsize",
    "type_flags": "&((PyTypeObject*)0)->tp_flags",
    "type_dictoffset": "&((PyTypeObject*)0)->tp_dictoffset",
    "heaptype_cached_keys": "&((PyHeapTypeObject*)0)->ht_cached_keys",
    "code_argcount": "&((PyCodeObject*)0)->co_argcount",
    "code_kwonlyargcount": "&((PyCodeObject*)0)->co_kwonlyargcount",
    "code_flags": "&((PyCodeObject*)0)->co_flags",
    "float_value": "&((PyFloatObject*)0)->ob_fval",
    "list_items": "&((PyListObject*)0)->ob_item",
    "dict_used": "&((PyDictObject*)0)->ma_used",
    "cell_ref": "&((PyCellObject*)0)->ob_ref",
}
IFRAME = "_PyInterpreterFrame"
PER_VERSION = {
    (3, 10): {
        "interp_threads_head": "&((PyInterpreterState*)0)->tstate_head",
        "tstate_frame": "&((PyThreadState*)0)->frame",
        "frame_previous": "&((PyFrameObject*)0)->f_back",
        "frame_code": "&((PyFrameObject*)0)->f_code",
        "frame_instr": "&((PyFrameObject*)0)->f_lasti",
        "frame_localsplus": "&((PyFrameObject*)0)->f_localsplus",
        "code_code": "&((PyCodeObject*)0)->co_code",
        "code_localsplusnames": "&((PyCodeObject*)0)->co_varnames",
    },
    (3, 11): {
        "interp_threads_head": "&((PyInterpreterState*)0)->threads.head",
        "tstate_native_thread_id": "&((PyThreadState*)0)->native_thread_id",
        "tstate_frame": "&((PyThreadState*)0)->cframe",
        "cframe_current_frame": "&((_PyCFrame*)0)->current_frame",
        "frame_previous": "&((%s*)0)->previous" % IFRAME,
        "frame_code": "&((%s*)0)->f_code" % IFRAME,
        "frame_instr": "&((%s*)0)->prev_instr" % IFRAME,
        "frame_is_entry": "&((%s*)0)->is_entry" % IFRAME,
        "frame_owner": "&((%s*)0)->owner" % IFRAME,
        "frame_localsplus": "&((%s*)0)->localsplus" % IFRAME,
        "code_qualname": "&((PyCodeObject*)0)->co_qualname",
        "code_code": "&((PyCodeObject*)0)->co_code_adaptive",
        "code_localsplusnames": "&((PyCodeObject*)0)->co_localsplusnames",
    },
}
PER_VERSION[(3, 12)] = dict(PER_VERSION[(3, 11)])
del PER_VERSION[(3, 12)]["frame_is_entry"]
PER_VERSION[(3, 13)] = dict(PER_VERSION[(3, 12)], tstate_frame="&((PyThreadState*)0)->current_frame",
                            frame_code="&((%s*)0)->f_executable" % IFRAME,
                            frame_instr="&((%s*)0)->instr_ptr" % IFRAME)
del PER_VERSION[(3, 13)]["cframe_current_frame"]
GIL = {"gil_last_holder": "&((struct _gil_runtime_state*)0)->last_holder",
       "gil_locked": "&((struct _gil_runtime_state*)0)->locked"}
for _v in PER_VERSION:
    PER_VERSION[_v].update(GIL)
    if _v < (3, 12):
        PER_VERSION[_v]["runtime_gil"] = "&((_PyRuntimeState*)0)->ceval.gil"
    else:
        PER_VERSION[_v]["interp_gil"] = "&((PyInterpreterState*)0)->ceval.gil"
    PER_VERSION[_v]["interp_gc_collecting"] = "&((PyInterpreterState*)0)->gc.collecting"
    PER_VERSION[_v]["interp_modules"] = "&((PyInterpreterState*)0)->%s" % ("modules" if _v < (3, 12)
                                                                          else "imports.modules")

EVAL = r"""
import gdb, json
out = {}
for name, expr in json.loads(%r).items():
    try:
        out[name] = int(gdb.parse_and_eval("(long)(%%s)" %% expr))
    except gdb.error as exc:
        out[name] = "error: %%s" %% exc
print("@@" + json.dumps(out))
"""


def _library(python: str) -> str:
    """The file with the interpreter's DWARF: libpython when the build is shared, else the executable."""
    prefix = os.path.dirname(os.path.dirname(python))
    libs = sorted(glob.glob(os.path.join(prefix, "lib", "libpython3.*.so.1.0")))
    return libs[0] if libs else python


@pytest.mark.parametrize("version", sorted(PER_VERSION), ids=lambda v: "%d.%d" % v)
def test_offsets_match_the_interpreters_dwarf(version, tmp_path):
    python = pyenv_pythons().get("%d.%d" % version)
    if python is None:
        pytest.skip("no pyenv CPython %d.%d here" % version)
    exprs = dict(COMMON, **PER_VERSION[version])
    prog = tmp_path / "offsets.py"
    prog.write_text(EVAL % json.dumps(exprs))
    r = subprocess.run(["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled off", _library(python),
                        "-x", str(prog)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("@@")]
    assert lines, r.stdout + r.stderr
    dwarf = json.loads(lines[0][2:])
    layout = LAYOUTS[version]
    ours = {name: getattr(layout, name) for name in exprs}
    assert ours == dwarf
    # every offset the layout defines for this version is checked, none is left out
    unchecked = {f for f, v in layout._asdict().items()
                 if isinstance(v, int) and not isinstance(v, bool) and f not in exprs and f != "dict_values_offset"}
    assert unchecked == set()


HEAD = r"""
import ctypes, sys
at = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
sys.stdout.write(ctypes.string_at(at, int(sys.argv[1])).hex())
"""
PER_VERSION_PUBLISHED = {
    (3, 13): PER_VERSION[(3, 13)],
    (3, 14): PER_VERSION[(3, 13)],
    (3, 15): dict(PER_VERSION[(3, 13)], tstate_base_frame="&((PyThreadState*)0)->base_frame"),
}


def runtime_head(python: str, size: int = 1024) -> bytes:
    """The first ``size`` bytes of ``_PyRuntime`` in a running ``python`` (it reads its own memory)."""
    r = subprocess.run([python, "-I", "-c", HEAD, str(size)], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return bytes.fromhex(r.stdout)


def dwarf_offsets(dwarf_file: str, exprs: dict, tmp_path) -> dict:
    prog = tmp_path / "offsets.py"
    prog.write_text(EVAL % json.dumps(exprs))
    r = subprocess.run(["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled off", dwarf_file,
                        "-x", str(prog)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("@@")]
    assert lines, r.stdout + r.stderr
    return json.loads(lines[0][2:])


def _debug_python(version):
    """(interpreter, file with its DWARF) for ``version``: pyenv's (DWARF in it), or .ci/pythons' Debian
    build (stripped; DWARF in the -dbg file under its own root)."""
    from tfnative.core.binary.debugfiles import separate_debug_file
    from tfnative.core.binary.symindex import ElfIndex

    key = "%d.%d" % version
    python = pyenv_pythons().get(key)
    if python is not None:
        return python, _library(python)
    cache = os.environ.get("TFNATIVE_CACHE") or os.path.expanduser("~/.cache/tfnative")
    python = os.path.join(cache, "cpython", key, "usr", "bin", "python" + key)
    if not os.access(python, os.X_OK):
        pytest.skip("no CPython %s here (pyenv, or .ci/pythons %s)" % (key, key))
    debug = separate_debug_file(python, ElfIndex.open(python).build_id or "")
    if debug is None:
        pytest.skip("no debug file for %s" % python)
    return python, debug


@pytest.mark.parametrize("version", sorted(PER_VERSION_PUBLISHED), ids=lambda v: "%d.%d" % v)
def test_published_offsets_match_the_dwarf(version, tmp_path):
    """The layout tfnative builds from a live interpreter's ``_Py_DebugOffsets`` (and derives where it
    publishes nothing) is, field for field, the one the interpreter's own DWARF gives."""
    from tfnative.core.python.pylayout import debug_offsets_layout

    python, dwarf_file = _debug_python(version)
    layout = debug_offsets_layout(runtime_head(python))
    assert layout is not None and layout.version == version
    exprs = dict(COMMON, **PER_VERSION_PUBLISHED[version])
    dwarf = dwarf_offsets(dwarf_file, exprs, tmp_path)
    assert {name: getattr(layout, name) for name in exprs} == dwarf
    unchecked = {f for f, v in layout._asdict().items()
                 if isinstance(v, int) and not isinstance(v, bool) and f not in exprs and f != "dict_values_offset"}
    assert unchecked == set()
