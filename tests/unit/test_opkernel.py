"""The op reader on OpKernel objects built in fake memory: which op a kernel frame runs, and what it refuses."""

from __future__ import annotations

import struct

from tfnative.core.model import Op, frames_from_json
from tfnative.core.tensorflow.opkernel import (
    FrameContext,
    OpKernelReader,
    graph_op_type,
    inherit_device_ops,
    op_frames,
    op_of_frame,
)

from .fakemem import FakeMemory

COMPUTE = 0x7F00_0010_0000  # the kernel's virtual Compute, as a frame's function start
OTHER = 0x7F00_0020_0000
HEAP, STACK = 0x5500_0000_0000, 0x7FFF_0000_0000
FIELDS_AT = 200  # TF 2.21's name_view_ offset; the reader must find it by itself


def _kernel(mem: FakeMemory, at: int, vtable: int, function: int, name: bytes, op_type: bytes,
            length_first: bool = True) -> int:
    mem.u64(vtable + 8 * 3, function)  # some slot of the vtable holds the frame's function
    mem.u64(at, vtable)
    strings = at + 0x400
    mem.write(strings, name)
    mem.write(strings + 0x100, op_type)
    for i, (ptr, length) in enumerate(((strings, len(name)), (strings + 0x100, len(op_type)))):
        pair = (length, ptr) if length_first else (ptr, length)
        mem.write(at + FIELDS_AT + 16 * i, struct.pack("<QQ", *pair))
    mem.write(at + FIELDS_AT + 32, struct.pack("<i", 1800))  # graph_def_version_
    return at


def _memory() -> FakeMemory:
    mem = FakeMemory()
    mem.map(HEAP, 0x10000)
    mem.map(STACK, 0x4000)
    return mem


def test_kernel_found_in_a_callee_saved_register():
    mem = _memory()
    obj = _kernel(mem, HEAP, HEAP + 0x8000, COMPUTE, b"model/dense/MatMul", b"MatMul")
    op = op_of_frame(OpKernelReader(mem), FrameContext(COMPUTE, COMPUTE + 0x40, 1, {"rbx": 0x1234, "r13": obj}, {},
                                                       STACK, STACK + 0x100))
    assert op == {"type": "MatMul", "name": "model/dense/MatMul", "kernel": "0x%x" % obj}


def test_kernel_found_on_the_stack_in_libcxx_layout_and_layout_remembered():
    mem = _memory()
    obj = _kernel(mem, HEAP, HEAP + 0x8000, COMPUTE, b"bad_pad_conv", b"FusedPadConv2D", length_first=False)
    mem.u64(STACK + 0x80, obj)
    reader = OpKernelReader(mem)
    op = op_of_frame(reader, FrameContext(COMPUTE, COMPUTE + 0x99, 2, {}, {}, STACK, STACK + 0x1000))
    assert op is not None and (op["type"], op["name"]) == ("FusedPadConv2D", "bad_pad_conv")
    assert reader.layout == (FIELDS_AT, False)


def test_an_object_whose_vtable_lacks_the_function_is_not_taken():
    mem = _memory()
    decoy = _kernel(mem, HEAP, HEAP + 0x8000, OTHER, b"decoy", b"Decoy")
    op = op_of_frame(OpKernelReader(mem), FrameContext(COMPUTE, COMPUTE + 0x40, 1, {"rbx": decoy}, {}, STACK,
                                                       STACK + 0x100))
    assert op is None


def test_entry_of_the_device_compute_takes_its_first_argument():
    mem = _memory()
    obj = _kernel(mem, HEAP, HEAP + 0x8000, COMPUTE, b"Log", b"Log")
    op = op_of_frame(OpKernelReader(mem), FrameContext(0x7F00_0030_0000, 0x7F00_0030_0004, 0, {"rsi": obj}, {},
                                                       STACK, STACK + 0x100), device=True)
    assert op is not None and op["type"] == "Log"
    # past the entry the argument register is gone: no guess
    assert op_of_frame(OpKernelReader(mem), FrameContext(0x7F00_0030_0000, 0x7F00_0030_0080, 1, {"rsi": obj}, {},
                                                         STACK, STACK + 0x100), device=True) is None


def test_garbage_and_unmapped_pointers_are_refused_in_bounded_reads():
    mem = _memory()
    for i in range(0, 0x4000, 8):
        mem.u64(STACK + i, 0xDEAD_BEEF_0000 + i * 8)  # unmapped, aligned, plausible-looking
    reader = OpKernelReader(mem)
    assert op_of_frame(reader, FrameContext(COMPUTE, COMPUTE + 1, 3, {}, {}, STACK, STACK + 0x100000)) is None
    assert mem.reads <= 0x4000 // 8 + 2  # one vtable read per word at most, the stack read once


def test_op_frames_and_device_inheritance():
    frames = frames_from_json([
        {"kind": "native", "level": 0,
         "function": "tensorflow::UnaryOp<Eigen::ThreadPoolDevice, tensorflow::functor::log<float> >"
                     "::Compute(tensorflow::OpKernelContext*)", "op": {"type": "Log", "name": "Log"}},
        {"kind": "native", "level": 1,
         "function": "tensorflow::ThreadPoolDevice::Compute(tensorflow::OpKernel*, tensorflow::OpKernelContext*)"},
        {"kind": "python", "function": "f"},
    ])
    assert [device for _, device in op_frames(frames)] == [False, True]
    inherit_device_ops(frames)
    assert frames[1].op == Op(type="Log", name="Log")


def test_onednn_kernels_are_named_by_the_graphs_op_type():
    mem = _memory()
    obj = _kernel(mem, HEAP, HEAP + 0x8000, COMPUTE, b"dense/MatMul", b"_MklMatMul")
    op = OpKernelReader(mem).info(obj)
    assert op is not None and (op["type"], op["kernel_type"]) == ("MatMul", "_MklMatMul")
    assert [graph_op_type(t) for t in ("_MklNativeConv2D", "_MklFusedMatMul", "_MklFusedBatchNormV3", "MatMul",
                                       "_Mkl", "_MklxYz", "_EagerConst")] == [
        "Conv2D", "_FusedMatMul", "FusedBatchNormV3", "MatMul", "_Mkl", "_MklxYz", "_EagerConst"]
