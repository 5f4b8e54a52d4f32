"""Layouts from the head of real ``_PyRuntime``\\ s (``_Py_DebugOffsets``), and frames read with them.

``data/pyruntime-3.14.10.head`` and ``data/pyruntime-3.15.2.head`` are the first 1024 bytes of
``_PyRuntime`` in Debian unstable's python3.14 and python3.15 (``.ci/pythons``), dumped from the running
interpreters (``tests/integration/test_pylayout.runtime_head``); the ``.json`` beside each holds the offsets
gdb computes from that build's DWARF (its ``-dbg`` file), the reference every layout field is checked
against.  The frame tests lay out 3.14/3.15 frames in fake memory with those layouts: tagged stack
references, entry frames owned by the interpreter, 3.15's bottom frame.
"""

from __future__ import annotations

import json
import os
import struct

import pytest

from tfnative.core.python.pyframes import PythonReader
from tfnative.core.python.pylayout import DEBUG_OFFSETS_SHAPES, UnsupportedLayout, debug_offsets_layout

from .fakemem import PyHeap, line_offset, train_code

DATA = os.path.join(os.path.dirname(__file__), "data")
BUILDS = {(3, 14): "3.14.10", (3, 15): "3.15.2"}


def _head(version):
    with open(os.path.join(DATA, "pyruntime-%s.head" % BUILDS[version]), "rb") as f:
        return f.read()


def _dwarf(version):
    with open(os.path.join(DATA, "pyruntime-%s.json" % BUILDS[version])) as f:
        return json.load(f)["dwarf"]


def _field_at(version, name):
    """Byte position of ``group.field`` in the head, from the shape (cookie, version, free_threaded first)."""
    pos = 24
    for group, fields in DEBUG_OFFSETS_SHAPES[version]:
        for field in fields:
            if group + "." + field == name:
                return pos
            pos += 8
    raise AssertionError(name)


def _with(blob, pos, value):
    return blob[:pos] + struct.pack("<Q", value) + blob[pos + 8:]


@pytest.mark.parametrize("version", sorted(BUILDS), ids=lambda v: "%d.%d" % v)
def test_layout_of_a_real_runtime_is_the_dwarfs(version):
    layout = debug_offsets_layout(_head(version))
    assert layout is not None and layout.version == version and layout.chain == "cstack_shim"
    dwarf = _dwarf(version)
    assert {name: getattr(layout, name) for name in dwarf} == dwarf


@pytest.mark.parametrize("version", sorted(BUILDS), ids=lambda v: "%d.%d" % v)
def test_a_point_release_that_moves_a_field_is_followed(version):
    """What the head says wins: a field moved by a point release (as py-spy's issue 852) is read there."""
    blob = _head(version)
    moved = _with(blob, _field_at(version, "thread_state.native_thread_id"), 1000)
    moved = _with(moved, _field_at(version, "thread_state.size"), 4096)
    assert debug_offsets_layout(moved).tstate_native_thread_id == 1000
    assert debug_offsets_layout(blob).tstate_native_thread_id == _dwarf(version)["tstate_native_thread_id"]


def test_a_newer_minor_is_read_with_the_newest_shape_that_fits():
    blob = _head((3, 15))
    newer = _with(blob, 8, 0x031000A0)  # 3.16.0a0, no shape of its own
    layout = debug_offsets_layout(newer)
    assert layout.version == (3, 16)
    assert layout.tstate_native_thread_id == _dwarf((3, 15))["tstate_native_thread_id"]


@pytest.mark.parametrize("real, claimed", [((3, 14), (3, 15)), ((3, 15), (3, 14))])
def test_a_head_read_with_the_wrong_shape_is_refused(real, claimed):
    """The values of one version's head do not fit another's shape (sizes and offsets stop adding up)."""
    blob = _with(_head(real), 8, (3 << 24) | (claimed[1] << 16) | 0xF0)
    with pytest.raises(UnsupportedLayout, match="shape"):
        debug_offsets_layout(blob)


def test_free_threaded_and_cut_heads_are_refused_and_no_cookie_is_none():
    blob = _head((3, 14))
    with pytest.raises(UnsupportedLayout, match="free-threaded"):
        debug_offsets_layout(_with(blob, 16, 1))
    with pytest.raises(UnsupportedLayout):
        debug_offsets_layout(blob[:400])
    assert debug_offsets_layout(b"\0" * 1024) is None


# -- frames of 3.14 / 3.15, laid out with those layouts ------------------------------------------------------

TID = 4242


class Interp(PyHeap):
    """One thread of a 3.14/3.15 interpreter whose frames are written as those versions write them."""

    def __init__(self, layout) -> None:  # noqa: ANN001
        super().__init__(layout, size=1 << 17)
        L = layout
        self.runtime, self.interp, self.tstate = self.alloc(8192), self.alloc(8192), self.alloc(2048)
        self.mem.u64(self.runtime + L.runtime_interpreters_head, self.interp)
        self.mem.u64(self.interp + L.interp_threads_head, self.tstate)
        self.mem.u64(self.tstate + L.tstate_native_thread_id, TID)

    def code(self, code, names=()) -> int:  # noqa: ANN001
        L = self.L
        at = self.obj("code", L.code_code + len(code.co_code) + 16)
        self.mem.u64(at + L.code_filename, self.str(code.co_filename))
        self.mem.u64(at + L.code_name, self.str(code.co_name))
        self.mem.u64(at + L.code_qualname, self.str(code.co_qualname))
        self.mem.write(at + L.code_firstlineno, struct.pack("<i", code.co_firstlineno))
        self.mem.write(at + L.code_argcount, struct.pack("<i", code.co_argcount))
        self.mem.u64(at + L.code_linetable, self.bytes(code.co_linetable))
        self.mem.write(at + L.code_code, code.co_code)
        tup = self.obj("tuple", L.tuple_items + 8 * len(names))
        self.mem.write(tup + L.tuple_size, struct.pack("<q", len(names)))
        for i, name in enumerate(names):
            self.mem.u64(tup + L.tuple_items + 8 * i, self.str(name))
        self.mem.u64(at + L.code_localsplusnames, tup)
        return at

    def frame(self, code, offset, previous, localsplus=()) -> int:  # noqa: ANN001
        L = self.L
        f = self.alloc(L.frame_localsplus + 8 * max(len(localsplus), 1))
        self.mem.u64(f + L.frame_code, code | 1)  # a _PyStackRef: Py_TAG_REFCNT set (a borrowed reference)
        self.mem.u64(f + L.frame_instr, code + L.code_code + offset)
        self.mem.u64(f + L.frame_previous, previous)
        for i, bits in enumerate(localsplus):
            self.mem.u64(f + L.frame_localsplus + 8 * i, bits)
        return f

    def entry(self, previous) -> int:  # noqa: ANN001
        """An eval call's entry frame: 3.14 and 3.15 mark it FRAME_OWNED_BY_INTERPRETER (3)."""
        f = self.alloc(128)
        self.mem.write(f + self.L.frame_owner, b"\x03")
        self.mem.u64(f + self.L.frame_previous, previous)
        return f

    def reader(self) -> PythonReader:
        reader = PythonReader(self.mem, self.L, self.runtime, code_type=self.type("code"),
                              str_type=self.type("str"), bytes_type=self.type("bytes"))
        reader.want_variables = True
        return reader


@pytest.mark.parametrize("version", sorted(BUILDS), ids=lambda v: "%d.%d" % v)
def test_frames_with_tagged_refs_in_two_eval_calls(version):
    """inner runs in a nested eval call (a C call between them): two groups; code pointers and locals are
    tagged stack references, a small int kept in its slot (Py_INT_TAG) is read as the int."""
    layout = debug_offsets_layout(_head(version))
    i = Interp(layout)
    inner, outer = train_code("inner"), train_code("outer")
    bottom = 0
    if layout.tstate_base_frame is not None:  # 3.15: the thread state's own bottom frame ends the chain
        bottom = i.entry(0)
        i.mem.u64(i.tstate + layout.tstate_base_frame, bottom)
    outer_at = i.frame(i.code(outer, ("x", "y")), line_offset(outer, 2), i.entry(bottom), ((3 << 2) | 3, 0))
    inner_at = i.frame(i.code(inner, ("a", "b")), line_offset(inner, 2), i.entry(outer_at),
                       ((3 << 2) | 3, i.str("four") | 1))
    i.mem.u64(i.tstate + layout.tstate_frame, inner_at)
    reader = i.reader()
    (thread,) = reader.thread_states()
    assert thread.native_id == TID
    reader.read_frames(thread)
    assert thread.error is None
    assert [[(f.function, f.line) for f in g] for g in thread.groups] == [
        [("inner", inner.co_firstlineno + 2)], [("outer", outer.co_firstlineno + 2)]]
    assert thread.groups[0][0].variables == [{"name": "a", "repr": "3", "arg": True},
                                             {"name": "b", "repr": "'four'", "arg": False}]
    assert thread.groups[1][0].variables == [{"name": "x", "repr": "3", "arg": False}]
