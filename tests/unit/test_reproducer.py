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


# -- a --break-op stop's script (attach/repro.make_stop) ---------------------------------------------------------
def stop(op, library=None, frame_class="tensorflow-native"):
    """A --break-op stop's event: the thread that stopped, its innermost kernel frame carrying ``op`` as the
    capture read it (``Op.from_json``: a kernel frame's keys)."""
    from tfnative.core.model import Event, EventNativeFrame, EventThread

    kernel = EventNativeFrame(function="tensorflow::ReshapeOp::Compute(tensorflow::OpKernelContext*)", library=library,
                         op=Op.from_json(dict(op, kernel="0x5555")), frame_class=frame_class)
    return Event(kind="breakpoint", location="op %s" % op["type"], op=Op(type=op["type"], name=op["name"]),
                 threads=[EventThread(tid=1, frames=[EventNativeFrame(function="memcpy"), kernel])])


def test_a_stops_op_gives_the_model_a_crash_of_the_same_op_gives():
    """A stop's op and a crash's go through the one typed path (``model_of_op``): the same model."""
    from tfnative.analysis.reproducer import model_of_op, stop_op

    op, library = stop_op(stop(RESHAPE))
    assert op.type == "Reshape" and library is None
    assert model_of_op(op, library) == model_of(crash(RESHAPE))


def test_a_stops_op_in_the_users_library_loads_it():
    from tfnative.analysis.reproducer import model_of_op, stop_op

    op, library = stop_op(stop(dict(RESHAPE, type="ZeroOut"), library="/src/zero_out.so", frame_class="user"))
    assert library == "/src/zero_out.so" and model_of_op(op, library)["library"] == "/src/zero_out.so"


def test_a_stop_without_a_kernel_frame_or_with_unread_inputs_gives_none():
    from tfnative.analysis.reproducer import model_of_op, stop_op
    from tfnative.core.model import Event

    assert stop_op(Event(kind="breakpoint")) is None
    op, _ = stop_op(stop(dict(RESHAPE, inputs=[RESHAPE["inputs"][0], {"unread": "a dangling buffer"}])))
    with pytest.raises(NoRepro, match="input 1 was not read: a dangling buffer"):
        model_of_op(op, None)


def test_a_stops_script_keeps_and_prints_the_ops_outputs():
    from tfnative.output.reprotext import script

    call = {"op": "Reshape", "function": "tf.raw_ops.Reshape", "call_attrs": {}, "attr_types": {}, "onednn": True,
            "args": [["tensor", 0], ["shape", 1]], "inputs": RESHAPE["inputs"]}
    text, big = script(call, "r.py.npz", stop=True)
    assert not big and text.splitlines()[-2:] == ["result = tf.raw_ops.Reshape(tensor=tensor, shape=shape)",
                                                  "print(result)"], text
    assert "oneDNN's kernel" in text and "crash" not in text, text
    assert script(call, "r.py.npz")[0].splitlines()[-1] == "tf.raw_ops.Reshape(tensor=tensor, shape=shape)"


@pytest.mark.parametrize("check, said", [
    ({"outcome": "returned", "outputs": [{"dtype": "float32", "shape": [5, 1]}]}, "alone, it returned float32[5,1]"),
    ({"outcome": "returned", "outputs": []}, "alone, it returned no output"),
    ({"outcome": "raised", "error": "InvalidArgumentError: Input to reshape is a tensor with 5 values"},
     "alone, it raised InvalidArgumentError: Input to reshape is a tensor with 5 values"),
    ({"outcome": "died", "signal": "SIGSEGV"}, "alone, it died of SIGSEGV"),
    ({"outcome": "timeout", "error": "it still ran after 300 s"}, "alone, it still ran after 300 s"),
    ({"outcome": "skipped"}, "not run (--no-repro-check)")])
def test_a_stops_check_says_what_the_script_did_and_claims_no_crash(check, said):
    from tfnative.output.reprotext import stop_check_line

    line = stop_check_line("r.2.py", 5, "Reshape", 2, check)
    assert line == "tfnative: repro: r.2.py (5 lines) runs op Reshape on the inputs of hit 2; " + said
    assert "crash" not in line and "reproduc" not in line and "original" not in line


@pytest.mark.parametrize("path, n, named", [
    ("repro.py", 1, "repro.py"), ("repro.py", 2, "repro.2.py"), ("d/r.x.py", 3, "d/r.x.3.py"), ("out", 2, "out.2"),
    ("d.x/out", 2, "d.x/out.2"), (".hidden", 2, ".hidden.2"), ("-", 2, "-")])
def test_the_scripts_of_a_session_are_numbered_before_the_suffix(path, n, named):
    from tfnative.attach.repro import numbered

    assert numbered(path, n) == named


def test_an_events_reproducer_is_in_the_schema():
    from tfnative.core.docschema import SchemaError, check_document

    rep = {"path": "/w/r.py", "op": "MatMul", "attrs": {}, "inputs": [{"dtype": "float32", "shape": [2, 2]}],
           "check": {"outcome": "returned", "outputs": [{"dtype": "float32", "shape": [2, 2]}]}}
    doc = {"tfnative": 1, "events": [{"kind": "breakpoint", "location": "op MatMul", "reproducer": rep}]}
    check_document(doc)
    rep["check"]["outputs"] = "float32[2,2]"
    with pytest.raises(SchemaError):
        check_document(doc)


@pytest.mark.parametrize("body, outcome", [
    ("result = None\n", {"outcome": "returned", "outputs": []}),
    ("raise ValueError('Matrix size-incompatible: In[0]: [2,2]\\nmore')\n",
     {"outcome": "raised", "error": "ValueError: Matrix size-incompatible: In[0]: [2,2]"}),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", {"outcome": "died", "signal": "SIGSEGV"}),
    ("import time\ntime.sleep(30)\n", {"outcome": "timeout", "error": "it still ran after 2 s"})])
def test_a_stops_check_runs_the_script_alone_and_reads_what_it_did(tmp_path, body, outcome):
    """``check_stop`` runs the script in a fresh process as ``python FILE`` would (plain Python scripts here: what
    it reads of a TensorFlow result is ``tests/integration/test_break_op_repro.py``'s)."""
    import sys

    from tfnative.attach.repro import check_stop

    path = tmp_path / "r.py"
    path.write_text(body)
    assert check_stop(sys.executable, str(path), timeout=2) == outcome
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.py"]
