"""The reader of a kernel's NodeDef attributes (``core/tensorflow/nodeattrs.py``) on a NodeDef, its attr map and
AttrValues built in fake memory in the layout of TF 2.21's protobuf 6.31 (the one the wheel's headers give):
what it reads, and what it leaves out with a reason."""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Sequence, Tuple

from tfnative.core.tensorflow.kernelinputs import InputsReader
from tfnative.core.tensorflow.nodeattrs import read_attrs

from .fakemem import FakeMemory

HEAP, VTABLES = 0x5500_0000_0000, 0x7F00_0100_0000
KERNEL, PROPS = HEAP, HEAP + 0x400
NAME_AT = PROPS + 8 + 96  # NodeProperties: op_def, then the NodeDef, whose name_ is at 96
LAYOUT = (200, True)  # the OpKernel's name_view_ (length, data), then type_string_view_
ATTR_VPTR, LIST_VPTR, SHAPE_VPTR = VTABLES + 0x10, VTABLES + 0x40, VTABLES + 0x80


class Node:
    """One NodeDef and its attributes in fake memory; ``attrs`` are (name, oneof case, value-maker)."""

    def __init__(self) -> None:
        self.mem = FakeMemory()
        self.mem.map(HEAP, 0x40000)
        self.mem.map(VTABLES, 0x100)
        self.next = HEAP + 0x2000
        self.mem.u64(KERNEL, VTABLES)
        self.mem.u64(KERNEL + 8, PROPS)  # props_
        name, op = self.string(b"model/conv"), self.string(b"Conv2D")
        self.mem.write(NAME_AT, struct.pack("<QQ", name, op | 2))  # two ArenaStringPtrs (one tagged)
        self.mem.write(KERNEL + 200, struct.pack("<QQQQ", 10, self.u64_at(name), 6, self.u64_at(op)))

    def alloc(self, size: int) -> int:
        at = self.next
        self.next += (size + 15) // 16 * 16
        return at

    def u64_at(self, addr: int) -> int:
        return int(struct.unpack("<Q", self.mem.read(addr, 8))[0])

    def string(self, text: bytes) -> int:
        """A libstdc++ std::string (its local buffer for 15 bytes or fewer)."""
        s = self.alloc(32)
        data = s + 16 if len(text) < 16 else self.alloc(len(text) + 1)
        self.mem.write(s, struct.pack("<QQ", data, len(text)))
        self.mem.write(data, text + b"\0")
        return s

    def message(self, vptr: int, size: int) -> int:
        m = self.alloc(size)
        self.mem.u64(m, vptr)
        return m

    def ptr_field(self, at: int, pointers: Sequence[int]) -> None:
        """A RepeatedPtrField at ``at``: one element inline, more in a Rep."""
        if len(pointers) == 1:
            self.mem.write(at, struct.pack("<Qii", pointers[0], 1, 0))
        elif pointers:
            rep = self.alloc(8 + 8 * len(pointers))
            self.mem.write(rep, struct.pack("<Q%dQ" % len(pointers), len(pointers), *pointers))
            self.mem.write(at, struct.pack("<Qii", rep | 1, len(pointers), len(pointers) - 1))

    def repeated(self, at: int, fmt: str, values: Sequence[Any]) -> None:
        """A RepeatedField at ``at``: inline (SOO) when it fits in 8 bytes, else on the heap."""
        raw = struct.pack("<%d%s" % (len(values), fmt), *values)
        if len(raw) <= 8 and len(values) <= 3:
            self.mem.write(at, struct.pack("<Q", len(values)) + raw.ljust(8, b"\0"))
        else:
            data = self.alloc(len(raw) + 8)
            self.mem.write(data, raw)
            self.mem.write(at, struct.pack("<Qii", data | 4, len(values), len(values)))

    def shape(self, dims: Sequence[int]) -> int:
        m = self.message(SHAPE_VPTR, 56)
        self.ptr_field(m + 24, [self._dim(d) for d in dims])
        return m

    def _dim(self, size: int) -> int:
        d = self.message(SHAPE_VPTR + 8, 40)
        self.mem.write(d + 32, struct.pack("<q", size))
        return d

    def value(self, case: int, value: Any) -> bytes:
        """The 8 bytes of an AttrValue's value_ for ``case``."""
        if case == 2:
            return struct.pack("<Q", self.string(value.encode()))
        if case == 4:
            return struct.pack("<f", value).ljust(8, b"\0")
        if case == 1:  # a list of ints, or of strings
            m = self.message(LIST_VPTR, 200)
            if value and isinstance(value[0], str):
                self.ptr_field(m + 16, [self.string(v.encode()) for v in value])
            else:
                self.repeated(m + 40, "q", value)
            return struct.pack("<Q", m)
        if case == 7:
            return struct.pack("<Q", self.shape(value))
        return struct.pack("<q", value)

    def attrs(self, entries: Sequence[Tuple[str, int, Any]], buckets: int = 4, kinds: int = 0x65,
              count: int = -1) -> Dict[str, Any]:
        """The attr map (a chain per bucket), the UntypedMapBase right before name_; what the reader reads."""
        table = self.alloc(8 * buckets)
        heads: List[int] = [0] * buckets
        for i, (key, case, value) in enumerate(entries):
            node = self.alloc(72)
            self.mem.write(node + 8, self.mem.read(self.string(key.encode()), 32))
            self.mem.write(node + 40, struct.pack("<QQ", ATTR_VPTR, 0) + self.value(case, value) +
                           struct.pack("<iI", 0, case))
            self.mem.u64(node, heads[i % buckets])
            heads[i % buckets] = node
        self.mem.write(table, struct.pack("<%dQ" % buckets, *heads))
        n = len(entries) if count < 0 else count
        self.mem.write(NAME_AT - 32, struct.pack("<IIIHBBQQ", n, buckets, 0, 72, 40, kinds, table, 0))
        return read_attrs(InputsReader(self.mem), KERNEL, LAYOUT)


def test_the_attributes_the_corpus_needs():
    got = Node().attrs([("T", 6, 1), ("depth_radius", 3, 1), ("bias", 4, 1.5), ("padding", 2, "VALID"),
                        ("use_peephole", 5, 1), ("strides", 1, [1, 2, 2, 1]), ("dilations", 1, [1]),
                        ("data_format", 2, "a data format longer than 15"), ("shape", 7, [2, -1]),
                        ("tags", 1, ["a", "b"]), ("Tidx", 6, 109)])
    assert got == {"attrs": {"T": "float32", "Tidx": "int64_ref", "bias": 1.5, "data_format": "a data format "
                             "longer than 15", "depth_radius": 1, "dilations": {"list": [1]},
                             "padding": "VALID", "shape": {"shape": [2, -1]}, "strides": {"list": [1, 2, 2, 1]},
                             "tags": {"list": ["a", "b"]}, "use_peephole": True}}


def test_a_value_that_fails_a_check_is_left_out_with_its_reason():
    got = Node().attrs([("T", 6, 77), ("ok", 3, -4), ("odd", 11, 0), ("flag", 5, 7), ("f", 8, 0)])
    assert got["attrs"] == {"ok": -4}
    assert got["attrs_unread"] == ("T: DataType 77; f: a tensor attribute; flag: a bool of value 7; "
                                   "odd: an AttrValue whose value case is 11")


def test_a_map_that_is_not_the_attr_map_is_not_read():
    assert Node().attrs([("T", 6, 1)], kinds=0x55)["attrs_unread"].startswith(  # nor protobuf 3.21's (below)
        "the map before the NodeDef's name is not a map<string, message> (kinds 0x55); as protobuf 3.21's: ")
    assert Node().attrs([("T", 6, 1), ("U", 6, 1)], count=3) == {
        "attrs_unread": "2 entries in a map that says 3"}


def test_no_nodedef_whose_names_are_the_kernels():
    node = Node()
    node.mem.write(KERNEL + 200, struct.pack("<QQQQ", 10, HEAP + 0x30000, 6, HEAP + 0x30010))
    assert read_attrs(InputsReader(node.mem), KERNEL, LAYOUT) == {
        "attrs_unread": "no NodeDef whose name and op are the kernel's in its NodeProperties"}
    assert read_attrs(InputsReader(node.mem), KERNEL, None) == {"attrs_unread": "the OpKernel's name was not found"}


from tfnative.core.tensorflow import opdefs as od  # noqa: E402  (protobuf 3.21's tests, below)
from tfnative.core.tensorflow.nodeattrs import AttrsReader  # noqa: E402


class Pb3Node(Node):
    """The same NodeDef in protobuf 3.21's layout (the TF 2.16 wheel's): an InnerMap of 48 bytes before name_, nodes
    ``{key, AttrValue, next}``, RepeatedField ``{size, capacity, elements}``, RepeatedPtrField ``{arena, size,
    capacity, rep}``, no has-bits in a TensorShapeProto or an OpDef."""

    def ptr_field(self, at: int, pointers: Sequence[int]) -> None:
        rep = self.alloc(8 + 8 * len(pointers))
        self.mem.write(rep, struct.pack("<Q%dQ" % len(pointers), len(pointers), *pointers))
        self.mem.write(at, struct.pack("<QiiQ", 0, len(pointers), len(pointers), rep if pointers else 0))

    def repeated(self, at: int, fmt: str, values: Sequence[Any]) -> None:
        data = self.alloc(8 * len(values) + 8)
        self.mem.write(data, struct.pack("<%d%s" % (len(values), fmt), *values))
        self.mem.write(at, struct.pack("<iiQ", len(values), len(values) + 1, data if values else 0))

    def shape(self, dims: Sequence[int]) -> int:
        m = self.message(SHAPE_VPTR, 48)
        self.ptr_field(m + 16, [self._dim(d) for d in dims])
        return m

    def _dim(self, size: int) -> int:
        d = self.message(SHAPE_VPTR + 8, 32)
        self.mem.write(d + 24, struct.pack("<q", size))
        return d

    def attrs(self, entries: Sequence[Tuple[str, int, Any]], buckets: int = 8, kinds: int = 0,
              count: int = -1, tree: bool = False) -> Dict[str, Any]:
        self.reader = AttrsReader(InputsReader(self.mem))
        table = self.alloc(8 * buckets)
        heads: List[int] = [0] * buckets
        for i, (key, case, value) in enumerate(entries):
            node = self.alloc(72)
            self.mem.write(node, self.mem.read(self.string(key.encode()), 32))
            self.mem.write(node + 32, struct.pack("<QQ", ATTR_VPTR, 0) + self.value(case, value) +
                           struct.pack("<iI", 0, case))
            self.mem.u64(node + 64, heads[i % buckets])
            heads[i % buckets] = node
        if tree:
            heads[1] = heads[0]
        self.mem.write(table, struct.pack("<%dQ" % buckets, *heads))
        n = len(entries) if count < 0 else count
        self.mem.write(NAME_AT - 48, struct.pack("<6Q", n, buckets, 0x1234, 0, table, 0))
        return read_attrs(InputsReader(self.mem), KERNEL, LAYOUT, self.reader)


def test_protobuf_321_attributes():
    """TF 2.16's protobuf 3.21: the same attributes read, in its map and repeated fields' layout."""
    got = Pb3Node().attrs([("T", 6, 1), ("depth_radius", 3, 1), ("bias", 4, 1.5), ("padding", 2, "VALID"),
                           ("strides", 1, [1, 2, 2, 1]), ("dilations", 1, []), ("shape", 7, [2, -1]),
                           ("tags", 1, ["a", "b"]), ("data_format", 2, "a data format longer than 15")])
    assert got == {"attrs": {"T": "float32", "bias": 1.5, "data_format": "a data format longer than 15",
                             "depth_radius": 1, "dilations": {"list": []}, "padding": "VALID",
                             "shape": {"shape": [2, -1]}, "strides": {"list": [1, 2, 2, 1]},
                             "tags": {"list": ["a", "b"]}}}


def test_protobuf_321_map_checked():
    """Neither layout's check passes: nothing is read, both reasons given; a tree bucket is not walked."""
    assert Pb3Node().attrs([("T", 6, 1), ("U", 6, 1)], count=3) == {
        "attrs_unread": "the map before the NodeDef's name is not a map<string, message> (kinds 0x0); as protobuf "
                        "3.21's: 2 entries in a map that says 3"}
    assert Pb3Node().attrs([("T", 6, 1)], buckets=6)["attrs_unread"].endswith(
        "as protobuf 3.21's: a map of 1 entries, 6 buckets (first 0)")
    tree = Pb3Node().attrs([("T", 6, 1), ("U", 6, 1)], tree=True)
    assert tree["attrs_unread"].endswith("a map bucket that is a tree")


def test_protobuf_321_opdef():
    """The OpDef in protobuf 3.21's layout (every field 8 before 6.x's): inputs' names, attributes and defaults."""
    node = Pb3Node()
    node.attrs([("T", 6, 1)])
    opdef = node.message(VTABLES + 0xA0, 160)
    node.mem.u64(PROPS, opdef)
    node.mem.u64(opdef + od.OPDEF_NAME - 8, node.string(b"Conv2D"))
    args = []
    for name, type_attr in (("input", b"T"), ("filter", b"T")):
        arg = node.message(VTABLES + 0xA8, 96)
        node.mem.u64(arg + od.ARG_NAME - 8, node.string(name.encode()))
        for off in (od.ARG_TYPE_ATTR, od.ARG_NUMBER_ATTR, od.ARG_TYPE_LIST_ATTR):
            node.mem.u64(arg + off - 8, node.string(type_attr if off == od.ARG_TYPE_ATTR else b""))
        args.append(arg)
    node.ptr_field(opdef + od.OPDEF_INPUTS - 8, args)
    attr = node.message(VTABLES + 0xB0, 64)
    node.mem.u64(attr + od.ATTR_NAME - 8, node.string(b"padding"))
    node.mem.u64(attr + od.ATTR_TYPE - 8, node.string(b"string"))
    default = node.message(ATTR_VPTR, 32)
    node.mem.write(default + 16, node.value(2, "SAME") + struct.pack("<iI", 0, 2))
    node.mem.u64(attr + od.ATTR_DEFAULT - 8, default)
    node.ptr_field(opdef + od.OPDEF_ATTRS - 8, [attr])
    assert od.read_opdef(node.reader, KERNEL, "Conv2D") == {"opdef": {
        "inputs": [{"name": "input", "type_attr": "T"}, {"name": "filter", "type_attr": "T"}],
        "attrs": {"padding": {"type": "string", "default": "SAME"}}}}
    assert od.read_opdef(node.reader, KERNEL, "Conv3D") == {
        "opdef_unread": "the NodeProperties' OpDef is not op Conv3D's"}
