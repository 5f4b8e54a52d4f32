"""One ``Op`` type for every op in memory (issue #43, item 4): a kernel frame's, an event's, the crash triage's,
read from recorded documents and written back in each place's own key order."""

import json
from pathlib import Path

import pytest

from tfnative.analysis.event import document_triage
from tfnative.core.model import CrashSummary, Document, Event, NativeFrame, Op, PythonFrame

DATA = Path(__file__).parent / "data"


def load(name):
    return json.loads((DATA / name).read_text())


def test_a_recorded_gradients_ops_are_ops_with_their_forward_and_creation():
    d = load("doc_origins_grad.json")
    doc = Document.from_json(d)
    op = doc.events[0].op
    assert isinstance(op, Op) and (op.type, op.name) == ("SqrtGrad", "gradient_tape/SqrtGrad")
    assert isinstance(op.forward, Op) and op.forward.type == "Sqrt"
    assert op.created_at[0].function == "<module>" and op.created_where is None
    assert all(isinstance(f, PythonFrame) for f in op.created_at + op.forward.created_at)
    triage = doc.triage
    assert isinstance(triage, CrashSummary) and isinstance(triage.op, Op)
    assert triage.op.created_where == {"file": "/work/wt6/tests/scripts/tf_sqrt_grad.py", "line": 10,
                                       "function": "step"}
    assert triage.op.created_at is None and triage.op.forward.created_where["line"] == 9
    assert json.dumps(doc.to_json()) == json.dumps(d)


@pytest.mark.parametrize("name", ["doc_origins_grad.json", "doc_numerics_xla.json"])
def test_the_triage_made_from_the_typed_event_op_is_the_recorded_one(name):
    """Analysis reads the event's ``Op`` (its creation stack, the XLA functions, the forward op) and makes the
    triage's ``Op`` (the user's line alone): written, the same bytes as the recorded triage's op."""
    d = load(name)
    doc = Document.from_json(d)
    made = document_triage(doc).op
    assert isinstance(made, Op)
    assert json.dumps(made.triage_json()) == json.dumps(d["triage"]["op"])


def test_a_numerics_op_says_where_the_nan_came_from_in_each_place_in_its_order():
    doc = Document.from_json(load("doc_numerics_xla.json"))
    assert doc.events[0].op.from_xla == ["one_step_on_data"] == doc.triage.op.from_xla
    assert list(doc.events[0].op.event_json()) == ["type", "name", "created_at", "from_xla"]
    assert list(doc.triage.op.triage_json()) == ["type", "name", "from_xla", "created_at"]


def test_an_ops_fields_of_the_event_and_triage_never_reach_a_frames_json():
    op = Op(type="Log", name="Log", from_="gen_math_ops.log", from_xla=["f"], created_at=[],
            created_where={"file": "a.py", "line": 1, "function": "f"}, forward=Op(type="Exp"))
    assert NativeFrame(function="LogOp::Compute", op=op).to_json()["op"] == {"type": "Log", "name": "Log"}
    assert Op.from_json(op.to_json()) == Op(type="Log", name="Log")


def test_an_op_named_from_its_python_wrapper_is_written_as_before():
    """No kernel frame left: the triage's op is the wrapper's (``from``), its name null, written as the dict
    ``analysis/pyop.py`` used to give."""
    t = CrashSummary(signal="SIGABRT", op=Op(type="AudioSpectrogram", from_="gen_audio_ops.audio_spectrogram"))
    written = t.to_json()["op"]
    assert json.dumps(written) == json.dumps({"type": "AudioSpectrogram", "name": None,
                                              "from": "gen_audio_ops.audio_spectrogram"})
    assert CrashSummary.from_json(t.to_json()).op == t.op


def test_an_event_without_an_op_writes_none_and_a_break_op_hit_its_type_and_name():
    assert "op" not in Event(kind="snapshot").to_json()
    hit = Event(kind="breakpoint", location="op MatMul", op=Op(type="MatMul", name="dense/MatMul"))
    assert hit.to_json()["op"] == {"type": "MatMul", "name": "dense/MatMul"}
    assert Event.from_json(hit.to_json()).op == hit.op


def test_the_watchs_reproducer_reads_the_triages_op_inputs():
    """``watch --out``: no reproducer where the triage's op has no inputs read, nor without a crash summary (an
    ``Op``, not a dict, is what it reads)."""
    import io

    from tfnative.watch.crashwatch import write_repro

    err = io.StringIO()
    for triage in (None, CrashSummary(signal="SIGSEGV"), CrashSummary(signal="SIGSEGV", op=Op(type="X"))):
        assert write_repro(None, "/nonexistent/crash-1", Document(pid=7, triage=triage), err) is None
    assert err.getvalue() == ""


def test_a_queue_kernels_op_names_the_queue_it_waits_on():
    """The wait-for graph reads a dequeue kernel's ``Op`` (its type and node name) for the resource it waits on."""
    from tfnative.analysis.event import analyze
    from tfnative.core.model import Capture, Thread

    kernel = NativeFrame("tensorflow::DequeueOp::ComputeAsync(tensorflow::OpKernelContext*, std::function<void ()>)",
                         library="libtensorflow_framework.so.2", op=Op(type="QueueDequeueV2", name="q/deq"))
    frames = [NativeFrame("pthread_cond_wait", library="libc.so.6"), kernel]
    event = analyze("snapshot", Capture(pid=5, threads=[Thread(tid=5, name="python", frames=frames)], selected_tid=5),
                    hang=True)
    (wait,) = event.triage.waits
    assert wait.resource == "the TensorFlow queue of q/deq"
    assert wait.evidence.startswith("QueueDequeueV2 dequeues from an empty queue")
