"""The typed model (tfnative/core/model.py) on real documents: to_json(from_json(doc)) gives the same bytes.

The documents under data/ were written by tfnative itself on a real TensorFlow process
(tests/scripts/tf_hang.py: ``stack --pid -a``, ``stack --pid -a --with-gdb``, ``stack --pid --locals
--samples 2``) and on a real crash (``attach --op-origins tests/scripts/tf_segv.py``).  The captures
there are the wire form of the same process: ``tf-bt -a --json`` in gdb (``-tfnative-capture``'s JSON)
and ``snapshot.take(pid, Threads.PYTHON, variables=True)``'s.
"""

import dataclasses
import json
from pathlib import Path

import pytest

from tfnative.core import model
from tfnative.core.elide import elide
from tfnative.core.model import Capture, Document, ElidedFrame, Event, EventThread, NativeFrame, PythonFrame, Thread

DATA = Path(__file__).parent / "data"
DOCS = sorted(DATA.glob("doc_*.json"))
CAPTURES = sorted(DATA.glob("capture_*.json"))


def load(name):
    return json.loads((DATA / name).read_text())


@pytest.mark.parametrize("path", DOCS, ids=[p.stem for p in DOCS])
def test_round_trip_is_byte_identical(path):
    text = path.read_text()
    doc = Document.from_json(json.loads(text))
    # written as report.Document.write writes a document
    assert json.dumps(doc.to_json(), indent=1) + "\n" == text


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_capture_round_trip_is_byte_identical(path):
    text = path.read_text()
    capture = Capture.from_json(json.loads(text))
    assert json.dumps(capture.to_json(), indent=1) + "\n" == text


def test_an_op_is_written_in_the_order_each_place_of_schema_v1_gives_it():
    """Schema v1 writes an op in three shapes: a frame's (type, name, kernel_type, kernel...), an event's and
    the triage's, and these two order the same keys differently (a NaN out of XLA: ``created_at`` before
    ``from_xla`` on the event, after it in the triage; a gradient's ``forward``: ``name`` first on the event,
    ``type`` first in the triage).  In memory each is one ``Op`` (issue #43, item 4); the serialiser writes it
    in each place's order (``core/framemodel.py``'s three key tables), so these bytes stay until a schema v2."""
    numerics, grad = load("doc_numerics_xla.json"), load("doc_origins_grad.json")
    assert list(numerics["events"][0]["op"]) == ["type", "name", "created_at", "from_xla"]
    assert list(numerics["triage"]["op"]) == ["type", "name", "from_xla", "created_at"]
    assert list(grad["events"][0]["op"]["forward"]) == ["name", "type", "created_at"]
    assert list(grad["triage"]["op"]["forward"]) == ["type", "name", "created_at"]
    for d in (numerics, grad):
        assert json.dumps(Document.from_json(d).to_json()) == json.dumps(d)


def test_capture_typed_with_its_internal_fields():
    gdb = Capture.from_json(load("capture_gdb.json"))
    assert gdb.via is None and gdb.python == "3.11" and gdb.pool.threads >= 1
    main = gdb.threads[0]
    assert main.tid == gdb.pid and main.merge == "ok" and main.gdb_thread == 1 and main.has_python()
    native = [f for f in main.frames if isinstance(f, NativeFrame)]
    assert [f.level for f in native] == sorted(f.level for f in native)  # gdb's frame numbers, kept
    merged = [f for f in main.frames if isinstance(f, PythonFrame)]
    assert merged and all(f.eval_address for f in merged)
    # the event's types carry what the report sets (class, source): a capture's frames have no place for them
    assert all(type(f) in (NativeFrame, PythonFrame) and not hasattr(f, "frame_class") and not hasattr(f, "source")
               for f in main.frames)
    worker = next(t for t in gdb.threads if not t.has_python())
    assert "has_python" in worker.capture_json() and not worker.capture_json()["has_python"]
    snap = Capture.from_json(load("capture_snapshot.json"))
    assert snap.via == "cfi" and all(t.kernel for t in snap.threads)
    assert any(isinstance(f, NativeFrame) and f.start and f.op for t in snap.threads for f in t.frames)
    assert any(isinstance(f, PythonFrame) and f.variables for t in snap.threads for f in t.frames)
    with pytest.raises(ValueError):
        Capture.from_json({"threads": [{"name": "no tid"}]})


def test_stack_document_typed():
    doc = Document.from_json(load("doc_stack_a.json"))
    assert not doc.has_exit and "exit" not in doc.to_json()
    assert doc.host and doc.triage.verdict.startswith("the main thread waits for tf.function step")
    (event,) = doc.events
    assert event.kind == "snapshot" and event.via == "cfi" and event.python == "3.11"
    main = event.threads[0]
    assert main.tid == doc.pid and main.python_name == "MainThread"
    assert isinstance(main.frames[0], NativeFrame) and main.frames[0].function == "syscall"
    assert main.frames[0].library == "libc.so.6" and main.frames[0].frame_class == "system"
    user = [f for f in main.frames if isinstance(f, PythonFrame) and f.user]
    assert [(Path(f.file).name, f.function) for f in user] == [("tf_hang.py", "main"), ("tf_hang.py", "<module>")]
    assert main.tf_function.python_function == "step"
    worker = next(t for t in event.threads if t.tf_function and t.tf_function.how)
    assert worker.name == "tf_Compute" and worker.tf_function.called_by == main.tid
    kernels = [f.op.type for f in worker.frames if isinstance(f, NativeFrame) and f.op]
    assert kernels and set(kernels) == {"EagerPyFunc"}
    assert all(t.kernel and t.kernel["state"] for t in event.threads)


def test_gdb_document_keeps_inline_and_tailcall():
    doc = Document.from_json(load("doc_stack_gdb.json"))
    frames = [f for t in doc.threads() for f in t.frames if isinstance(f, NativeFrame)]
    assert doc.events[0].via == "gdb"
    assert any(f.inline for f in frames) and any(f.tailcall for f in frames)
    assert any(f.file and f.line for f in frames)  # gdb reads libc's source lines


def test_samples_document_keeps_locals_and_progress():
    doc = Document.from_json(load("doc_stack_samples.json"))
    event = doc.events[0]
    assert event.samples["count"] == 2
    assert {t.progress for t in event.threads} == {"stuck"}
    variables = [v for t in event.threads for f in t.frames if isinstance(f, PythonFrame)
                 for v in f.variables or []]
    assert {"name": "token", "repr": "'pyfunc_0'", "arg": True} in variables


def test_attach_document_with_a_crash():
    doc = Document.from_json(load("doc_attach_segv.json"))
    assert doc.has_exit and doc.exit == {"signal": "SIGSEGV"}
    (event,) = doc.events
    assert event.kind == "signal" and event.signal == "SIGSEGV" and event.fatal is True
    assert event.handler is False
    assert isinstance(event.op, model.Op) and event.op.type == "EagerPyFunc"
    created = event.op.created_at
    assert all(isinstance(f, PythonFrame) and f.frame_class is None for f in created)
    assert doc.triage.signal == "SIGSEGV"
    assert doc.triage.nearest_user_frame["function"] == "bad_callback"


def test_internal_fields_stay_out_of_json():
    native = NativeFrame.from_json({"kind": "native", "function": "f", "file": None, "line": None,
                                    "library": "libc.so.6", "address": "0x1", "level": 3})
    assert native.level == 3 and "level" not in native.to_json()
    py = PythonFrame.from_json({"kind": "python", "function": "g", "file": "a.py", "line": 2,
                                "eval_address": "0x2"})
    assert py.eval_address == "0x2" and "eval_address" not in py.to_json()
    assert list(py.to_json()) == ["kind", "function", "file", "line"]  # nothing absent is written
    thread = Thread.from_json({"tid": 7, "name": "x", "frames": [], "gdb_thread": 2})
    assert thread.gdb_thread == 2 and "gdb_thread" not in thread.to_json()


def test_mismatch_thread_keeps_both_stacks():
    d = {"tid": 5, "name": "python", "frames": [], "merge": "mismatch", "gil": None,
         "merge_detail": "2 _PyEval_EvalFrameDefault native frame(s) but 3 Python frame(s)",
         "python_frames": [{"kind": "python", "function": "f", "file": "a.py", "line": 1, "user": True}]}
    thread = EventThread.from_json(d)
    assert isinstance(thread.python_frames[0], PythonFrame)
    assert thread.to_json() == d and list(thread.to_json()) == list(d)


def test_elided_frames_round_trip():
    frames = load("doc_stack_a.json")["events"][0]["threads"][0]["frames"]
    cut = [f.to_json() for f in elide(model.frames_from_json(frames), inner=2, outer=2)]
    marker = model.frame_from_json(cut[2])
    assert isinstance(marker, ElidedFrame) and marker.count == len(frames) - 4
    assert cut[:2] + cut[3:] == frames[:2] + frames[-2:]
    assert [model.frame_from_json(f).to_json() for f in cut] == cut


def test_core_event_always_says_its_code_and_address():
    event = Event(kind="core", signal="SIGABRT", pid=9)
    out = event.to_json()
    assert out["signal_code"] is None and out["fault_address"] is None
    assert list(out)[:5] == ["kind", "signal", "signal_code", "fault_address", "thread"]
    assert "signal_code" not in Event(kind="signal", signal="SIGSEGV").to_json()


def test_bad_input():
    with pytest.raises(ValueError):
        model.frame_from_json({"kind": "nonsense"})
    with pytest.raises(ValueError):
        Document.from_json({"tfnative": 2})
    with pytest.raises(ValueError):
        Document.from_json({"tfnative": 1, "events": [{"threads": []}]})  # an event without a kind


def test_one_document_type_from_the_session_to_the_file(tmp_path):
    """An attach document read back gives its own triage again; the exit marks the fatal signal event."""
    from tfnative.analysis.event import document_triage
    from tfnative.output import report

    d = load("doc_attach_segv.json")
    doc = Document.from_json(d)
    assert doc.has_exit and document_triage(doc).to_json() == d["triage"]
    out = tmp_path / "again.json"
    report.write(doc, str(out))
    assert out.read_text() == (DATA / "doc_attach_segv.json").read_text()
    # writing computes nothing: the triage is what analysis stored on the document, or none
    doc.triage = None
    report.write(doc, str(out))
    assert "triage" not in json.loads(out.read_text())
    fresh = Document(argv=["python", "x.py"], pid=3, events=[Event(kind="signal", signal="SIGUSR1"),
                                                             Event(kind="signal", signal="SIGSEGV")])
    assert not fresh.has_exit and "exit" not in fresh.to_json() and fresh.target_name() == "the script"
    fresh.set_exit(-11)
    assert fresh.has_exit and fresh.exit == {"signal": "SIGSEGV"}
    assert [e.fatal for e in fresh.events] == [False, True]
    assert Document(pid=4, attached=True).target_name() == "process 4"
    assert "attached" not in Document(attached=True).to_json()


# -- every recorded document and capture, and the typed leaves ---------------------------------------------
HANG_CAPTURES = sorted((Path(__file__).parents[1] / "hangs" / "captures").glob("*.json"))


def recorded(path):
    """The JSON objects of a recorded file: one (indented), or one a line (a multi-process snapshot)."""
    text = path.read_text().strip()
    if text.startswith("{") and "\n{" in text:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return [json.loads(text)]


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.stem)
def test_every_recorded_object_reads_back_as_it_was(path):
    """Each file of data/: a document or a capture round-trips byte for byte; a trimmed snapshot event
    (pool_*, tfdata_*: frames trimmed to a few keys, with keys of its own) keeps its TRIAGE, its threads' ops
    and tf.functions exactly."""
    d = json.loads(path.read_text())
    if "tfnative" in d:
        assert json.dumps(Document.from_json(d).to_json(), indent=1) + "\n" == path.read_text()
    elif "threads" in d and "kind" not in d:
        assert json.dumps(Capture.from_json(d).to_json(), indent=1) + "\n" == path.read_text()
    elif d.get("kind") in model.EVENT_KINDS:
        event = Event.from_json(d)
        assert isinstance(event.triage, model.HangVerdict)
        assert list(event.triage.to_json().items()) == list(d["triage"].items())
        for t, raw in zip(event.threads, d["threads"]):
            if raw.get("tf_function"):
                assert list(t.tf_function.to_json().items()) == list(raw["tf_function"].items())
            for f, rf in zip(t.frames, raw["frames"]):
                if rf.get("op"):
                    assert list(f.op.to_json().items()) == list(rf["op"].items())
    else:
        assert path.stem.startswith("pyruntime-"), "a recorded file of no known shape"


@pytest.mark.parametrize("path", HANG_CAPTURES, ids=lambda p: p.stem)
def test_recorded_hang_documents_read_back_as_they_were(path):
    """tests/hangs/captures: ``stack --json`` documents with the wait-for graph (waits, cycle, chain)."""
    for d in recorded(path):
        doc = Document.from_json(d)
        assert isinstance(doc.triage, model.HangVerdict) and doc.triage.waits is not None
        # the graph's edges are the model's Wait, read only: an edge another verdict changes is a new one
        edges = doc.triage.waits + (doc.triage.cycle or []) + (doc.triage.chain or [])
        assert all(isinstance(w, model.Wait) for w in edges)
        for w in edges[:1]:
            with pytest.raises(dataclasses.FrozenInstanceError):
                w.resource = "changed"
        assert json.dumps(doc.to_json(), indent=1) == json.dumps(d, indent=1)


def test_op_keys_in_their_order():
    op = model.Op.from_json({"type": "MatMul", "name": "m", "kernel_type": "_MklMatMul", "kernel": "0x10"})
    assert op.kernel_type == "_MklMatMul" and list(op.to_json()) == ["type", "name", "kernel_type", "kernel"]
    assert model.Op(type="Log", name="Log").to_json() == {"type": "Log", "name": "Log"}
    frame = NativeFrame(function="f", op=op, level=2, start=5)
    assert list(frame.capture_json())[-3:] == ["level", "start", "op"] and frame.capture_json()["op"] == op.to_json()
    assert list(frame.to_json())[-1] == "op"
    assert NativeFrame.from_json({"kind": "native", "function": "f", "op": {}}).op is None  # no op read


def test_tf_function_read_or_attributed():
    own = model.TfFunction(name="__inference_step_8", python_function="step")
    assert own.to_json() == {"name": "__inference_step_8", "python_function": "step"}
    given = model.TfFunction.from_json({"name": "__inference_step_8", "python_function": "step",
                                        "called_by": 7, "how": "only tf.function in flight"})
    assert given.called_by == 7 and list(given.to_json()) == ["name", "python_function", "called_by", "how"]
    # a thread writes its own tf.function before the merge's details, an attributed one after its error
    thread = EventThread(tid=1, frames=[], python_frames=[], merge_detail="x", error="e", tf_function=own)
    assert list(thread.to_json()).index("tf_function") < list(thread.to_json()).index("merge_detail")
    thread.tf_function = given
    keys = list(thread.to_json())
    assert keys.index("tf_function") == keys.index("error") + 1 and keys.count("tf_function") == 1
    assert EventThread.from_json(thread.to_json()).tf_function == given
    assert "tf_function" not in thread.capture_json()


def test_child_death_keeps_its_four_keys():
    dead = model.ChildDeath(pid=12, name="python3", signal="SIGSEGV", core_dumped=True)
    assert list(dead.to_json().items()) == [("pid", 12), ("name", "python3"), ("signal", "SIGSEGV"),
                                             ("core_dumped", True)]
    doc = Document(pid=1, children_killed=[dead])
    assert doc.to_json()["children_killed"] == [dead.to_json()]
    assert Document.from_json(doc.to_json()).children_killed == [dead]
    assert "children_killed" not in Document(pid=1).to_json()


def test_hang_verdict_writes_its_graph_together():
    bare = model.HangVerdict(verdict="v")
    assert list(bare.to_json()) == ["verdict", "pattern", "gil_holder", "waiting_for_gil", "waiting_for_function",
                                    "stuck", "moving", "pool"]  # a document from before the wait-for graph
    graph = model.HangVerdict(verdict="v", waits=[], chain=[])
    assert list(graph.to_json())[-3:] == ["waits", "cycle", "chain"] and graph.to_json()["cycle"] is None
    assert model.triage_from_json(graph.to_json()) == graph


def test_crash_summary_keys_and_phrases():
    from tfnative.output import report

    summary = model.CrashSummary(signal="SIGSEGV", children_killed=["12 SIGSEGV"],
                                 tf_function=model.TfFunction(name="__inference_f_1", python_function="f"))
    out = summary.to_json()
    assert list(out) == ["breakpoints", "signal", "handled_signals", "numerics", "nearest_user_frame",
                         "tf_function", "dumps", "children_killed", "op"]  # cxx_exception, log: where set
    assert out["tf_function"] == {"name": "__inference_f_1", "python_function": "f"}
    back = model.triage_from_json(out)
    assert isinstance(back, model.CrashSummary) and back == summary
    assert report.summary_phrases(summary) == ["no breakpoint hit", "fatal SIGSEGV", "in tf.function __inference_f_1",
                                               "child 12 SIGSEGV"]
    summary.log = "Check failed"
    assert list(summary.to_json())[-1] == "log"


def test_every_event_kind_has_its_title():
    import io

    from tfnative.output import report

    assert set(report.Printer.TITLES) == set(model.EVENT_KINDS)
    titles = {}
    for kind in model.EVENT_KINDS:
        out = io.StringIO()
        report.Printer(out, fit=False).event(Event(kind=kind, pid=5, signal="SIGSEGV", location="op Log", timeout=2),
                                             hit=1, max_hits=3)
        titles[kind] = out.getvalue().splitlines()[1]
    assert titles["breakpoint"].startswith("=== tfnative: breakpoint op Log hit (hit 1 of 3)")
    assert titles["core"].startswith("=== tfnative: core of pid 5, fatal signal SIGSEGV")
    assert titles["timeout"].startswith("=== tfnative: timeout: pid 5 still runs after 2 s")
    assert titles["snapshot"].startswith("=== tfnative: snapshot of pid 5")


def test_key_tables_name_only_attributes():
    """Each table row holds an attribute of its class (or a value it derives), and every attribute a class
    has is in its table, or internal (never in JSON)."""
    import dataclasses

    internal = {"Capture": {"stack_pointers", "tf_config"}, "Document": {"has_exit", "attached"},
                # what analysis decides for the renderers (analysis/frames.py), never written
                "EventNativeFrame": {"glue", "abort", "foldable", "shown_class", "library_path"},
                # and the op a generated wrapper's frame runs (analysis/pyop.py), for the op line
                "EventPythonFrame": {"user_code", "foldable", "shown_class", "wrapper_op"}}
    from tfnative.core import framemodel, triage

    for cls, keys in ((NativeFrame, framemodel._CAPTURED_NATIVE_KEYS),
                      (PythonFrame, framemodel._CAPTURED_PYTHON_KEYS),
                      (model.EventNativeFrame, framemodel._NATIVE_KEYS),
                      (model.EventPythonFrame, framemodel._PYTHON_KEYS),
                      (ElidedFrame, framemodel._ELIDED_KEYS), (Thread, model._CAPTURED_THREAD_KEYS),
                      (EventThread, model._THREAD_KEYS),
                      (Capture, model._CAPTURE_KEYS), (Event, model._EVENT_KEYS),
                      (Document, model._DOCUMENT_KEYS), (model.HangVerdict, triage._HANG_VERDICT_KEYS),
                      (model.CrashSummary, triage._CRASH_SUMMARY_KEYS), (model.ChildDeath, model._CHILD_DEATH_KEYS),
                      (model.Op, framemodel.ALL_OP_KEYS), (model.TfFunction, framemodel._TF_FUNCTION_KEYS)):
        fields = {f.name for f in dataclasses.fields(cls)}
        read = {k.attr for k in keys if k.read}
        assert read <= fields, cls
        assert fields - read <= internal.get(cls.__name__, set()), cls
