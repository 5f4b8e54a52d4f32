"""The reader of a kernel's inputs (``core/tensorflow/kernelinputs.py``) on OpKernel, OpKernelContext, Params and Tensor
objects built in fake memory, in TF 2.21's layout (and the older ``InlinedVector*`` one): what it reads, and
what it drops with a reason."""

from __future__ import annotations

import struct
from typing import List, Optional, Sequence, Tuple

from tfnative.core.model import Op
from tfnative.core.tensorflow.kernelinputs import InputsReader, read_inputs
from tfnative.core.tensorflow.opkernel import FrameContext
from tfnative.output.opinputs import input_label, inputs_line

from .fakemem import FakeMemory

COMPUTE = 0x7F00_0010_0000
HEAP, STACK, VTABLES = 0x5500_0000_0000, 0x7FFF_0000_0000, 0x7F00_0100_0000
KERNEL, PROPS, CTX, PARAMS, DEVICE = HEAP, HEAP + 0x400, HEAP + 0x1000, HEAP + 0x1100, HEAP + 0x1400
VALUES_AT, TENSORS_AT = HEAP + 0x2000, HEAP + 0x3000
FLOAT, INT32, INT64 = 1, 3, 9


class Built:
    """One kernel and its context in fake memory, TF 2.21's offsets (the reader must find them itself)."""

    def __init__(self, types: Sequence[int], span: bool = True) -> None:
        self.mem = mem = FakeMemory()
        mem.map(HEAP, 0x10000)
        mem.map(STACK, 0x1000)
        mem.map(VTABLES, 0x100)
        for obj in (KERNEL, CTX, DEVICE):
            mem.u64(obj, VTABLES + 0x10)
        mem.u64(KERNEL + 8, PROPS)  # props_ (a shared_ptr's element pointer)
        # NodeProperties: op_def, NodeDef (136 bytes), input_types (InlinedVector<DataType, 4>), its span
        mem.u64(PROPS, HEAP + 0x9000)
        n = len(types)
        if n <= 4:
            mem.u64(PROPS + 144, n << 1)
            mem.write(PROPS + 152, struct.pack("<%di" % n, *types))
            data = PROPS + 152
        else:
            data = HEAP + 0x9800
            mem.write(PROPS + 144, struct.pack("<3Q", n << 1 | 1, data, n))
            mem.write(data, struct.pack("<%di" % n, *types))
        mem.write(PROPS + 168, struct.pack("<QQ", data, n))
        mem.u64(CTX + 16, PARAMS)  # OpKernelContext: vptr, status_, params_
        mem.write(PARAMS, struct.pack("<QQ", 7, 1234))  # step_id, start_time_usecs
        mem.write(PARAMS + 40, struct.pack("<QQ", KERNEL, DEVICE))  # op_kernel, device
        self.tensors: List[int] = []
        self.span = span
        self.next_data = VALUES_AT

    def tensor(self, dtype: int, dims: Sequence[int], values: bytes = b"", tag: Optional[int] = None,
               num: Optional[int] = None, buffer: bool = True) -> int:
        at = TENSORS_AT + 0x80 * len(self.tensors)
        rank = len(dims)
        count = 1
        for d in dims:
            count *= d
        tag = tag if tag is not None else (0 if rank <= 6 and all(d < 0xFFFF for d in dims) else 2)
        shape = bytearray(16)
        if tag == 0:
            struct.pack_into("<%dH" % rank, shape, 0, *dims)
        elif tag == 1:
            struct.pack_into("<%dI" % rank, shape, 0, *dims)
        else:  # out of line: a pointer to an InlinedVector<int64_t, 4>
            vec = at + 0x40
            self.mem.write(vec, struct.pack("<Q%dq" % rank, rank << 1, *dims))
            struct.pack_into("<Q", shape, 0, vec)
        shape[13], shape[14], shape[15] = dtype, rank, tag
        buf = 0
        if buffer:
            buf = self.next_data
            data = buf + 0x20
            self.mem.write(buf, struct.pack("<QQQ", VTABLES + 0x40, 1, data))
            self.mem.write(data, values or bytes(8 * max(count, 1)))
            self.next_data = data + max(len(values), 8 * max(count, 1)) + 0x10
        self.mem.write(at, bytes(shape) + struct.pack("<qQ", count if num is None else num, buf))
        self.tensors.append(at)
        return at

    def inputs(self, pointers: Optional[List[int]] = None) -> None:
        pointers = self.tensors if pointers is None else pointers
        values = HEAP + 0x6000
        self.mem.write(values, b"".join(struct.pack("<QQ", 0, t) for t in pointers))
        if self.span:
            self.mem.write(PARAMS + 184, struct.pack("<QQ", values, len(pointers)))
        else:  # TF before the Span: const gtl::InlinedVector<TensorValue, 4>* inputs
            vec = HEAP + 0x7000
            self.mem.write(vec, struct.pack("<QQQ", len(pointers) << 1 | 1, values, len(pointers)))
            self.mem.u64(PARAMS + 168, vec)

    def read(self, regs: Optional[dict] = None, stack: Tuple[int, ...] = ()) -> dict:
        for i, word in enumerate(stack):
            self.mem.u64(STACK + 0x100 + 8 * i, word)
        frame = FrameContext(COMPUTE, COMPUTE + 0x99, 3, regs if regs is not None else {"rbx": CTX}, {},
                             STACK, STACK + 0x800)
        return read_inputs(InputsReader(self.mem), frame, KERNEL)


def test_inputs_read_with_their_dtypes_shapes_and_small_values():
    b = Built([FLOAT, INT32])
    b.tensor(FLOAT, [5], struct.pack("<5f", *[-3.5] * 5))
    b.tensor(INT32, [5], struct.pack("<5i", 0, 1879048192, 100000000, 1610612736, -1))
    b.inputs()
    got = b.read()
    assert got == {"inputs": [{"dtype": "float32", "shape": [5], "values": [-3.5] * 5},
                              {"dtype": "int32", "shape": [5], "values": [0, 1879048192, 100000000, 1610612736, -1]}]}
    assert inputs_line(Op(type="Reshape", **got)) == "op Reshape(float32[5], int32[5]=[0,1879048192,100000000," \
                                                       "1610612736,-1])"


def test_the_older_inlined_vector_pointer_and_a_context_on_the_stack():
    b = Built([INT64, FLOAT, FLOAT], span=False)
    b.tensor(INT64, [], struct.pack("<q", 5))
    b.tensor(FLOAT, [1, 1, 1])
    b.tensor(FLOAT, [0], buffer=False)  # an empty tensor has no buffer
    b.inputs()
    got = b.read(regs={}, stack=(0x1234, CTX))
    assert [input_label(e) for e in got["inputs"]] == ["int64[]=5", "float32[1,1,1]", "float32[0]"]


def test_32_bit_and_out_of_line_shapes():
    b = Built([FLOAT, FLOAT])
    b.tensor(FLOAT, [70000, 0, 3], tag=1)
    b.tensor(FLOAT, [1, 1, 1, 1, 1, 1, 0, 2])  # rank 8: out of line
    b.inputs()
    assert [e["shape"] for e in b.read()["inputs"]] == [[70000, 0, 3], [1, 1, 1, 1, 1, 1, 0, 2]]


def test_a_tensor_that_fails_a_check_is_dropped_with_its_reason():
    b = Built([FLOAT, INT32, FLOAT, FLOAT])
    b.tensor(FLOAT, [2, 2])
    b.tensor(INT32, [3], num=7)  # dims that do not make num_elements_
    b.tensor(INT32, [1])  # not the dtype the kernel takes
    b.tensors.append(HEAP + 0xFFF00)  # unmapped
    b.inputs()
    got = b.read()["inputs"]
    assert got[0] == {"dtype": "float32", "shape": [2, 2], "values": [0.0] * 4}
    assert "num_elements 7" in got[1]["unread"]
    assert "where the kernel takes float32" in got[2]["unread"]
    assert "not readable" in got[3]["unread"]
    assert "values" not in got[1] and "dtype" not in got[2]
    assert inputs_line(Op(type="X", inputs=got)) == "op X(float32[2,2], ?, ?, ?)"


def test_a_list_of_another_length_than_the_kernels_inputs_is_not_taken():
    b = Built([FLOAT, FLOAT, FLOAT])
    b.tensor(FLOAT, [1])
    b.tensor(FLOAT, [1])
    b.inputs()
    got = b.read()
    assert "no list of 3 input tensors" in got["inputs_unread"]


def test_no_context_running_the_kernel():
    b = Built([FLOAT])
    b.tensor(FLOAT, [1])
    b.inputs()
    b.mem.write(PARAMS + 40, struct.pack("<Q", HEAP + 0x8888))  # another kernel's Params
    assert "no OpKernelContext running this kernel" in b.read()["inputs_unread"]


def test_garbage_memory_gives_reasons_never_an_exception():
    import random
    rng = random.Random(45)
    for _ in range(30):
        b = Built([FLOAT, INT32])
        b.tensor(FLOAT, [2])
        b.tensor(INT32, [2])
        b.inputs()
        for _ in range(200):  # scribble over the whole chain
            at = HEAP + rng.randrange(0, 0x8000, 8)
            b.mem.u64(at, rng.choice([0, 1, rng.getrandbits(64), HEAP + rng.randrange(0, 0x10000), STACK]))
        got = b.read(stack=tuple(HEAP + rng.randrange(0, 0x8000, 8) for _ in range(64)))
        assert set(got) in ({"inputs"}, {"inputs_unread"})
        assert b.mem.reads < 20000  # bounded


def test_non_finite_floats_are_strings_and_large_tensors_carry_no_values():
    b = Built([FLOAT, FLOAT])
    b.tensor(FLOAT, [3], struct.pack("<3f", float("nan"), float("inf"), 1.5))
    b.tensor(FLOAT, [10, 10])
    b.inputs()
    got = b.read()["inputs"]
    assert got[0]["values"] == ["nan", "inf", 1.5]
    assert got[1] == {"dtype": "float32", "shape": [10, 10]}
