"""The typed model (tfnative/model.py) on real documents: to_json(from_json(doc)) gives the same bytes.

The documents under data/ were written by tfnative itself on a real TensorFlow process
(tests/scripts/tf_hang.py: ``stack --pid -a``, ``stack --pid -a --with-gdb``, ``stack --pid --locals
--samples 2``) and on a real crash (``attach --op-origins tests/scripts/tf_segv.py``).  The captures
there are the wire form of the same process: ``tf-bt -a --json`` in gdb (``-tfnative-capture``'s JSON)
and ``snapshot.take(pid, "python", variables=True)``'s.
"""

import json
from pathlib import Path

import pytest

from tfnative.core import model
from tfnative.core.model import Capture, Document, ElidedFrame, Event, NativeFrame, PythonFrame, Thread
from tfnative.output.elide import elide

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


def test_capture_typed_with_its_internal_fields():
    gdb = Capture.from_json(load("capture_gdb.json"))
    assert gdb.via is None and gdb.python == "3.11" and gdb.pool["threads"] >= 1
    main = gdb.threads[0]
    assert main.tid == gdb.pid and main.merge == "ok" and main.gdb_thread == 1 and main.has_python()
    native = [f for f in main.frames if isinstance(f, NativeFrame)]
    assert [f.level for f in native] == sorted(f.level for f in native)  # gdb's frame numbers, kept
    merged = [f for f in main.frames if isinstance(f, PythonFrame)]
    assert merged and all(f.eval_address for f in merged)
    assert all(f.frame_class is None and f.source is None for f in main.frames)  # the report sets those
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
    assert event.op["type"] == "EagerPyFunc"
    created = [model.frame_from_json(f) for f in event.op["created_at"]]
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
    thread = Thread.from_json(d)
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
    from tfnative.output import report

    d = load("doc_attach_segv.json")
    doc = Document.from_json(d)
    assert doc.has_exit and report.document_triage(doc).to_json() == d["triage"]
    out = tmp_path / "again.json"
    report.write(doc, str(out))
    assert out.read_text() == (DATA / "doc_attach_segv.json").read_text()
    fresh = Document(argv=["python", "x.py"], pid=3, events=[Event(kind="signal", signal="SIGUSR1"),
                                                             Event(kind="signal", signal="SIGSEGV")])
    assert not fresh.has_exit and "exit" not in fresh.to_json() and fresh.target_name() == "the script"
    fresh.set_exit(-11)
    assert fresh.has_exit and fresh.exit == {"signal": "SIGSEGV"}
    assert [e.fatal for e in fresh.events] == [False, True]
    assert Document(pid=4, attached=True).target_name() == "process 4"
    assert "attached" not in Document(attached=True).to_json()
