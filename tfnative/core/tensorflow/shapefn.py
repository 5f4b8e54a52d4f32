"""What an op's shape function saw, read from its ``InferenceContext`` in memory (issue #45): the op's type,
node name and attributes, each input's shape (known and unknown dims, or an unknown rank) and the constant input
tensors it was given.  A shape function runs while a graph is built (``ShapeRefiner::RunShapeFn``: a
``tf.function`` traced) with no kernel and no ``OpKernelContext``: a crash there has only this to read.

Nothing here comes from a table of versions: the context is found among the words of the ``InferenceContext::
Run`` frame (its callee-saved registers, its caller's, its stack) and each link is checked before it is trusted.
What TensorFlow's headers say (``tensorflow/core/framework/shape_inference.h``, ``node_def_util.h``, TF 2.16 to
2.22):

* **the context**: ``InferenceContext`` has no vtable; it begins with its ``ShapeManager`` (two
  ``std::vector<std::unique_ptr<...>>``: the shapes and dims it owns), then ``std::vector<ShapeHandle> inputs_``
  and ``std::vector<const Tensor*> input_tensors_`` (null-padded to as many as ``inputs_``).  Further on,
  ``const int graph_def_version_`` then ``AttrSlice attrs_`` ``{const NodeDef* ndef_; const AttrValueMap*
  attrs_}``.  The two vectors are found as two adjacent vector triples (begin <= end <= capacity) of as many
  elements, every ``inputs_`` element a shape and every non-null tensor a tensor (``kernelinputs.InputsReader``'s
  checks); the NodeDef as the first word after them that points to one (below) and is followed by a null
  word, the word before it holding a ``graph_def_version_`` in (0, 2^20).
* **a shape** (``Shape``): ``{const int32 rank_; const std::vector<DimensionHandle> dims_}``, rank -1 for an
  unknown rank (then no dims), else as many dims as the rank; a ``Dimension`` is ``{const int64 value_}``, -1
  for an unknown dim.
* **the NodeDef** (``node_def.pb.h``): its ``name_`` and ``op_`` ``ArenaStringPtr`` follow its attribute map,
  read by ``nodeattrs.AttrsReader`` (the map, its keys and values checked there); the op must be an op type name
  and the node's name printable; its ``input_`` names at least as many inputs as the context has (a NodeDef of
  another node, the graph's ``_SOURCE``, was found on TF 2.16 before this check).  ``input_`` is a
  ``RepeatedPtrField<std::string>``: in protobuf 6.x after the message's vptr, metadata, ``_has_bits_`` and
  ``_cached_size_``, at 24, its ``current_size_`` at 32; in 3.21 (no has-bits) at 16, ``{Arena*;
  current_size_}``: its size at 24.

A value that fails a check refuses the whole reading with its reason, never guessed.  Every walk is bounded;
only memory is read.  Standard library only: this also runs inside gdb's Python.
"""

from __future__ import annotations

import re
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..memory import aligned_pointer
from .kernelinputs import MAX_INPUTS, MAX_RANK, InputsReader, Unread
from .nodeattrs import AttrsReader
from .opkernel import CALLEE_SAVED, FrameContext, stack_words

CTX_WORDS = 48  # where inputs_, input_tensors_ and attrs_ may be in an InferenceContext
VECTORS_WORDS = 24  # where inputs_ may begin
NODEDEF_SCAN = 256  # where name_ may be in a NodeDef
MAX_CANDIDATES = 2048
_TYPE_RE = re.compile(rb"[A-Za-z_][A-Za-z0-9_>]*\Z")


class ShapeFnReader:
    """Reads ``InferenceContext`` objects of one process; the layout found once is tried first again, and
    every object is checked."""

    def __init__(self, reader: InputsReader) -> None:
        self.r = reader
        self.attrs = AttrsReader(reader)
        self.at: Optional[Tuple[int, int]] = None  # (inputs_ in the context, ndef_ in it), in words
        self.name_at: Optional[int] = None  # name_ in a NodeDef

    # -- a shape
    def shape(self, addr: int) -> Optional[List[Optional[int]]]:
        """The dims of the ``Shape`` at ``addr`` (None for an unknown dim), None for an unknown rank; raises
        Unread."""
        if not aligned_pointer(addr):
            raise Unread("a shape handle 0x%x that is no pointer" % addr)
        rank = struct.unpack("<i", self.r.bytes_at(addr, 4))[0]
        begin, end, cap = self.r.words(addr + 8, 3)
        if not (begin <= end <= cap and (end - begin) % 8 == 0):
            raise Unread("a shape's dims at 0x%x are no vector" % addr)
        n = (end - begin) // 8
        if rank == -1:
            if n:
                raise Unread("a shape of unknown rank with %d dims" % n)
            return None
        if not 0 <= rank <= MAX_RANK or n != rank:
            raise Unread("a shape of rank %d with %d dims" % (rank, n))
        dims: List[Optional[int]] = []
        for handle in (self.r.words(begin, n) if n else ()):
            if not aligned_pointer(handle):
                raise Unread("a dimension handle 0x%x that is no pointer" % handle)
            value = struct.unpack("<q", self.r.bytes_at(handle, 8))[0]
            if value < -1:
                raise Unread("a dimension of value %d" % value)
            dims.append(None if value == -1 else value)
        return dims

    # -- the NodeDef
    def node_def(self, ndef: int) -> Tuple[str, str, int]:
        """(the node's name, its op, where its ``name_`` is) of the NodeDef at ``ndef``; raises Unread."""
        if not aligned_pointer(ndef):
            raise Unread("a NodeDef pointer 0x%x" % ndef)
        offsets = ([self.name_at] if self.name_at is not None else []) + list(range(8, NODEDEF_SCAN, 8))
        for off in dict.fromkeys(offsets):
            try:
                name = self.attrs.arena_string(ndef + off)[1]
                op = self.attrs.arena_string(ndef + off + 8)[1]
                if not name or not all(32 <= b < 127 for b in name) or not _TYPE_RE.match(op) or len(op) > 256:
                    continue
                self.attrs.entries(ndef + off)  # the map right before name_: the check that this is a NodeDef
            except Unread:
                continue
            self.name_at = off
            return name.decode(), op.decode(), ndef + off
        raise Unread("no NodeDef's name, op and attribute map at 0x%x" % ndef)

    # -- the context
    def context(self, ctx: int) -> Dict[str, Any]:
        """``{"type", "name", "shape_fn": True, "inputs": [{"shape"[, "dtype", "values"]}...], "attrs"}`` of the
        ``InferenceContext`` at ``ctx``; raises Unread."""
        words = self.r.words(ctx, CTX_WORDS)
        tries = ([self.at] if self.at is not None else []) + [(i, None) for i in range(0, VECTORS_WORDS)]
        for i, ndef_at in tries:
            inputs = self._inputs(words, i)
            if inputs is None:
                continue
            for j in ([ndef_at] if ndef_at is not None else range(i + 6, CTX_WORDS - 1)):
                version = words[j - 1] & 0xFFFFFFFF
                if not aligned_pointer(words[j]) or words[j + 1] or not 0 < version < 1 << 20:
                    continue
                try:
                    name, op, name_field = self.node_def(words[j])
                    if self._input_size(words[j]) < len(inputs):
                        continue
                except Unread:
                    continue
                self.at = (i, j)
                return {"type": op, "name": name, "shape_fn": True, "inputs": inputs,
                        **self._attrs(name_field)}
        raise Unread("no InferenceContext at 0x%x" % ctx)

    def _input_size(self, ndef: int) -> int:
        """How many inputs the NodeDef at ``ndef`` names (its control inputs too): the size of its
        ``RepeatedPtrField<std::string> input_`` (module docstring), in the layout of the protobuf whose map was
        read (``AttrsReader.pb3``)."""
        return int(struct.unpack("<i", self.r.bytes_at(ndef + (24 if self.attrs.pb3 else 32), 4))[0])

    def _inputs(self, words: Tuple[int, ...], i: int) -> Optional[List[Dict[str, Any]]]:
        """The inputs of the two vectors ``inputs_`` and ``input_tensors_`` at word ``i``, None where they are
        not those."""
        (b1, e1, c1), (b2, e2, c2) = words[i:i + 3], words[i + 3:i + 6]
        if not (b1 <= e1 <= c1 and b2 <= e2 <= c2 and (e1 - b1) % 8 == 0 and e1 - b1 == e2 - b2):
            return None
        n = (e1 - b1) // 8
        if not 0 < n <= MAX_INPUTS or not aligned_pointer(b1) or not aligned_pointer(b2):
            return None
        try:
            shapes, tensors = self.r.words(b1, n), self.r.words(b2, n)
            out: List[Dict[str, Any]] = []
            for handle, tensor in zip(shapes, tensors):
                entry: Dict[str, Any] = {"shape": self.shape(handle)}
                if tensor:  # a constant input the shape function was given (InferenceContext::input_tensor)
                    entry.update(self.r.tensor(tensor, values=True), shape=entry["shape"])
                    entry["constant"] = True
                out.append(entry)
        except Unread:
            return None
        return out

    def _attrs(self, name_field: int) -> Dict[str, Any]:
        values: Dict[str, Any] = {}
        left: List[str] = []
        for key, addr in sorted(self.attrs.entries(name_field)):
            try:
                values[key.decode()] = self.attrs.value(addr)
            except Unread as exc:
                left.append("%s: %s" % (key.decode(), exc))
        out: Dict[str, Any] = {"attrs": values}
        if left:
            out["attrs_unread"] = "; ".join(left)
        return out


def candidates(reader: InputsReader, frame: FrameContext) -> List[int]:
    """Words where the ``InferenceContext*`` of a ``Run`` frame may be: ``rdi`` at its entry, the callee-saved
    registers of the frame and its caller, then the stack from the frame to its caller's."""
    out: List[int] = []
    if frame.level == 0 and frame.regs.get("rdi"):
        out.append(frame.regs["rdi"])
    for values in (frame.regs, frame.caller_regs):
        out += [values[r] for r in CALLEE_SAVED if values.get(r) is not None]
    return out + stack_words(reader.mem, frame.low, frame.high or frame.low + 4096)


def read_shape_fn(reader: InputsReader, frames: Sequence[FrameContext]) -> Dict[str, Any]:
    """What the shape function of the innermost ``InferenceContext::Run`` frame among ``frames`` saw
    (``ShapeFnReader.context``), or ``{"inputs_unread": why}``."""
    fn = ShapeFnReader(reader)
    seen = set()
    for frame in frames:
        for value in candidates(reader, frame)[:MAX_CANDIDATES]:
            if value in seen or not aligned_pointer(value):
                continue
            seen.add(value)
            try:
                return fn.context(value)
            except Unread:
                continue
    return {"inputs_unread": "no InferenceContext with its inputs' shapes and its NodeDef in the shape "
                             "function's frame"}
