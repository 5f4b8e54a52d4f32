"""A resource input's handle and variable (``core/tensorflow/resources.py``, through ``kernelinputs.InputsReader``) on
``ResourceHandle`` and ``Var`` objects built in fake memory in TF 2.21's layout (as read from a real crash's core) and
moved about: what is read, what is refused and why; then what the reproducer makes of it (``model_of``, the
script)."""

from __future__ import annotations

import struct
from typing import List, Optional, Sequence

import pytest

from tfnative.analysis.reproducer import NoRepro, model_of
from tfnative.core.model import CrashSummary, Document, Op
from tfnative.core.tensorflow.kernelinputs import InputsReader, read_whole_tensors
from tfnative.core.tensorflow.resources import type_label
from tfnative.output.reprotext import script

from .fakemem import FakeMemory

HEAP, VTABLES = 0x5500_0000_0000, 0x7F00_0100_0000
TENSOR, HANDLE, SHAPES, VAR, DATA, STRINGS = (HEAP + 0x100, HEAP + 0x400, HEAP + 0x800, HEAP + 0xA00, HEAP + 0xC00,
                                              HEAP + 0xE00)
FLOAT, INT32, RESOURCE = 1, 3, 20
DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"


def _string(mem: FakeMemory, at: int, text: str, heap: int) -> None:
    raw = text.encode()
    if len(raw) < 16:
        mem.write(at, struct.pack("<QQ", at + 16, len(raw)) + raw.ljust(16, b"\0"))
    else:
        mem.write(heap, raw)
        mem.write(at, struct.pack("<QQQQ", heap, len(raw), len(raw), 0))


def _shape(dims: Optional[Sequence[int]], dtype: int = 0) -> bytes:
    """A TensorShapeRep (16 bytes, then num_elements): None for an unknown rank, -1 for an unknown dim."""
    buf = bytearray(16)
    if dims is None:
        buf[14], num = 255, -1
    else:
        struct.pack_into("<%dH" % len(dims), buf, 0, *[0xFFFF if d < 0 else d for d in dims])
        buf[14], num = len(dims), -1 if any(d < 0 for d in dims) else 1
        for d in dims:
            num *= d if num >= 0 else 1
    buf[13] = dtype
    return bytes(buf) + struct.pack("<q", num)


class Built:
    """A scalar DT_RESOURCE tensor whose buffer holds a ResourceHandle, and the Var it points to."""

    def __init__(self, type_name: str = "N10tensorflow3VarE", handle_dims: Optional[List[int]] = None,
                 var_dtype: int = FLOAT, values: Sequence[float] = (10.5, 20.5, 30.5), resource_word: int = 24,
                 tensor_word: int = 5, pointer: bool = True) -> None:
        self.mem = mem = FakeMemory()
        mem.map(HEAP, 0x2000)
        mem.map(VTABLES, 0x100)
        buf = HEAP + 0x40  # the DT_RESOURCE tensor's TensorBuffer: vptr, refcount, data
        mem.write(buf, struct.pack("<QQQ", VTABLES + 0x10, 1, HANDLE))
        mem.write(TENSOR, _shape([], RESOURCE) + struct.pack("<Q", buf))
        _string(mem, HANDLE, DEVICE, STRINGS)
        _string(mem, HANDLE + 32, "Anonymous", 0)
        _string(mem, HANDLE + 64, "Variable/0", 0)
        mem.u64(HANDLE + 96, 0xF23C5122FE0979E5)  # hash_code_
        _string(mem, HANDLE + 104, type_name, STRINGS + 0x80)
        mem.write(HANDLE + 136, struct.pack("<3Q", SHAPES, SHAPES + 32, SHAPES + 32))
        dims = [len(values)] if handle_dims is None else handle_dims
        mem.write(SHAPES, struct.pack("<i4x", FLOAT) + _shape(dims))
        mem.write(HANDLE + 160, struct.pack("<4Q", VTABLES + 0x30, 0, 0, 0x1180201))  # the stack trace's words
        if pointer:
            mem.u64(HANDLE + 8 * resource_word, VAR)
        mem.write(VAR, struct.pack("<QQQQ", VTABLES + 0x20, 2, HEAP + 0x1800, 0x101))  # vptr, refs, weak, flags
        n = len(values)
        fmt = "<%d%s" % (n, "f" if var_dtype == FLOAT else "i")
        mem.write(VAR + 8 * tensor_word, _shape([n], var_dtype) + struct.pack("<Q", DATA))
        mem.write(DATA, struct.pack("<QQQ", VTABLES + 0x40, 1, DATA + 0x40))
        mem.write(DATA + 0x40, struct.pack(fmt, *[int(v) if var_dtype == INT32 else v for v in values]))

    def read(self) -> dict:
        return InputsReader(self.mem).tensor(TENSOR, RESOURCE, values=True)


def test_a_variables_handle_and_value_are_read():
    got = Built().read()
    assert got == {"dtype": "resource", "shape": [], "resource": {
        "device": DEVICE, "container": "Anonymous", "name": "Variable/0", "type": "N10tensorflow3VarE",
        "variable": {"dtype": "float32", "shape": [3], "values": [10.5, 20.5, 30.5]}}}


@pytest.mark.parametrize("resource_word,tensor_word", [(22, 3), (26, 7)])
def test_the_resource_pointer_and_the_vars_tensor_are_found_where_they_are(resource_word, tensor_word):
    got = Built(resource_word=resource_word, tensor_word=tensor_word).read()
    assert got["resource"]["variable"]["values"] == [10.5, 20.5, 30.5], got


def test_an_unknown_rank_in_the_handle_admits_the_variables_shape():
    """A variable made with ``shape=tf.TensorShape(None)`` (tests/scripts/tf_resource_gather.py's)."""
    assert Built(handle_dims=None).read()["resource"]["variable"]["shape"] == [3]
    b = Built()
    b.mem.write(SHAPES + 8, _shape(None))
    assert b.read()["resource"]["variable"]["shape"] == [3]


def test_another_resource_is_named_and_refused():
    got = Built(type_name="N10tensorflow9FIFOQueueE").read()["resource"]
    assert got["type"] == "N10tensorflow9FIFOQueueE" and "variable" not in got, got
    assert got["unread"] == "a tensorflow::FIFOQueue, not a variable (tfnative rebuilds variables alone)"


NOT_BEHIND = ("no variable of the handle's dtype and shape behind its handle (a handle without a pointer to its "
              "resource names one kept in a ResourceMgr, which tfnative does not read)")


def test_a_handle_without_its_resources_pointer_says_so():
    assert Built(pointer=False).read()["resource"]["unread"] == NOT_BEHIND
    b = Built(pointer=False)
    b.mem.write(HANDLE + 160, bytes(64))  # no word after the vector is a pointer
    assert b.read()["resource"]["unread"].startswith("its handle holds no pointer to the variable")


@pytest.mark.parametrize("built", [dict(var_dtype=INT32), dict(handle_dims=[4])])
def test_a_variable_that_disagrees_with_its_handle_is_not_taken(built):
    """The Var's tensor must be of the handle's dtype and of a shape the handle's admits."""
    got = Built(**built).read()["resource"]
    assert got["unread"] == NOT_BEHIND, got


def test_garbage_gives_a_reason_never_an_exception():
    b = Built()
    b.mem.write(HANDLE, b"\xff" * 200)
    got = b.read()["resource"]
    assert list(got) == ["unread"] and got["unread"].startswith("its ResourceHandle was not read: "), got


def _crash(inputs):
    op = {"type": "ResourceGather", "name": "ResourceGather", "inputs": inputs,
          "attrs": {"batch_dims": 1, "dtype": "float32", "validate_indices": True, "Tindices": "int32"},
          "call": {"inputs": ["resource", "indices"], "attrs": {"batch_dims": 1, "dtype": "float32"}}}
    return Document(pid=7, argv=["x.py"], triage=CrashSummary(signal="SIGABRT", op=Op.from_triage_json(op)))


INDICES = {"dtype": "int32", "shape": [3], "values": [1, 3, 4]}


def test_the_script_makes_the_variable_and_passes_its_handle():
    model = model_of(_crash([Built().read(), INDICES]))
    assert model["inputs"][0] == {"dtype": "float32", "shape": [3], "values": [10.5, 20.5, 30.5], "variable": True}
    call = dict(model, function="tf.raw_ops.ResourceGather", args=[["resource", 0], ["indices", 1]],
                call_attrs={"batch_dims": 1}, attr_types={"batch_dims": "int"})
    text, big = script(call, "r.py.npz")
    assert text.splitlines()[2:] == [
        "resource = tf.Variable(tf.constant([10.5, 20.5, 30.5], shape=[3], dtype=tf.float32))",
        "indices = tf.constant([1, 3, 4], shape=[3], dtype=tf.int32)",
        "tf.raw_ops.ResourceGather(resource=resource.handle, indices=indices, batch_dims=1)"], text
    assert big == {}


def test_a_variable_of_more_than_64_elements_is_made_from_the_data_file():
    read_whole_tensors()  # as --repro does
    try:
        model = model_of(_crash([Built(values=[float(i) for i in range(100)]).read(), INDICES]))
    finally:
        read_whole_tensors(0)
    call = dict(model, function="tf.raw_ops.ResourceGather", args=[["resource", 0], ["indices", 1]],
                call_attrs={}, attr_types={})
    text, big = script(call, "r.py.npz")
    assert "resource = tf.Variable(tf.constant(data['resource']))" in text and list(big) == ["resource"], text


def test_a_resource_that_is_no_variable_refuses_the_script_naming_the_input_and_why():
    with pytest.raises(NoRepro) as exc:
        model_of(_crash([Built(type_name="N10tensorflow9FIFOQueueE").read(), INDICES]))
    assert str(exc.value) == ("op ResourceGather: input 0 (resource), resource Variable/0, is not rebuilt: a "
                              "tensorflow::FIFOQueue, not a variable (tfnative rebuilds variables alone)")


@pytest.mark.parametrize("mangled,label", [
    ("N10tensorflow3VarE", "tensorflow::Var"), ("N10tensorflow6lookup15LookupInterfaceE",
                                                  "tensorflow::lookup::LookupInterface"),
    ("", "resource of no type name"), ("N10tensorflowE9", "N10tensorflowE9"), ("N99xE", "N99xE")])
def test_a_resources_type_as_cxx_writes_it(mangled, label):
    assert type_label(mangled) == label


def test_a_document_with_a_resource_input_is_a_valid_schema_v1_document():
    """``merge`` reads such documents back: the input's ``resource`` is in the schema (``core/docschema.py``)."""
    from tfnative.core.docschema import SchemaError, check_document

    written = _crash([Built().read(), INDICES]).to_json()
    check_document(written)
    written["triage"]["op"]["inputs"][0]["resource"]["variable"]["shape"] = "3"
    with pytest.raises(SchemaError, match=r"triage\.op\.inputs\[0\]\.resource\.variable\.shape"):
        check_document(written)
