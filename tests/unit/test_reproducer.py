"""Which crashes give a reproducer (``analysis/reproducer.model_of``), on documents built here."""

import pytest

from tfnative.analysis.reproducer import NoRepro, model_of
from tfnative.core.model import CrashSummary, Document, Op

RESHAPE = {"type": "Reshape", "name": "Reshape",
           "inputs": [{"dtype": "float32", "shape": [5], "values": [0.0] * 5},
                      {"dtype": "int32", "shape": [2], "values": [0, -1]}],
           "attrs": {"T": "float32", "Tshape": "int32"}}


def crash(op):
    return Document(pid=7, argv=["x.py"], triage=CrashSummary(signal="SIGFPE", op=Op.from_triage_json(op)))


def test_an_op_whose_inputs_and_attributes_were_read_gives_its_model():
    model = model_of(crash(RESHAPE))
    assert model["op"] == "Reshape" and model["attrs"] == RESHAPE["attrs"]
    assert [(i["dtype"], i["shape"], i["values"]) for i in model["inputs"]] == [
        ("float32", [5], [0.0] * 5), ("int32", [2], [0, -1])]


@pytest.mark.parametrize("op_type", ["EagerPyFunc", "PyFunc", "PyFuncStateless"])
def test_an_op_that_runs_the_programs_python_gives_none(op_type):
    """tf.py_function's kernel calls the program's Python back: a crash there is in code no script of the op's
    inputs carries (tests/integration/test_core_report.py's core: no 'for a standalone script' line)."""
    with pytest.raises(NoRepro, match="runs a Python function of the program"):
        model_of(crash(dict(RESHAPE, type=op_type, inputs=[], attrs={"token": "pyfunc_0"})))


def test_no_fatal_signal_gives_none():
    with pytest.raises(NoRepro, match="no fatal signal"):
        model_of(Document(pid=7, argv=["x.py"], triage=CrashSummary(op=Op.from_triage_json(RESHAPE))))


def test_a_tensor_all_zeros_or_ones_is_written_as_such_whatever_its_size():
    """tf.zeros/tf.ones where every value is exactly that (no data file for it); -0.0 and an int's True are not."""
    from tfnative.output.reprotext import script

    call = {"op": "X", "function": "tf.raw_ops.X", "call_attrs": {}, "attr_types": {},
            "args": [["a", 0], ["b", 1], ["c", 2], ["d", 3]],
            "inputs": [{"dtype": "float32", "shape": [100, 3], "values": [0.0] * 300},
                       {"dtype": "bool", "shape": [2], "values": [True, True]},
                       {"dtype": "float64", "shape": [2], "values": [0.0, -0.0]},
                       {"dtype": "int32", "shape": [70], "values": [1] * 69 + [2]}]}
    text, big = script(call, "r.py.npz")
    assert "a = tf.zeros([100, 3], dtype=tf.float32)" in text and "b = tf.ones([2], dtype=tf.bool)" in text, text
    assert "c = tf.constant([0.0, -0.0], shape=[2], dtype=tf.float64)" in text, text
    assert list(big) == ["d"] and "d = tf.constant(data['d'])" in text, text


def test_the_checks_fatal_line_in_either_log_format():
    """The check reads the re-run's ``Check failed`` line in absl's format (TF 2.21, 2.22) and in TensorFlow's own
    (TF 2.16): both compare with the line read from the original's memory (which ends with it)."""
    from tfnative.attach.repro import _fatal_line

    absl = "F0000 00:00:1795865127.083229    1200 tensor_shape.cc:362] Check failed: d < dims() (2 vs. 2) \n"
    tf216 = ("2026-11-28 11:19:58.559630: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on.\n"
             "2026-11-28 11:19:58.559630: F tensorflow/core/framework/tensor_shape.cc:357] Check failed: d < dims() "
             "(1 vs. 1)\nFatal Python error: Aborted\n")
    assert _fatal_line(absl) == "tensor_shape.cc:362] Check failed: d < dims() (2 vs. 2)"
    assert _fatal_line(tf216) == "tensorflow/core/framework/tensor_shape.cc:357] Check failed: d < dims() (1 vs. 1)"
    assert _fatal_line("2026-11-28 11:19:58.559630: I x.cc:1] Check failed: no\n") is None
