"""A typed model per stage (issue #43, item 4): a capture's threads and frames are the capture's types and carry
only what capture reads; analysis builds the event's own types of them (``EventThread``, ``EventNativeFrame``,
``EventPythonFrame``) with what it decides, and leaves the capture exactly as it was captured; ``tf-bt``'s
marking (``frames.marked_threads``) leaves its capture alone too; documents read back are of the event's types."""

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest

from tfnative.analysis.event import analyze
from tfnative.analysis.frames import marked_threads
from tfnative.core.model import (
    Capture,
    Document,
    ElidedFrame,
    EventNativeFrame,
    EventPythonFrame,
    EventThread,
    NativeFrame,
    Op,
    PythonFrame,
    Thread,
)

ROOT = Path(__file__).parents[2]
DATA = Path(__file__).parent / "data"
HANGS = Path(__file__).parents[1] / "hangs" / "captures"
# what analysis decides of a thread and of a frame: none of it is an attribute of the capture's types
ANALYSED_THREAD = ("label", "tf_function", "tf_functions_in_flight", "works_for")
ANALYSED_FRAME = ("frame_class", "source", "user", "tf_function", "glue", "abort", "foldable", "shown_class",
                  "library_path", "user_code", "wrapper_op")


def recorded_documents():
    out = []
    for path in sorted(DATA.glob("doc_*.json")) + sorted(HANGS.glob("*.json")):
        text = path.read_text().strip()
        one_a_line = text.startswith("{") and "\n{" in text  # a multi-process snapshot: its first document
        out.append((path.stem, Document.from_json(json.loads(text.splitlines()[0] if one_a_line else text))))
    return out


DOCUMENTS = recorded_documents()


def recorded_captures():
    """The recorded captures, and one of each recorded document's first event (its threads as a capture carries
    them: their wire form read back as a capture's)."""
    out = [(p.stem, Capture.from_json(json.loads(p.read_text()))) for p in sorted(DATA.glob("capture_*.json"))]
    for name, doc in DOCUMENTS:
        for event in doc.events[:1]:
            threads = [Thread.from_json(t.capture_json()) for t in event.threads]
            out.append((name, Capture(pid=doc.pid, threads=threads, selected_tid=event.thread,
                                      pool=event.pool, warnings=list(event.warnings or []))))
    return out


CAPTURES = recorded_captures()


def frames(threads):
    return [f for t in threads for f in t.frames + (t.python_frames or [])]


def with_an_opdef(capture):
    """The capture with an op whose definition was read on its first native frame (analysis names its call)."""
    f = next(f for f in frames(capture.threads) if isinstance(f, NativeFrame))
    f.op = Op(type="Sqrt", name="s", inputs=[{"dtype": "float"}], attrs={"T": "float"},
              opdef={"inputs": [{"name": "x", "type_attr": "T"}], "attrs": {"T": {"type": "type"}}})
    return capture


def assert_captured_types(threads):
    """Each thread and frame is of the capture's own type, with no attribute analysis decides."""
    assert threads and all(type(t) is Thread for t in threads)
    assert all(not hasattr(t, name) for t in threads for name in ANALYSED_THREAD)
    fs = frames(threads)
    assert fs and all(type(f) in (NativeFrame, PythonFrame, ElidedFrame) for f in fs)
    assert all(not hasattr(f, name) for f in fs if not isinstance(f, ElidedFrame) for name in ANALYSED_FRAME)


def assert_event_types(threads):
    assert threads and all(type(t) is EventThread for t in threads)
    fs = frames(threads)
    assert fs and all(type(f) in (EventNativeFrame, EventPythonFrame, ElidedFrame) for f in fs)


@pytest.mark.parametrize("name,capture", CAPTURES, ids=[n for n, _ in CAPTURES])
def test_analysis_leaves_the_capture_as_captured(name, capture):
    capture = with_an_opdef(capture)
    before = copy.deepcopy(capture)
    event = analyze("snapshot", capture, hang=True)
    assert capture == before
    assert json.dumps(capture.to_json()) == json.dumps(before.to_json())
    assert_captured_types(capture.threads)
    # the event has its own types, with what analysis decided: labels, classes, marks, the op's call, the verdict
    assert_event_types(event.threads)
    assert all(t.label is not None for t in event.threads)
    shown = [f for t in event.threads for f in t.frames if isinstance(f, (NativeFrame, PythonFrame))]
    assert shown and all(f.frame_class and f.shown_class for f in shown)
    assert any(isinstance(f, NativeFrame) and f.op and f.op.call is not None for f in shown)
    assert event.triage is not None


@pytest.mark.parametrize("name,capture", CAPTURES[:2], ids=[n for n, _ in CAPTURES[:2]])
def test_tf_bt_marks_the_events_types(name, capture):
    before = copy.deepcopy(capture)
    marked = marked_threads(capture, {}, native_all=False)
    assert capture == before
    assert_captured_types(capture.threads)
    assert_event_types(marked)
    assert all(f.shown_class for f in frames(marked) if isinstance(f, (NativeFrame, PythonFrame)))
    # tf-bt --json writes the capture's wire form of the threads shown: no key of analysis's
    wire = json.dumps([t.capture_json() for t in marked])
    assert '"class"' not in wire and '"label"' not in wire and '"source"' not in wire


@pytest.mark.parametrize("name,doc", DOCUMENTS, ids=[n for n, _ in DOCUMENTS])
def test_a_document_read_back_is_of_the_events_types(name, doc):
    threads = doc.threads()
    assert_event_types(threads)
    for e in doc.events:
        created = (e.op.created_at or []) if e.op is not None else []
        assert all(type(f) is EventPythonFrame for f in created)


def test_a_capture_frame_cannot_hold_what_analysis_decides():
    """No capture code can set an analysed field: the capture's types have no slot for one."""
    native, python, thread = NativeFrame("f"), PythonFrame("g", "/x.py", 1), Thread(tid=1)
    for obj, names in ((native, ANALYSED_FRAME), (python, ANALYSED_FRAME), (thread, ANALYSED_THREAD)):
        for name in names:
            with pytest.raises(AttributeError):
                setattr(obj, name, None)


def test_the_capture_types_are_the_events_without_analysis():
    """Each event type extends its capture type with analysis's fields alone: a capture's wire form writes none
    of them, and a capture read from a document's thread keeps only what capture reads."""
    for captured, event, analysed in ((Thread, EventThread, ANALYSED_THREAD),
                                      (NativeFrame, EventNativeFrame, ANALYSED_FRAME),
                                      (PythonFrame, EventPythonFrame, ANALYSED_FRAME)):
        assert issubclass(event, captured)
        own = {f.name for f in dataclasses.fields(event)} - {f.name for f in dataclasses.fields(captured)}
        assert own and own <= set(analysed)
    # a document's thread read as a capture's: the same JSON, less analysis's keys (its frames' too)
    analysed_keys = set(ANALYSED_THREAD) | {"class", "source", "user"}

    def captured(d):
        if isinstance(d, list):
            return [captured(v) for v in d]
        return {k: captured(v) if k in ("frames", "python_frames") else v
                for k, v in d.items() if k not in analysed_keys}

    for _, doc in DOCUMENTS:
        for t in doc.threads():
            d = t.to_json()
            assert Thread.from_json(d).to_json() == captured(d)
    assert any('"class"' in json.dumps(t.to_json()) for _, doc in DOCUMENTS for t in doc.threads())


def test_capture_code_names_no_event_type():
    """The capture's layers (and gdb's capture) build the capture's types; only analysis makes the event's."""
    capture_dirs = ["tfnative/sources", "tfnative/snapshot", "tfnative/corefile", "tfnative/gdb"]
    files = [p for d in capture_dirs for p in (ROOT / d).rglob("*.py")]
    files += [ROOT / "gdb_scripts/tfnative_gdb/capture.py"]
    named = [str(p.relative_to(ROOT)) for p in files
             if re.search(r"\bEvent(Thread|NativeFrame|PythonFrame)\b", p.read_text())]
    assert files and named == []


@pytest.mark.parametrize("cls", [NativeFrame, PythonFrame, Op, Thread, EventNativeFrame, EventPythonFrame,
                                 EventThread], ids=lambda c: c.__name__)
def test_a_copy_has_every_field(cls):
    """``frames.copies`` and ``event_thread`` copy by ``__match_args__``: every field, none keyword-only; a capture
    type's fields come first in its event type's, in the same order."""
    fields = dataclasses.fields(cls)
    assert cls.__match_args__ == tuple(f.name for f in fields) and all(f.init and not f.kw_only for f in fields)
    base = cls.__mro__[1]
    if dataclasses.is_dataclass(base):
        assert cls.__match_args__[:len(base.__match_args__)] == base.__match_args__
