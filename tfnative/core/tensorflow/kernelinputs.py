"""The inputs of the op a kernel frame runs, read from memory (issue #45): each input tensor's dtype, shape and,
for a small one, its values.

Nothing here comes from a table of TensorFlow versions: each link of the chain
is found in the memory in front of us and checked before it is trusted, the
way ``opkernel.py`` finds ``name_view_``.  What TensorFlow's headers say
(``tensorflow/core/framework/*.h``, TF 2.16 to 2.22):

* **the context** (``op_kernel.h``): a kernel runs ``Compute(OpKernelContext*
  ctx)``; ``OpKernelContext`` is polymorphic (vptr) and holds ``Params*
  params_`` after its ``absl::Status``; ``Params`` holds ``OpKernel*
  op_kernel``.  A context is a word of the kernel frame's registers or stack
  (or its caller's, the device's ``Compute(OpKernel*, OpKernelContext*)``)
  pointing to an object with a vptr, one of whose first words points to a
  ``Params`` holding the ``OpKernel*`` that ``opkernel.py`` found: that
  equality is the check.
* **the inputs** (``op_kernel.h``): ``Params::inputs``, after ``op_kernel``,
  is an ``absl::Span<const TensorValue>`` (pointer, length) in recent
  releases, a ``const gtl::InlinedVector<TensorValue, 4>*`` in older ones;
  both are tried.  absl's ``InlinedVector`` (``absl/container/internal/
  inlined_vector.h``) is a word ``size << 1 | allocated``, then either the
  inline elements or ``{pointer, capacity}``.  ``TensorValue`` is ``{mutex*
  mutex_if_ref, Tensor* tensor}``.
* **the count and dtypes** (``node_properties.h``): ``OpKernel`` holds
  ``std::shared_ptr<const NodeProperties> props_``; ``NodeProperties`` holds
  ``DataTypeVector input_types`` (an ``InlinedVector<DataType, 4>``) followed
  by ``DataTypeSlice input_types_slice``, a span over the vector's own
  elements.  A vector followed by a span of the same length over its data is
  found by that self-reference.  The inputs read must be as many, each of
  the dtype the kernel was built for.
* **a tensor** (``tensor.h``, ``tensor_shape.h``): ``Tensor`` is
  ``{TensorShape shape_, TensorBuffer* buf_}``; ``TensorShapeRep`` is a
  16-byte buffer (dims as six uint16 for tag 0, three uint32 for tag 1, or a
  pointer to an ``InlinedVector<int64_t, 4>`` for tag 2; byte 13 the dtype,
  14 the rank, 15 the tag) then ``int64_t num_elements_``; ``TensorBuffer``
  (a ``core::RefCounted``: vptr, refcount) then ``void* data_``.  The product
  of the dims must be ``num_elements_``, the dtype a ``DataType`` of
  ``types.proto``, the buffer readable.

A value that fails a check is dropped with the reason, never shown.  Every
walk is bounded; only memory is read, nothing is called in the target.
Standard library only: this also runs inside gdb's Python.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..memory import USER_SPACE_END, Memory, aligned_pointer
from .opkernel import CALLEE_SAVED, FrameContext, stack_words

MAX_INPUTS = 1024  # no op has more; a longer "span" is not one
MAX_RANK = 254  # TensorShapeRep: 255 is kUnknownRank
CTX_WORDS = 8  # where params_ may be in an OpKernelContext (after its vptr and status_)
PARAMS_WORDS = 16  # where op_kernel may be in a Params
INPUTS_WORDS = 40  # where inputs may be in a Params, after op_kernel
PROPS_WORDS = 8  # where props_ may be in an OpKernel
PROPS_SCAN_BYTES = 768  # where input_types may be in a NodeProperties
MAX_CANDIDATES = 2048  # context candidates tried per frame
VALUES_MAX = 64  # inputs of at most this many elements carry their values
REPRO_BYTES = 64 << 20  # with --repro (read_whole_tensors): inputs of at most this many bytes carry theirs;
# larger ones, up to spool.SPOOL_MAX, are copied to a file a chunk at a time (a spool.Spooled for their values)
_whole = [0]  # the bytes up to which a tensor's values are read whole: 0 unless --repro asks


def read_whole_tensors(limit: int = REPRO_BYTES) -> None:
    """From now on, in this process, read the values of inputs of up to ``limit`` bytes (``--repro``'s data file;
    the default, 0, reads those of at most VALUES_MAX elements alone)."""
    _whole[0] = limit

# types.proto's DataType: name and element size (0: no fixed-size element we read: strings, resources...).
DTYPES: Dict[int, Tuple[str, int]] = {
    1: ("float32", 4), 2: ("float64", 8), 3: ("int32", 4), 4: ("uint8", 1), 5: ("int16", 2), 6: ("int8", 1),
    7: ("string", 0), 8: ("complex64", 8), 9: ("int64", 8), 10: ("bool", 1), 11: ("qint8", 1), 12: ("quint8", 1),
    13: ("qint32", 4), 14: ("bfloat16", 2), 15: ("qint16", 2), 16: ("quint16", 2), 17: ("uint16", 2),
    18: ("complex128", 16), 19: ("float16", 2), 20: ("resource", 0), 21: ("variant", 0), 22: ("uint32", 4),
    23: ("uint64", 8), 24: ("float8_e5m2", 1), 25: ("float8_e4m3fn", 1), 26: ("float8_e4m3fnuz", 1),
    27: ("float8_e4m3b11fnuz", 1), 28: ("float8_e5m2fnuz", 1), 29: ("int4", 0), 30: ("uint4", 0), 31: ("int2", 0),
    32: ("uint2", 0), 33: ("float4_e2m1fn", 0)}
REF_OFFSET = 100  # DT_FLOAT_REF = 101: a ref type is its base + 100
_FORMATS = {"float32": "f", "float64": "d", "int32": "i", "uint8": "B", "int16": "h", "int8": "b", "int64": "q",
            "bool": "?", "uint16": "H", "float16": "e", "uint32": "I", "uint64": "Q", "qint8": "b", "quint8": "B",
            "qint32": "i", "qint16": "h", "quint16": "H"}


class Unread(Exception):
    """A value that failed a check: the reason."""


class InputsReader:
    """Reads the inputs of kernels of one process; the layout found once is checked again on every object."""

    def __init__(self, memory: Memory) -> None:
        self.mem = memory
        self.links: Optional[Tuple[int, int]] = None  # (params_ in a context, op_kernel in a Params)
        self.inputs_at: Optional[Tuple[int, bool]] = None  # (inputs in a Params, a Span)
        self.props_at: Optional[Tuple[int, int]] = None  # (props_ in an OpKernel, input_types in its props)

    # -- memory
    def words(self, addr: int, count: int) -> Tuple[int, ...]:
        """``count`` words at ``addr``; raises Unread."""
        if not 0 < addr < USER_SPACE_END:
            raise Unread("address 0x%x is not in user space" % addr)
        try:
            raw = self.mem.read(addr, 8 * count)
        except MemoryError:
            raise Unread("0x%x is not readable" % addr) from None
        return struct.unpack("<%dQ" % count, raw)

    def u64(self, addr: int) -> int:
        return self.words(addr, 1)[0]

    def bytes_at(self, addr: int, size: int) -> bytes:
        try:
            return self.mem.read(addr, size)
        except MemoryError:
            raise Unread("0x%x is not readable" % addr) from None

    # -- the kernel's input types (OpKernel::props_->input_types)
    def input_types(self, kernel: int) -> Optional[List[int]]:
        """The DataType of each input the kernel at ``kernel`` was built for, or None where not found."""
        try:
            words = self.words(kernel, PROPS_WORDS)
        except Unread:
            return None
        if self.props_at is not None:
            found = self._types_at(words[self.props_at[0]], self.props_at[1])
            if found is not None:
                return found
        for k in range(1, PROPS_WORDS):
            if not aligned_pointer(words[k]):
                continue
            try:
                raw = self.bytes_at(words[k], PROPS_SCAN_BYTES)
            except Unread:
                continue
            for off in range(8, PROPS_SCAN_BYTES - 40, 8):
                size, first, _cap, span_ptr, span_len = struct.unpack_from("<5Q", raw, off)
                data = first if size & 1 else words[k] + off + 8
                if span_ptr == data and span_len == size >> 1 and span_len <= MAX_INPUTS:
                    found = self._types_at(words[k], off)
                    if found is not None:
                        self.props_at = (k, off)
                        return found
        return None

    def _types_at(self, props: int, off: int) -> Optional[List[int]]:
        """The DataTypeVector at ``props + off`` when the span after it covers it and its types are DataTypes."""
        try:
            size, first, _cap, span_ptr, span_len = self.words(props + off, 5)
            n = size >> 1
            data = first if size & 1 else props + off + 8
            if span_ptr != data or span_len != n or n > MAX_INPUTS:
                return None
            types = list(struct.unpack("<%di" % n, self.bytes_at(data, 4 * n))) if n else []
        except Unread:
            return None
        if not all(t % REF_OFFSET in DTYPES and 0 < t < 2 * REF_OFFSET for t in types):
            return None
        return types

    # -- the context and its Params
    def params_of(self, ctx: int, kernel: int) -> List[Tuple[int, int, int]]:
        """(``Params*``, where its ``op_kernel`` is, where ``params_`` is in the context) of each Params that
        the context at ``ctx`` may hold: a word of it that points to a struct holding ``kernel``, followed by
        a pointer to an object (the device).  The inputs found there are the check that it is the one."""
        try:
            words = self.words(ctx, CTX_WORDS)
        except Unread:
            return []
        if not aligned_pointer(words[0]):  # OpKernelContext has a vtable
            return []
        out = []
        ks = ([self.links[0]] if self.links is not None else []) + list(range(1, CTX_WORDS))
        for k in dict.fromkeys(ks):
            if not aligned_pointer(words[k]):
                continue
            try:
                params = self.words(words[k], PARAMS_WORDS + 1)
            except Unread:
                continue
            for j in range(PARAMS_WORDS):
                if params[j] == kernel and aligned_pointer(params[j + 1]) and self._has_vptr(params[j + 1]):
                    out.append((words[k], j, k))
        return out

    def _has_vptr(self, obj: int) -> bool:
        try:
            return aligned_pointer(self.u64(obj))
        except Unread:
            return False

    def find_inputs(self, candidates: Sequence[int], kernel: int, types: Optional[List[int]]
                    ) -> List[Tuple[int, int]]:
        """The ``TensorValue``s (mutex, tensor) of the kernel's context, the first of ``candidates`` whose
        Params runs ``kernel`` and holds a list of its inputs; raises Unread."""
        seen, contexts = set(), 0
        for value in candidates[:MAX_CANDIDATES]:
            if value in seen or not aligned_pointer(value) or value == kernel:
                continue
            seen.add(value)
            for params, j, k in self.params_of(value, kernel):
                contexts += 1
                values = [] if types == [] else self.input_values(params + 8 * (j + 1), types)
                if values is not None:
                    self.links = (k, j)
                    return values
        if not contexts:
            raise Unread("no OpKernelContext running this kernel in its frame's registers or stack")
        raise Unread("no list of %s input tensors in the kernel's OpKernelContext::Params" % (
            len(types) if types is not None else "valid"))

    # -- the inputs
    def input_values(self, after: int, types: Optional[List[int]]) -> Optional[List[Tuple[int, int]]]:
        """The ``TensorValue``s (mutex, tensor) of a Params, found after its ``op_kernel`` (``after``) and
        checked against the kernel's count and dtypes; None where there is no such list."""
        try:
            words = self.words(after, INPUTS_WORDS)
        except Unread:
            return None
        tries: List[Tuple[int, bool]] = [self.inputs_at] if self.inputs_at is not None else []
        tries += [(i, span) for i in range(INPUTS_WORDS - 1) for span in (True, False)]
        for i, span in tries:
            values = self._values_at(words, i, span, types)
            if values is not None:
                self.inputs_at = (i, span)
                return values
        return None

    def _values_at(self, words: Tuple[int, ...], i: int, span: bool, types: Optional[List[int]]
                   ) -> Optional[List[Tuple[int, int]]]:
        try:
            if span:
                data, n = words[i], words[i + 1]
            else:
                if not aligned_pointer(words[i]):
                    return None
                size, first = self.words(words[i], 2)
                n, data = size >> 1, first if size & 1 else words[i] + 8
            if types is not None and n != len(types) or not 0 < n <= MAX_INPUTS or not aligned_pointer(data):
                return None
            pairs = self.words(data, 2 * n)
        except Unread:
            return None
        values = [(pairs[2 * k], pairs[2 * k + 1]) for k in range(n)]
        good = 0
        for k, (_mutex, tensor) in enumerate(values):
            try:
                self.tensor(tensor, types[k] if types is not None else None)
                good += 1
            except Unread:
                if types is None:
                    return None
        return values if good else None

    def tensor(self, addr: int, want: Optional[int] = None, values: bool = False) -> Dict[str, Any]:
        """``{"dtype", "shape"[, "values"]}`` of the Tensor at ``addr``, checked; raises Unread."""
        if not aligned_pointer(addr):
            raise Unread("the tensor pointer 0x%x is not a pointer" % addr)
        raw = self.bytes_at(addr, 32)
        buf, (num, tbuf) = raw[:16], struct.unpack_from("<qQ", raw, 16)
        dtype, rank, tag = buf[13], buf[14], buf[15]
        if dtype not in DTYPES:
            raise Unread("dtype %d is no DataType" % dtype)
        if want is not None and want % REF_OFFSET != dtype:
            raise Unread("dtype %s, where the kernel takes %s" % (DTYPES[dtype][0], dtype_name(want)))
        if rank > MAX_RANK:
            raise Unread("unknown rank")
        dims = self._dims(buf, rank, tag)
        if any(d < 0 for d in dims) or math.prod(dims) != num:
            raise Unread("dims %s do not make num_elements %d" % (dims, num))
        name, size = DTYPES[dtype]
        out: Dict[str, Any] = {"dtype": name, "shape": dims}
        if tbuf == 0:
            if num:
                raise Unread("no buffer for %d elements" % num)
            return out
        vptr, refs, data = self.words(tbuf, 3)
        if not aligned_pointer(vptr) or not 0 < refs < 1 << 31:
            raise Unread("its TensorBuffer at 0x%x has no vtable or refcount" % tbuf)
        if values and name == "resource":  # the handle, and a variable's value (core/tensorflow/resources.py)
            try:
                if num != 1:
                    raise Unread("%d handles: tfnative reads a scalar handle" % num)
                from . import resources  # (imported where a resource input is read: every command imports this)

                out["resource"] = resources.read_resource(self, data, Unread)
            except Unread as exc:
                out["resource"] = {"unread": "its ResourceHandle was not read: %s" % exc}
        if num and size:
            head = self.bytes_at(data, min(num * size, 8 * VALUES_MAX))  # the buffer is there
            if values and name in _FORMATS and num <= VALUES_MAX:
                out["values"] = _decoded(name, head[: num * size], num)
            elif values and name in _FORMATS and num * size <= _whole[0]:
                out["values"] = _decoded(name, self.bytes_at(data, num * size), num)
            elif values and name in _FORMATS and _whole[0]:  # larger: copied to a file a chunk at a time
                from . import spool  # (imported where an input is copied: every command imports this module)

                try:  # the copy in a typed field of the entry, beside its keys: the document stays JSON
                    return spool.Entry(out, spooled=spool.copy(self.mem, data, num * size, _FORMATS[name]))
                except spool.Refused as exc:
                    return spool.Entry(out, refused=str(exc))
        return out

    def _dims(self, buf: bytes, rank: int, tag: int) -> List[int]:
        if tag == 0 and rank <= 6:
            return list(struct.unpack_from("<%dH" % rank, buf))
        if tag == 1 and rank <= 3:
            return list(struct.unpack_from("<%dI" % rank, buf))
        if tag != 2:
            raise Unread("shape tag %d with rank %d" % (tag, rank))
        vec = struct.unpack_from("<Q", buf)[0]
        size, first = self.words(vec, 2)
        if size >> 1 != rank:
            raise Unread("an out-of-line shape of %d dims for rank %d" % (size >> 1, rank))
        data = first if size & 1 else vec + 8
        return list(struct.unpack("<%dq" % rank, self.bytes_at(data, 8 * rank))) if rank else []


def dtype_name(t: int) -> str:
    base = DTYPES.get(t % REF_OFFSET, ("dtype %d" % t, 0))[0]
    return base + "_ref" if t > REF_OFFSET else base


def _decoded(name: str, raw: bytes, num: int) -> List[Any]:
    out: List[Any] = list(struct.unpack("<%d%s" % (num, _FORMATS[name]), raw))
    if name == "bool":
        return [bool(v) for v in out]
    # JSON has no NaN or infinity: those are written as strings ("nan", "inf", "-inf")
    return [repr(v) if isinstance(v, float) and not math.isfinite(v) else v for v in out]


def context_candidates(mem: Memory, frame: FrameContext) -> List[int]:
    """Words where a kernel frame's ``OpKernelContext*`` may be: ``rsi`` at the entry of ``Compute``, the
    callee-saved registers of the frame and its caller, then the stack from the frame to its caller's."""
    out: List[int] = []
    if frame.level == 0 and frame.start and 0 <= frame.pc - frame.start <= 8 and frame.regs.get("rsi"):
        out.append(frame.regs["rsi"])
    for values in (frame.regs, frame.caller_regs):
        out += [values[r] for r in CALLEE_SAVED if values.get(r) is not None]
    return out + stack_words(mem, frame.low, frame.high or frame.low + 4096)


def read_inputs(reader: InputsReader, frame: FrameContext, kernel: int) -> Dict[str, Any]:
    """``{"inputs": [INPUT...]}`` of the kernel at ``kernel`` running in ``frame``, or ``{"inputs_unread":
    reason}``.  An INPUT is ``{"dtype", "shape"[, "values"]}``, or ``{"unread": reason}`` for one that failed a
    check; ``values`` (flat, row-major) for inputs of at most VALUES_MAX elements."""
    types = reader.input_types(kernel)
    try:
        values = reader.find_inputs(context_candidates(reader.mem, frame), kernel, types)
    except Unread as exc:
        return {"inputs_unread": str(exc)}
    inputs: List[Dict[str, Any]] = []
    for k, (mutex, tensor) in enumerate(values):
        try:
            entry = reader.tensor(tensor, types[k] if types is not None else None, values=True)
            if mutex:
                entry["ref"] = True
        except Unread as exc:
            entry = {"unread": str(exc)}
        inputs.append(entry)
    return {"inputs": inputs}
