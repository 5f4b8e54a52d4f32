"""The attributes of the op a kernel frame runs, read from its ``NodeDef`` in memory (issue #45).

Nothing here comes from a table of versions: the NodeDef is found from the ``OpKernel`` and checked, and the
protobuf runtime's layout is checked on every object read.  What the headers of the TF 2.21 wheel say
(``tensorflow/include/``; protobuf 6.31.1, ``google/protobuf/runtime_version.h``):

* **the NodeDef** (``tensorflow/core/framework/node_properties.h``, ``op_kernel.h``): ``OpKernel`` holds
  ``std::shared_ptr<const NodeProperties> props_``; ``NodeProperties`` holds ``const OpDef* op_def`` then
  ``NodeDef node_def``; the kernel's ``name_view_`` and ``type_string_view_`` are views of that NodeDef's
  ``name()`` and ``op()``.  ``node_def.pb.h``: the NodeDef's ``Impl_`` holds ``... MapField attr_;
  ArenaStringPtr name_; ArenaStringPtr op_; ...``.  The NodeDef is found as two adjacent ``ArenaStringPtr``
  in the NodeProperties whose strings' data are the kernel's two views: that equality is the check.
* **strings** (``arenastring.h``): an ``ArenaStringPtr`` is a ``std::string*`` tagged in its two low bits;
  a libstdc++ ``std::string`` is ``{char* data; size_t size; union {size_t capacity; char local[16]}}``.
* **the map** (``map_field.h``, ``map.h``): a ``MapField`` ends with its ``Map<std::string, AttrValue>``,
  an ``UntypedMapBase`` ``{uint32 num_elements_, num_buckets_, index_of_first_non_null_; TypeInfo
  {uint16 node_size; uint8 value_offset; uint8 key_type:4, value_type:4}; NodeBase** table_; Arena*
  arena_}`` right before ``name_``.  Its TypeInfo must say a string key (``TypeKind::kString``, 5) and a
  message value (``kMessage``, 6); a bucket is a chain of nodes ``{NodeBase* next; std::string key; ...
  value at value_offset}`` (``kMaxMessageAlignment`` 8, ``port.h``).  The nodes walked must be as many as
  ``num_elements_``.
* **an AttrValue** (``attr_value.pb.h``): a ``Message`` (vptr, ``InternalMetadata``) then ``Impl_
  {union value_; CachedSize; uint32 _oneof_case_[1]}``: the case is one of ``AttrValue::ValueCase``
  (``kList`` 1 .. ``kFunc`` 10).  Its ``ListValue``: ``RepeatedPtrField<std::string> s_`` (16),
  ``RepeatedField<int64_t> i_`` (40), ``f_`` (64), ``b_`` (80), ``type_`` (96), ``RepeatedPtrField
  <TensorShapeProto> shape_`` (120), ``tensor_`` (144), ``func_`` (168).  ``tensor_shape.pb.h``:
  ``TensorShapeProto`` ``{has_bits, cached_size; RepeatedPtrField<Dim> dim_ (24); bool unknown_rank_ (48)}``,
  a ``Dim`` ``{has_bits, cached_size; ArenaStringPtr name_ (24); int64 size_ (32)}``.
* **repeated fields** (``repeated_field.h``, ``repeated_ptr_field.h``): a ``RepeatedField<T>`` is a
  ``SooRep``: a word whose bit 2 (``kNotSooBit``) clear means up to 3 elements inline in the next 8 bytes,
  the size in its 2 low bits; set, the elements' pointer (its 3 low bits masked) then ``int size, capacity``.
  A ``RepeatedPtrField`` is ``{void* tagged_rep_or_elem_; int current_size_; int capacity_proxy_; Arena*}``:
  an odd first word points (less 1) to ``{int allocated_size; void* elements[]}``, an even one is the single
  element itself.

**protobuf 3.21** (the TF 2.16 wheel's ``google/protobuf``, ``PROTOBUF_VERSION`` 3021009): no ``TypeInfo``; the
map is an ``InnerMap`` ``{size_t num_elements_, num_buckets_, seed_, index_of_first_non_null_; void** table_;
Arena* alloc_}`` (48 bytes) right before ``name_``, a bucket a chain of nodes ``{std::string key; AttrValue value
(32 bytes); Node* next}`` (a bucket whose table entry equals its pair's, ``b ^ 1``, is a tree: not read); a
``RepeatedField`` ``{int current_size_, total_size_; T* elements}``; a ``RepeatedPtrField`` ``{Arena*; int
current_size_, total_size_; Rep* {int allocated_size; void* elements[]}}``; the ``AttrValue`` and ``ListValue``
offsets are the same, a ``TensorShapeProto`` has no has-bits (``dim_`` 16, ``unknown_rank_`` 40, a ``Dim``'s
``size_`` 24).  It is tried only where the 6.x map's check fails, and is checked as that one is (a power-of-two
table, every key an attribute name, as many nodes as ``num_elements_``, every value with AttrValue's vtable).

An attribute that fails a check is left out with its reason (``attrs_unread``); every walk is bounded; only
memory is read.  Standard library only: this also runs inside gdb's Python.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any, Dict, List, Optional, Tuple

from ..memory import aligned_pointer
from .kernelinputs import DTYPES, REF_OFFSET, InputsReader, Unread, dtype_name

MAX_ATTRS = 256  # attributes of one node: no op has more
MAX_BUCKETS = 1 << 12
MAX_STRING = 4096  # an attribute's string (padding, data_format...) longer than this is left out
MAX_LIST = 4096  # elements of a list attribute
NODEDEF_SCAN = 512  # where the NodeDef's name_ may be in a NodeProperties
PROPS_WORDS = 8
KEY_STRING, VALUE_MESSAGE = 5, 6  # UntypedMapBase::TypeKind
PB3_MAP, PB3_VALUE, PB3_NEXT = 48, 32, 64  # protobuf 3.21: InnerMap's size; a node's value and next
_NAME_RE = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*\Z")
_CASES = {1: "list", 2: "s", 3: "i", 4: "f", 5: "b", 6: "type", 7: "shape", 8: "tensor", 9: "placeholder",
          10: "func"}


def _float(value: float) -> Any:
    """JSON has no NaN or infinity: those are strings, as for the inputs' values."""
    return value if math.isfinite(value) else repr(value)


class AttrsReader:
    """Reads the attributes of kernels' NodeDefs in one process; the layout found once is checked again."""

    def __init__(self, reader: InputsReader) -> None:
        self.r = reader
        self.at: Optional[Tuple[int, int]] = None  # (props_ in an OpKernel, name_ in its NodeProperties)
        self.vptr: Optional[int] = None  # AttrValue's vtable: the same for every AttrValue
        self.pb3 = False  # the map read is protobuf 3.21's: its repeated fields and shapes are read in its layout

    # -- strings
    def string(self, addr: int, limit: int = MAX_STRING) -> bytes:
        """The libstdc++ ``std::string`` at ``addr``; raises Unread."""
        data, size, _cap = self.r.words(addr, 3)
        if size > limit:
            raise Unread("a string of %d bytes" % size)
        if not 0x1000 <= data < 1 << 47:
            raise Unread("a string whose data 0x%x is no pointer" % data)
        return self.r.bytes_at(data, size) if size else b""

    def arena_string(self, field: int) -> Tuple[int, bytes]:
        """(its data pointer, its bytes) of the ``ArenaStringPtr`` at ``field``; raises Unread."""
        s = self.r.u64(field) & ~3
        if not aligned_pointer(s):
            raise Unread("an ArenaStringPtr 0x%x that points nowhere" % s)
        return self.r.u64(s), self.string(s)

    # -- the NodeDef
    def node_def(self, kernel: int, views: Tuple[int, int]) -> int:
        """The address of the kernel's NodeDef's ``name_``: the ArenaStringPtr pair in its NodeProperties whose
        data are the kernel's ``name_view_`` and ``type_string_view_`` (``views``); raises Unread."""
        words = self.r.words(kernel, PROPS_WORDS)
        if self.at is not None and self._names_at(words[self.at[0]] + self.at[1], views):
            return words[self.at[0]] + self.at[1]
        for k in range(1, PROPS_WORDS):
            if not aligned_pointer(words[k]):
                continue
            try:
                raw = self.r.bytes_at(words[k], NODEDEF_SCAN)
            except Unread:
                continue
            for off in range(8, NODEDEF_SCAN - 8, 8):
                a, b = struct.unpack_from("<QQ", raw, off)
                if aligned_pointer(a & ~3) and aligned_pointer(b & ~3) and self._names_at(words[k] + off, views):
                    self.at = (k, off)
                    return words[k] + off
        raise Unread("no NodeDef whose name and op are the kernel's in its NodeProperties")

    def _names_at(self, field: int, views: Tuple[int, int]) -> bool:
        try:
            return (self.arena_string(field)[0], self.arena_string(field + 8)[0]) == views
        except Unread:
            return False

    # -- the map
    def entries(self, name_field: int) -> List[Tuple[bytes, int]]:
        """(key, AttrValue address) of each entry of the NodeDef's attr map (the ``UntypedMapBase`` right before
        its ``name_``), checked; raises Unread."""
        base = name_field - 32
        raw = self.r.bytes_at(base, 32)
        count, buckets, first, node_size, value_off, kinds, table, _arena = struct.unpack("<IIIHBBQQ", raw)
        if (kinds & 15, kinds >> 4) != (KEY_STRING, VALUE_MESSAGE):
            try:
                return self._entries_pb3(name_field)
            except Unread as old:
                raise Unread("the map before the NodeDef's name is not a map<string, message> (kinds 0x%x); as "
                             "protobuf 3.21's: %s" % (kinds, old)) from None
        if value_off < 40 or node_size < value_off + 16 or count > MAX_ATTRS:
            raise Unread("a map node of %d bytes with its value at %d, %d entries" % (node_size, value_off, count))
        if count == 0:
            return []
        if buckets & (buckets - 1) or not 0 < buckets <= MAX_BUCKETS or first >= buckets or not aligned_pointer(table):
            raise Unread("a map of %d buckets (first %d), table 0x%x" % (buckets, first, table))
        out: List[Tuple[bytes, int]] = []
        for node in self.r.words(table, buckets):
            seen = 0
            while node and len(out) <= count:
                if not aligned_pointer(node) or seen > count:
                    raise Unread("a map node at 0x%x" % node)
                key = self.string(node + 8, 256)
                if not _NAME_RE.match(key):
                    raise Unread("a map key %r that is no attribute name" % key[:40])
                out.append((key, node + value_off))
                node, seen = self.r.u64(node), seen + 1
        if len(out) != count:
            raise Unread("%d entries in a map that says %d" % (len(out), count))
        return out

    def _entries_pb3(self, name_field: int) -> List[Tuple[bytes, int]]:
        """``entries`` of protobuf 3.21's ``InnerMap`` (module docstring); raises Unread."""
        count, buckets, _seed, first, table, _alloc = struct.unpack("<6Q", self.r.bytes_at(name_field - PB3_MAP,
                                                                                           PB3_MAP))
        if count > MAX_ATTRS or buckets & (buckets - 1) or not 0 < buckets <= MAX_BUCKETS or first > buckets:
            raise Unread("a map of %d entries, %d buckets (first %d)" % (count, buckets, first))
        out: List[Tuple[bytes, int]] = []
        if count:
            if first == buckets or not aligned_pointer(table):
                raise Unread("a map of %d entries, %d buckets (first %d), table 0x%x" % (count, buckets, first, table))
            heads = self.r.words(table, buckets)
            for b, node in enumerate(heads):
                if node and buckets > 1 and node == heads[b ^ 1]:
                    raise Unread("a map bucket that is a tree")
                seen = 0
                while node and len(out) <= count:
                    if not aligned_pointer(node) or seen > count:
                        raise Unread("a map node at 0x%x" % node)
                    key = self.string(node, 256)
                    if not _NAME_RE.match(key):
                        raise Unread("a map key %r that is no attribute name" % key[:40])
                    out.append((key, node + PB3_VALUE))
                    node, seen = self.r.u64(node + PB3_NEXT), seen + 1
        if len(out) != count:
            raise Unread("%d entries in a map that says %d" % (len(out), count))
        self.pb3 = True
        return out

    # -- values
    def value(self, addr: int) -> Any:
        """The value of the AttrValue at ``addr`` (an int, a float, a bool, a str, a DataType's name, a shape
        ``{"shape": [...]}``, a list of those ``{"list": [...]}``); raises Unread."""
        vptr = self.r.u64(addr)
        if not aligned_pointer(vptr) or self.vptr is not None and vptr != self.vptr:
            raise Unread("an AttrValue without AttrValue's vtable")
        self.vptr = vptr
        case = struct.unpack("<I", self.r.bytes_at(addr + 28, 4))[0]
        kind = _CASES.get(case)
        at = addr + 16
        if kind == "s":
            return _text(self.arena_string(at)[1])
        if kind == "i":
            return struct.unpack("<q", self.r.bytes_at(at, 8))[0]
        if kind == "f":
            return _float(struct.unpack("<f", self.r.bytes_at(at, 4))[0])
        if kind == "b":
            return _bool(self.r.bytes_at(at, 1)[0])
        if kind == "type":
            return _type(struct.unpack("<i", self.r.bytes_at(at, 4))[0])
        if kind == "shape":
            return {"shape": self.shape(self.r.u64(at))}
        if kind == "list":
            return {"list": self.list_value(self.r.u64(at))}
        raise Unread("a %s attribute" % kind if kind else "an AttrValue whose value case is %d" % case)

    def list_value(self, addr: int) -> List[Any]:
        if not aligned_pointer(addr) or not aligned_pointer(self.r.u64(addr)):
            raise Unread("a ListValue at 0x%x" % addr)
        lists: List[List[Any]] = [
            [_text(self.string(p)) for p in self.pointers(addr + 16)],
            list(self.repeated(addr + 40, "q")),
            [_float(v) for v in self.repeated(addr + 64, "f")],
            [_bool(v) for v in self.repeated(addr + 80, "B")],
            [_type(v) for v in self.repeated(addr + 96, "i")],
            [self.shape(p) for p in self.pointers(addr + 120)],
        ]
        if self.pointers(addr + 144) or self.pointers(addr + 168):
            raise Unread("a list of tensors or functions")
        full = [values for values in lists if values]
        if len(full) > 1:
            raise Unread("a ListValue with %d kinds of values" % len(full))
        return full[0] if full else []

    def shape(self, addr: int) -> Optional[List[int]]:
        """A TensorShapeProto's dims (-1 unknown), None for an unknown rank."""
        if not aligned_pointer(addr) or not aligned_pointer(self.r.u64(addr)):
            raise Unread("a TensorShapeProto at 0x%x" % addr)
        dims_at, unknown_at, size_at = (16, 40, 24) if self.pb3 else (24, 48, 32)
        unknown = self.r.bytes_at(addr + unknown_at, 1)[0]
        dims = [struct.unpack("<q", self.r.bytes_at(dim + size_at, 8))[0] for dim in self.pointers(addr + dims_at)]
        if unknown > 1 or any(d < -1 for d in dims) or unknown and dims:
            raise Unread("a TensorShapeProto with unknown_rank %d and dims %s" % (unknown, dims[:8]))
        return None if unknown else dims

    def repeated(self, field: int, fmt: str) -> Tuple[Any, ...]:
        """The elements of the ``RepeatedField`` at ``field`` (``struct`` format ``fmt``)."""
        word, rest = self.r.words(field, 2)
        size_of = struct.calcsize(fmt)
        if self.pb3:  # {int current_size_, total_size_; T* elements}
            n, cap = struct.unpack("<ii", struct.pack("<Q", word))
            if not 0 <= n <= cap or n > MAX_LIST or n and not aligned_pointer(rest):
                raise Unread("a RepeatedField of %d elements (capacity %d)" % (n, cap))
            return struct.unpack("<%d%s" % (n, fmt), self.r.bytes_at(rest, n * size_of)) if n else ()
        if not word & 4:  # SOO: inline in the next 8 bytes
            n = word & 3
            if n * size_of > 8:
                raise Unread("an inline RepeatedField of %d elements" % n)
            return struct.unpack_from("<%d%s" % (n, fmt), struct.pack("<Q", rest))
        n, cap = struct.unpack("<ii", struct.pack("<Q", rest))
        if not 0 <= n <= cap or n > MAX_LIST or not aligned_pointer(word & ~7):
            raise Unread("a RepeatedField of %d elements (capacity %d)" % (n, cap))
        return struct.unpack("<%d%s" % (n, fmt), self.r.bytes_at(word & ~7, n * size_of)) if n else ()

    def pointers(self, field: int) -> List[int]:
        """The element pointers of the ``RepeatedPtrField`` at ``field``."""
        tagged, sizes = self.r.words(field, 2)
        n = struct.unpack("<i", struct.pack("<Q", sizes)[:4])[0]
        if self.pb3:  # {Arena*; int current_size_, total_size_; Rep*}
            n, cap = struct.unpack("<ii", struct.pack("<Q", sizes))
            if n == 0:
                return []
            rep = self.r.u64(field + 16)
            if not 0 < n <= cap or n > MAX_LIST or not aligned_pointer(rep):
                raise Unread("a RepeatedPtrField of %d elements (capacity %d)" % (n, cap))
            tagged = rep + 1  # its Rep, as the 6.x layout's
        if not tagged or n == 0:
            return []
        if not tagged & 1:
            if n != 1 or not aligned_pointer(tagged):
                raise Unread("a RepeatedPtrField of one element at 0x%x, size %d" % (tagged, n))
            return [tagged]
        if not 0 < n <= MAX_LIST:
            raise Unread("a RepeatedPtrField of %d elements" % n)
        rep = tagged - 1
        allocated = struct.unpack("<i", self.r.bytes_at(rep, 4))[0]
        if not n <= allocated <= MAX_LIST:
            raise Unread("a RepeatedPtrField of %d elements, %d allocated" % (n, allocated))
        out = list(self.r.words(rep + 8, n))
        if not all(aligned_pointer(p) for p in out):
            raise Unread("a RepeatedPtrField element is no pointer")
        return out


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Unread("a string attribute that is not UTF-8") from None


def _bool(byte: int) -> bool:
    if byte > 1:
        raise Unread("a bool of value %d" % byte)
    return bool(byte)


def _type(value: int) -> str:
    if not (value % REF_OFFSET in DTYPES and 0 < value < 2 * REF_OFFSET):
        raise Unread("DataType %d" % value)
    return dtype_name(value)


def kernel_views(reader: InputsReader, kernel: int, layout: Optional[Tuple[int, bool]]) -> Tuple[int, int]:
    """The data pointers of the kernel's ``name_view_`` and ``type_string_view_`` (``opkernel``'s layout)."""
    if layout is None:
        raise Unread("the OpKernel's name was not found")
    off, length_first = layout
    a, b, c, d = reader.words(kernel + off, 4)
    return (b, d) if length_first else (a, c)


def read_attrs(reader: InputsReader, kernel: int, layout: Optional[Tuple[int, bool]],
               attrs: Optional[AttrsReader] = None) -> Dict[str, Any]:
    """``{"attrs": {name: value}}`` of the kernel's NodeDef (sorted by name; one that failed a check is left
    out, named in ``attrs_unread`` with its reason), or ``{"attrs_unread": reason}``."""
    attrs = attrs or AttrsReader(reader)
    try:
        entries = attrs.entries(attrs.node_def(kernel, kernel_views(reader, kernel, layout)))
    except Unread as exc:
        return {"attrs_unread": str(exc)}
    values: Dict[str, Any] = {}
    left: List[str] = []
    for key, addr in sorted(entries):
        name = key.decode()
        try:
            values[name] = attrs.value(addr)
        except Unread as exc:
            left.append("%s: %s" % (name, exc))
    out: Dict[str, Any] = {"attrs": values}
    if left:
        out["attrs_unread"] = "; ".join(left)
    return out
