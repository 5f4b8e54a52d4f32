"""analysis.event.make_event on crash captures shaped like the real ones: which thread a crashing pool thread works
for, eager ops against tf.functions, thread labels, paths (no gdb, no TensorFlow).

The frames are those of real TF 2.21 crashes, abridged: a ``tf.data`` map function aborting in
``FusedPadConv2D`` on an inter-op thread while the main thread waits in ``IteratorGetNext``, and the same
op run eagerly through its generated ``*_eager_fallback`` (op callbacks on, as under ``--check-numerics``).
"""

import os

from tfnative.analysis import event as analysis
from tfnative.core.model import (
    Capture,
    Document,
    EventThread,
    Op,
    TfFunction,
    Thread,
    captured_frames_from_json,
    thread_label,
)
from tfnative.output import render, report

SITE = "/venv/lib/python3.11/site-packages/tensorflow/python"
APP = "/home/me/app.py"
FW = "libtensorflow_framework.so.2"
CC = "libtensorflow_cc.so.2"


def n(function, library=FW, op=None):
    out = {"kind": "native", "function": function, "library": library, "address": "0x1"}
    if op:
        out["op"] = op
    return out


def py(function, line, file=APP, **extra):
    return dict({"kind": "python", "function": function, "file": file, "line": line}, **extra)


ABORT = [n("__pthread_kill_implementation", "libc.so.6"), n("raise", "libc.so.6"), n("abort", "libc.so.6"),
         n("absl::lts_20250814::log_internal::LogMessage::FailWithoutStackTrace()")]
KERNEL = [n("tensorflow::FusedResizeConv2DUsingGemmOp<float, false>::Compute(tensorflow::OpKernelContext*)", CC,
            op={"type": "FusedPadConv2D", "name": "FusedPadConv2D"})]
WORKER = ABORT + KERNEL + [
    n("tensorflow::ThreadPoolDevice::Compute(tensorflow::OpKernel*, tensorflow::OpKernelContext*)"),
    n("tensorflow::(anonymous namespace)::ExecutorState<tensorflow::SimplePropagatorState>::Process("
      "tensorflow::SimplePropagatorState::TaggedNode const&, long)"),
    n("Eigen::ThreadPoolTempl<tsl::thread::EigenEnvironment>::WorkerLoop(int)"),
    n("start_thread", "libc.so.6")]
GET_NEXT = [n("syscall", "libc.so.6"),
            n("tensorflow::data::IteratorGetNextOp::DoCompute(tensorflow::OpKernelContext*)", CC),
            n("TFE_Execute", CC),
            py("iterator_get_next", 3081, SITE + "/ops/gen_dataset_ops.py"),
            py("OwnedIterator.__next__", 826, SITE + "/data/ops/iterator_ops.py"),
            py("<module>", 15)]
FALLBACK = ABORT + KERNEL + [
    n("TFE_Execute", CC),
    py("quick_execute", 53, SITE + "/eager/execute.py", locals={"op_name": "FusedPadConv2D"}),
    py("execute_with_callbacks", 124, SITE + "/eager/execute.py"),
    py("fused_pad_conv2d_eager_fallback", 5351, SITE + "/ops/gen_nn_ops.py"),
    py("fused_pad_conv2d", 5306, SITE + "/ops/gen_nn_ops.py"),
    py("<module>", 4, "/home/me/sub/../app.py")]
FUNCTION = [n("TFE_Execute", CC),
            py("quick_execute", 53, SITE + "/eager/execute.py", locals={"op_name": "__inference_step_24"}),
            py("AtomicFunction.call_flat", 251, SITE + "/eager/polymorphic_function/atomic_function.py"),
            py("train", 20)]


def thread(tid, frames, name="python", python_name=None):
    return Thread(tid=tid, name=name, frames=captured_frames_from_json(frames), python_name=python_name)


def crash(*threads, selected):
    capture = Capture(pid=100, threads=list(threads), selected_tid=selected)
    return analysis.make_event("signal", capture, signal="SIGABRT")


def triage(event):
    doc = Document(pid=100, events=[event], exit={"signal": "SIGABRT"})
    return analysis.document_triage(doc)


def test_a_tf_data_map_crash_names_the_waiting_thread_and_the_users_line():
    event = crash(thread(101, WORKER), thread(100, GET_NEXT, python_name="MainThread"), selected=101)
    worker = event.threads[0]
    assert worker.tid == 101
    assert worker.works_for.to_json() == {"tid": 100, "waits_in": "the next element of a tf.data iterator",
                                          "how": "only thread waiting in TensorFlow"}
    t = triage(event)
    assert t.nearest_user_frame == {"function": "<module>", "file": APP, "line": 15}
    assert t.op.type == "FusedPadConv2D"
    lines = []
    report.Printer(_Out(lines)).event(event)
    assert "working for thread 100, which waits for the next element of a tf.data iterator" in "".join(lines)


def test_no_waiting_thread_is_named_where_two_could_be_waiting():
    other = thread(102, [n("TFE_Execute", CC), py("step", 30)])
    event = crash(thread(101, WORKER), thread(100, GET_NEXT), other, selected=101)
    assert event.threads[0].works_for is None
    assert triage(event).nearest_user_frame is None


def test_an_eager_fallback_op_is_no_tf_function():
    event = crash(thread(100, FALLBACK), selected=100)
    t = event.threads[0]
    assert t.tf_function is None
    tr = triage(event)
    assert tr.tf_function is None
    assert tr.op.type == "FusedPadConv2D"
    assert tr.eager is True
    phrases = report.summary_phrases(tr)
    assert not any("in tf.function" in p for p in phrases) and "the op ran eagerly" in phrases


def test_a_custom_ops_eager_fallback_is_no_tf_function():
    """The wrappers ``tf.load_op_library`` generates run as exec'd code (file ``<string>``): a custom op
    called eagerly is no tf.function either (it read ``in tf.function ? (ZeroOut)``)."""
    frames = ABORT + KERNEL + [
        n("TFE_Execute", CC),
        py("quick_execute", 53, SITE + "/eager/execute.py", locals={"op_name": "ZeroOut"}),
        py("zero_out_eager_fallback", 100, "<string>"), py("zero_out", 56, "<string>"), py("<module>", 4)]
    event = crash(thread(100, frames), selected=100)
    assert event.threads[0].tf_function is None
    tr = triage(event)
    assert tr.tf_function is None and tr.eager is True
    lines = []
    report.Printer(_Out(lines)).event(event)
    assert "in tf.function" not in "".join(lines)


def test_a_crash_with_no_op_dispatch_is_not_called_eager():
    event = crash(thread(100, FUNCTION), selected=100)
    assert triage(event).eager is False


def test_a_real_tf_function_call_is_one():
    event = crash(thread(100, FUNCTION), selected=100)
    assert event.threads[0].tf_function == TfFunction(name="__inference_step_24", python_function="step")


def test_the_op_comes_from_the_generated_op_when_no_kernel_frame_is_left(tmp_path):
    ops = tmp_path / "tensorflow" / "python" / "ops"
    ops.mkdir(parents=True)
    gen = ops / "gen_audio_ops.py"
    gen.write_text("def audio_spectrogram(input, window_size, stride):\n"
                   "  try:\n"
                   "    _result = pywrap_tfe.TFE_Py_FastPathExecute(\n"
                   "      _ctx, \"AudioSpectrogram\", name, input, \"window_size\", window_size)\n")
    frames = captured_frames_from_json([n("PyErr_Occurred", "libpython3.11.so.1.0"),
                               py("audio_spectrogram", 3, str(gen)), py("<module>", 7)])
    event = crash(Thread(tid=100, name="python", frames=frames), selected=100)
    tr = triage(event)
    assert tr.op == Op(type="AudioSpectrogram", from_="gen_audio_ops.audio_spectrogram")
    assert "op `AudioSpectrogram` (from `gen_audio_ops.audio_spectrogram`)" in "; ".join(
        report.summary_phrases(tr, "`"))


def test_paths_are_normal_and_labels_match_the_text():
    event = crash(thread(100, FALLBACK, python_name="MainThread"), thread(101, WORKER, name="tf_Compute"),
                  selected=100)
    main = event.threads[0]
    assert [f.file for f in main.frames if f.kind == "python"][-1] == "/home/me/app.py"
    assert main.label == "MainThread" and main.to_json()["label"] == "MainThread"
    assert event.threads[1].label == "tf_Compute"
    # a core keeps no OS names: threading's name, or nothing
    assert thread_label(EventThread(tid=5, name="", python_name="loader"), "") == "loader"
    assert report.thread_display_name(EventThread(tid=6, name=""), "") == '""'


def test_a_rewritten_kernel_shows_the_node_not_the_kernel_type_as_its_name():
    assert render.op_label(Op(type="Conv2D", name="_MklNativeConv2D", kernel_type="_MklNativeConv2D")) \
        == "Conv2D (oneDNN kernel _MklNativeConv2D)"
    assert render.op_label(Op(type="MatMul", name="model/dense/MatMul", kernel_type="_MklMatMul")) \
        == 'MatMul "model/dense/MatMul" (oneDNN kernel _MklMatMul)'
    assert render.op_label(Op(type="MatMul", name="MatMul")) == "MatMul"


def test_normal_path():
    assert analysis.normal_path("/x/core/../app.py") == "/x/app.py"
    assert analysis.normal_path("/x/./app.py") == "/x/app.py"
    assert analysis.normal_path("app.py") == "app.py"
    assert analysis.normal_path("<frozen runpy>") == "<frozen runpy>"
    assert analysis.normal_path(None) is None
    assert os.path.isabs(analysis.normal_path("/a//b.py"))


class _Out:
    def __init__(self, lines):
        self.lines = lines

    def write(self, text):
        self.lines.append(text)

    def flush(self):
        pass


def test_a_check_in_a_custom_ops_shape_function_names_the_op_being_built():
    """A CHECK in a custom op's own shape function aborts while a graph adds the op: no kernel frame, no
    generated wrapper file; ``_apply_op_helper``'s ``op_type_name`` names it."""
    frames = ABORT + [
        n("tensorflow::ShapeRefiner::RunShapeFn(...)"), n("TF_FinishOperation", CC),
        py("_create_c_op", 1100, SITE + "/framework/ops.py"),
        py("_apply_op_helper", 796, SITE + "/framework/op_def_library.py", locals={"op_type_name": "ShapeCheck"}),
        py("shape_check", 72, "<string>"), py("run", 29)]
    tr = triage(crash(thread(100, frames), selected=100))
    assert tr.op == Op(type="ShapeCheck", from_="_apply_op_helper")
    assert tr.eager is False and tr.tf_function is None
