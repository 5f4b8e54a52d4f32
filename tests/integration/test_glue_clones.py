"""The interpreter's call glue is hidden under the names an LTO build gives it (Debian's CPython 3.14/3.15).

GCC's link-time optimizer renames the copies it makes of a static function (``cfunction_call.lto_priv.0``,
``_PyObject_MakeTpCall.constprop.1``, ``method_vectorcall.lto_priv.0``); those are the names frames of
Debian's stripped interpreter get from its ``-dbg`` file.  Read here from that real file (``.ci/pythons``'
root), not from a list: every function symbol there whose unsuffixed name is call glue is hidden too, and the
allocator (``_PyObject_Calloc``, which the ``_PyObject_Call`` prefix would take in) is not.
"""

from __future__ import annotations

import glob
import os
import re

import pytest

from tfnative.core import frameclass
from tfnative.core.binary.debugfiles import separate_debug_file
from tfnative.core.binary.elf import read_build_id
from tfnative.core.binary.symindex import ElfIndex
from tfnative.core.model import NativeFrame

CLONE = re.compile(r"\.(lto_priv|constprop|isra|part|cold)(\.\d+)?")


def interpreters() -> list:
    roots = os.path.join(os.environ.get("TFNATIVE_CACHE") or os.path.expanduser("~/.cache/tfnative"), "cpython")
    return sorted(glob.glob(os.path.join(roots, "3.1*", "usr", "bin", "python3.1[0-9]")))


def names_of(path: str) -> list:
    build_id = read_build_id(path)
    debug = separate_debug_file(path, build_id) if build_id else None
    if debug is None:
        pytest.skip("no debug file for %s" % path)
    with ElfIndex.open(debug) as idx:
        return sorted({idx.name_at(i) for i in range(len(idx))})


@pytest.mark.parametrize("python", interpreters() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no .ci/pythons interpreter in the cache (.ci/pythons provisions them)"))])
def test_lto_clones_of_call_glue_are_hidden(python):
    names = names_of(python)
    clones = [n for n in names if CLONE.search(n)]
    assert clones, "no GCC clone in %s's symbols: not an LTO build" % python
    frame = lambda name: NativeFrame(function=name, library=os.path.basename(python), address="0x1")  # noqa: E731
    glue_clones = [n for n in clones if frameclass.is_glue(frame(CLONE.split(n)[0]))]
    # the copies of the call path a Python-to-C call takes on every stack
    for base in ("cfunction_call", "_PyObject_MakeTpCall", "method_vectorcall"):
        assert [n for n in glue_clones if n.startswith(base + ".")], (base, clones[:40])
    assert [n for n in glue_clones if not frameclass.is_glue(frame(n))] == []
    assert not frameclass.is_glue(frame("_PyObject_Calloc"))
    assert "_PyObject_Calloc" in names or [n for n in names if n.startswith("_PyObject_Calloc.")]
    assert not [n for n in names if n.startswith("_PyObject_Calloc") and frameclass.is_glue(frame(n))]
