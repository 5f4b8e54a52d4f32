"""What an op's shape function saw (``core/tensorflow/shapefn.py``), read from an ``InferenceContext`` built in
fake memory in the layout of TF 2.21's headers (``shape_inference.h``), with its NodeDef as
``test_nodeattrs.py`` builds one; then the script that traces the op again (``analysis/shapefnrepro.py``,
``output/reprotext.py``)."""

from __future__ import annotations

import struct
from typing import List, Optional, Sequence

import pytest

from tfnative.analysis.reproducer import NoRepro
from tfnative.analysis.shapefnrepro import call_of_shape_fn, model_of
from tfnative.core.model import CrashSummary, Document, Op
from tfnative.core.tensorflow.kernelinputs import InputsReader
from tfnative.core.tensorflow.opkernel import FrameContext
from tfnative.core.tensorflow.shapefn import read_shape_fn
from tfnative.output.reprotext import script

from .test_nodeattrs import NAME_AT, PROPS, VTABLES, Node

NDEF = NAME_AT - 96  # the NodeDef in test_nodeattrs' NodeProperties: its name_ at 96
CTX_WORDS_USED = 32
NDEF_WORD = 26  # attrs_.ndef_ in the context, after ret_types_ and graph_def_version_


class Context(Node):
    """A NodeDef (``model/conv``, op ``Conv2D``, its attributes) and an InferenceContext for it."""

    def shape(self, dims: Optional[Sequence[Optional[int]]]) -> int:  # type: ignore[override]
        handles = [self._dimension(d) for d in dims or []]
        vec = self.alloc(8 * len(handles) + 8)
        self.mem.write(vec, struct.pack("<%dQ" % len(handles), *handles))
        s = self.alloc(32)
        self.mem.write(s, struct.pack("<iiQQQ", -1 if dims is None else len(handles), 0, vec, vec + 8 * len(handles),
                                      vec + 8 * len(handles)))
        return s

    def _dimension(self, value: Optional[int]) -> int:
        d = self.alloc(8)
        self.mem.write(d, struct.pack("<q", -1 if value is None else value))
        return d

    def scalar_int32(self, value: int) -> int:
        """A Tensor: TensorShapeRep (no dims, dtype int32, rank 0, tag 0), num_elements 1, its TensorBuffer."""
        data = self.alloc(8)
        self.mem.write(data, struct.pack("<i", value))
        tbuf = self.alloc(24)
        self.mem.write(tbuf, struct.pack("<QQQ", VTABLES + 0xC0, 1, data))
        t = self.alloc(32)
        self.mem.write(t, bytes(13) + bytes([3, 0, 0]) + struct.pack("<qQ", 1, tbuf))
        return t

    def context(self, shapes: List[int], tensors: List[int], version: int = 1994, inputs_named: int = 3) -> int:
        self.attrs([("T", 6, 1), ("padding", 2, "VALID")])
        self.mem.write(NDEF + 32, struct.pack("<i", inputs_named))  # its input_'s size (protobuf 6.x)
        ctx = self.alloc(8 * CTX_WORDS_USED)
        words = [0] * CTX_WORDS_USED
        inputs, consts = self.alloc(8 * len(shapes)), self.alloc(8 * len(tensors))
        self.mem.write(inputs, struct.pack("<%dQ" % len(shapes), *shapes))
        self.mem.write(consts, struct.pack("<%dQ" % len(tensors), *tensors))
        words[6:12] = [inputs, inputs + 8 * len(shapes), inputs + 8 * len(shapes),
                       consts, consts + 8 * len(tensors), consts + 8 * len(tensors)]
        words[NDEF_WORD - 1], words[NDEF_WORD] = version, NDEF
        self.mem.write(ctx, struct.pack("<%dQ" % CTX_WORDS_USED, *words))
        return ctx


def _read(node: Node, ctx: int) -> dict:
    frame = FrameContext(0, 0, 3, {"rbx": PROPS, "r12": ctx}, {}, 0, 0)
    return read_shape_fn(InputsReader(node.mem), [frame])


def test_the_shapes_constants_and_attributes_a_shape_function_saw():
    c = Context()
    ctx = c.context([c.shape([2, None]), c.shape(None), c.shape([])], [0, 0, c.scalar_int32(7)])
    assert _read(c, ctx) == {
        "type": "Conv2D", "name": "model/conv", "shape_fn": True,
        "inputs": [{"shape": [2, None]}, {"shape": None},
                   {"dtype": "int32", "shape": [], "values": [7], "constant": True}],
        "attrs": {"T": "float32", "padding": "VALID"}}


@pytest.mark.parametrize("case", ["rank_without_its_dims", "no_nodedef", "a_version_no_graph_has",
                                  "a_nodedef_of_fewer_inputs"])
def test_a_context_that_fails_a_check_is_refused(case):
    c = Context()
    good = c.shape([2, 3])
    bad = good
    if case == "rank_without_its_dims":
        bad = c.alloc(32)
        c.mem.write(bad, struct.pack("<iiQQQ", 2, 0, 0, 0, 0))  # rank 2, no dims
    ctx = c.context([good, bad], [0, 0], version=1 << 30 if case == "a_version_no_graph_has" else 1994,
                    inputs_named=1 if case == "a_nodedef_of_fewer_inputs" else 2)
    if case == "no_nodedef":
        c.mem.write(NAME_AT - 32, bytes(32))  # no attr map before the NodeDef's name_: not a NodeDef
    assert _read(c, ctx) == {"inputs_unread": "no InferenceContext with its inputs' shapes and its NodeDef in the "
                                              "shape function's frame"}


GATHER = {"type": "GatherV2", "name": "GatherV2", "shape_fn": True,
          "inputs": [{"shape": [2, None]}, {"shape": None}, {"dtype": "int32", "shape": [], "values": [1],
                                                             "constant": True}],
          "attrs": {"Taxis": "int32", "Tindices": "int64", "Tparams": "float32", "batch_dims": 5}}
GATHER_DEF = {"inputs": [{"name": "params", "type_attr": "Tparams"}, {"name": "indices", "type_attr": "Tindices"},
                         {"name": "axis", "type_attr": "Taxis"}],
              "attrs": {"batch_dims": {"type": "int", "default": 0}, "Tparams": {"type": "type"},
                        "Tindices": {"type": "type"}, "Taxis": {"type": "type"}},
              "params": ["params", "indices", "axis", "batch_dims", "name"], "function": "tf.raw_ops.GatherV2"}


def _crash(op: dict) -> Document:
    return Document(pid=7, argv=["x.py"], triage=CrashSummary(signal="SIGABRT", op=Op.from_triage_json(op)))


def test_the_script_traces_the_op_with_those_shapes():
    call = call_of_shape_fn(model_of(_crash(GATHER)), GATHER_DEF)
    text, big = script(call, "repro.py.npz")
    assert big == {}
    assert text == (
        "import tensorflow as tf\n\n\n"
        "@tf.function(input_signature=[tf.TensorSpec([2, None], tf.float32), tf.TensorSpec(None, tf.int64)])\n"
        "def traced(params, indices):\n"
        "    axis = tf.constant(1, dtype=tf.int32)\n"
        "    return tf.raw_ops.GatherV2(params=params, indices=indices, axis=axis, batch_dims=5)\n\n\n"
        "traced.get_concrete_function()  # tracing runs GatherV2's shape function on these shapes\n")


def test_a_dtype_not_read_gives_no_script():
    attrs = dict(GATHER["attrs"])
    del attrs["Tparams"]
    with pytest.raises(NoRepro, match="the dtype of input params was not read"):
        call_of_shape_fn(model_of(_crash(dict(GATHER, attrs=attrs))), GATHER_DEF)
