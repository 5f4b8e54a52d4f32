"""The Python frame reader on interpreter frames built in fake memory (no process).

The code objects' line tables come from this interpreter's own ``compile()``, so the reader's line
numbers are checked against what CPython itself says (``dis``); the thread state, frames and code
objects are laid out with the layout of this interpreter's version.  Corrupt chains (a cycle, a frame
whose code pointer leads nowhere) keep the frames read before the fault and say where it stopped.
"""

from __future__ import annotations

import struct
import sys

import pytest

from tfnative.core.python.pyframes import PythonReader
from tfnative.core.python.pylayout import FRAME_OWNED_BY_CSTACK, LAYOUTS

from .fakemem import PyHeap, line_offset, train_code

VERSION = sys.version_info[:2]
pytestmark = pytest.mark.skipif(VERSION not in LAYOUTS or VERSION < (3, 11),
                                reason="interpreter frames of 3.11+ built for the running version")
L = LAYOUTS.get(VERSION)
PID_TID = 4242
class Interp(PyHeap):
    """One interpreter with one thread whose frames are given innermost first."""

    def __init__(self) -> None:
        super().__init__(L, size=1 << 17)
        self.runtime = self.alloc(8192)
        self.interp = self.alloc(8192)
        self.tstate = self.alloc(512)
        self.mem.u64(self.runtime + L.runtime_interpreters_head, self.interp)
        self.mem.u64(self.interp + L.interp_threads_head, self.tstate)
        self.mem.u64(self.tstate + L.tstate_native_thread_id, PID_TID)
        self.mem.u64(self.tstate + L.tstate_thread_id, 0x7F00)

    def code(self, code) -> int:  # noqa: ANN001 - a real code object of this interpreter
        at = self.obj("code", L.code_code + len(code.co_code) + 16)
        self.mem.u64(at + L.code_filename, self.str(code.co_filename))
        self.mem.u64(at + L.code_name, self.str(code.co_name))
        self.mem.u64(at + L.code_qualname, self.str(code.co_qualname))
        self.mem.write(at + L.code_firstlineno, struct.pack("<i", code.co_firstlineno))
        self.mem.u64(at + L.code_linetable, self.bytes(code.co_linetable))
        self.mem.write(at + L.code_code, code.co_code)
        return at

    def frames(self, chain) -> None:  # noqa: ANN001 - [(code address, byte offset)] innermost first
        made = [self.alloc(128) for _ in chain]
        for f, (code, offset) in zip(made, chain):
            self.mem.u64(f + L.frame_code, code)
            self.mem.u64(f + L.frame_instr, code + L.code_code + offset)
        for f, older in zip(made, made[1:]):
            self.mem.u64(f + L.frame_previous, older)
        if L.chain == "entry_flag":
            self.mem.write(made[-1] + L.frame_is_entry, b"\x01")
        else:  # the C stack's shim frame under the eval call's frames
            shim = self.alloc(128)
            self.mem.write(shim + L.frame_owner, bytes([FRAME_OWNED_BY_CSTACK]))
            self.mem.u64(made[-1] + L.frame_previous, shim)
        if L.cframe_current_frame is not None:
            cframe = self.alloc(64)
            self.mem.u64(self.tstate + L.tstate_frame, cframe)
            self.mem.u64(cframe + L.cframe_current_frame, made[0])
        else:
            self.mem.u64(self.tstate + L.tstate_frame, made[0])
        self.made = made

    def reader(self) -> PythonReader:
        return PythonReader(self.mem, L, self.runtime, code_type=self.type("code"), str_type=self.type("str"),
                            bytes_type=self.type("bytes"))


def _read(interp):
    reader = interp.reader()
    (thread,) = reader.thread_states()
    assert thread.native_id == PID_TID
    reader.read_frames(thread)
    return thread


def test_two_frames_of_one_eval_call_at_their_lines():
    i = Interp()
    inner, outer = train_code("inner"), train_code("outer")
    i.frames([(i.code(inner), line_offset(inner, 2)), (i.code(outer), line_offset(outer, 2))])
    thread = _read(i)
    assert thread.error is None
    assert [(f.function, f.file, f.line) for f in thread.frames] == [
        ("inner", "/app/train.py", inner.co_firstlineno + 2), ("outer", "/app/train.py", outer.co_firstlineno + 2)]
    assert len(thread.groups) == 1  # one _PyEval_EvalFrameDefault call ran both


def test_a_cycle_is_cut_and_said():
    i = Interp()
    inner, outer = train_code("inner"), train_code("outer")
    i.frames([(i.code(inner), line_offset(inner, 1)), (i.code(outer), line_offset(outer, 1))])
    i.mem.u64(i.made[1] + L.frame_previous, i.made[0])  # outer's caller is inner: a loop
    if L.chain == "entry_flag":
        i.mem.write(i.made[1] + L.frame_is_entry, b"\x00")
    thread = _read(i)
    assert [f.function for f in thread.frames] == ["inner", "outer"]
    assert "loops back" in thread.error


def test_an_unreadable_frame_keeps_the_ones_before_it():
    i = Interp()
    inner, outer = train_code("inner"), train_code("outer")
    i.frames([(i.code(inner), line_offset(inner, 1)), (i.code(outer), line_offset(outer, 1))])
    i.mem.u64(i.made[1] + L.frame_previous, 0xDEAD0000)  # the chain leads into unmapped memory
    thread = _read(i)
    assert [f.function for f in thread.frames] == ["inner", "outer"]
    assert thread.error and "cannot read Python frame 2" in thread.error


def test_unnamed_eval_frames_found_by_their_entry_frames():
    """Two eval calls whose C frames no symbol names: each entry frame lies in one frame's stack span."""
    from tfnative.core.model import NativeFrame
    from tfnative.core.threads import name_eval_frames

    def nf(name, lib="python3.14"):
        return NativeFrame(function=name, library=lib)

    native = [nf("sleep", "libc.so.6"), nf("??"), nf("??"), nf("cfunction_call"), nf("??"), nf("main")]
    stack = [0x1000, 0x1100, 0x1200, 0x1800, 0x1900, 0x2000]
    assert name_eval_frames(native, [0x1250, 0x1950], stack) == 2
    assert [f.function for f in native] == ["sleep", "??", "_PyEval_EvalFrameDefault", "cfunction_call",
                                            "_PyEval_EvalFrameDefault", "main"]
    # an entry frame no frame spans, two in one frame, or a frame of another library: nothing is named
    for entries, lib in (([0x1250, 0x5000], "python3.14"), ([0x1250, 0x1260], "python3.14"),
                         ([0x1250], "libfoo.so")):
        native = [nf("??", lib), nf("??", lib), nf("main")]
        assert name_eval_frames(native, entries, [0x1000, 0x1200, 0x1300]) == 0
        assert [f.function for f in native] == ["??", "??", "main"]
