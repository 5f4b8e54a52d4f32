"""Analysis works on copies (issue #43, item 4): after ``analyze`` a capture is exactly as it was captured, and
``tf-bt``'s marking (``frames.marked_capture``) leaves its capture alone too; the event and the marked copy still
carry what analysis decided."""

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from tfnative.analysis.event import analyze
from tfnative.analysis.frames import marked_capture
from tfnative.core.model import Capture, Document, NativeFrame, Op, PythonFrame, Thread

DATA = Path(__file__).parent / "data"
HANGS = Path(__file__).parents[1] / "hangs" / "captures"


def recorded_captures():
    """The recorded captures, and one of each recorded document's first event (its threads as captured)."""
    out = [(p.stem, Capture.from_json(json.loads(p.read_text()))) for p in sorted(DATA.glob("capture_*.json"))]
    for path in sorted(DATA.glob("doc_*.json")) + sorted(HANGS.glob("*.json")):
        text = path.read_text().strip()
        one_a_line = text.startswith("{") and "\n{" in text  # a multi-process snapshot: its first document
        doc = Document.from_json(json.loads(text.splitlines()[0] if one_a_line else text))
        for event in doc.events[:1]:
            out.append((path.stem, Capture(pid=doc.pid, threads=event.threads, selected_tid=event.thread,
                                           pool=event.pool, warnings=list(event.warnings or []))))
    return out


CAPTURES = recorded_captures()


def frames(capture):
    return [f for t in capture.threads for f in t.frames + (t.python_frames or [])]


def with_an_opdef(capture):
    """The capture with an op whose definition was read on its first native frame (analysis names its call)."""
    f = next(f for f in frames(capture) if isinstance(f, NativeFrame))
    f.op = Op(type="Sqrt", name="s", inputs=[{"dtype": "float"}], attrs={"T": "float"},
              opdef={"inputs": [{"name": "x", "type_attr": "T"}], "attrs": {"T": {"type": "type"}}})
    return capture


@pytest.mark.parametrize("name,capture", CAPTURES, ids=[n for n, _ in CAPTURES])
def test_analysis_leaves_the_capture_as_captured(name, capture):
    capture = with_an_opdef(capture)
    before = copy.deepcopy(capture)
    event = analyze("snapshot", capture, hang=True)
    assert capture == before
    assert json.dumps(capture.to_json()) == json.dumps(before.to_json())
    assert [[f.shown_class for f in t.frames] for t in capture.threads] == \
        [[f.shown_class for f in t.frames] for t in before.threads]
    # the event has what analysis decided: labels, classes, marks, the op's call, the verdict
    assert all(t.label is not None for t in event.threads)
    shown = [f for t in event.threads for f in t.frames if isinstance(f, (NativeFrame, PythonFrame))]
    assert shown and all(f.frame_class and f.shown_class for f in shown)
    assert any(isinstance(f, NativeFrame) and f.op and f.op.call is not None for f in shown)
    assert event.triage is not None


@pytest.mark.parametrize("name,capture", CAPTURES[:2], ids=[n for n, _ in CAPTURES[:2]])
def test_tf_bt_marks_a_copy(name, capture):
    before = copy.deepcopy(capture)
    marked = marked_capture(capture, {}, native_all=False)
    assert capture == before and all(f.shown_class is None for f in frames(capture))
    assert all(f.shown_class for f in frames(marked) if isinstance(f, (NativeFrame, PythonFrame)))


@pytest.mark.parametrize("cls", [NativeFrame, PythonFrame, Op, Thread], ids=lambda c: c.__name__)
def test_a_copy_has_every_field(cls):
    """``frames.copies`` and ``copy_thread`` copy by ``__match_args__``: every field, none keyword-only."""
    fields = dataclasses.fields(cls)
    assert cls.__match_args__ == tuple(f.name for f in fields) and all(f.init and not f.kw_only for f in fields)
