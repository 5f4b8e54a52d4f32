"""The pure parts of the report: glue hiding, user frames, classes, folding (analysis marks the frames, the text
reads the marks), line tables."""

import sys

from tfnative.analysis.frames import mark_frames, shown
from tfnative.core.frameclass import frame_class
from tfnative.core.model import EventThread, Thread, frames_from_json
from tfnative.core.python.linetable import line_for
from tfnative.core.python.mixed import merge
from tfnative.output import render


def nat(name, lib="libtensorflow_cc.so.2"):
    return {"kind": "native", "function": name, "library": lib, "address": "0x1"}


def py(name, path):
    return {"kind": "python", "function": name, "file": path, "line": 1}


def typed(*frames):
    """Frames as the renderer takes them (the model's, marked by analysis), from their JSON."""
    out = frames_from_json(list(frames))
    mark_frames(out)
    return out


def test_classes():
    def cls(frame):
        (f,) = typed(frame)
        return frame_class(f)

    assert cls(py("f", "/home/me/train.py")) == "user"
    assert cls(py("f", "/v/lib/python3.11/site-packages/tensorflow/python/x.py")) == "tensorflow-python"
    assert cls(py("f", "/usr/lib/python3.11/threading.py")) == "system"
    assert cls(nat("tensorflow::Foo()")) == "tensorflow-native"
    assert cls(nat("_PyEval_Vector", "libpython3.11.so.1.0")) == "interpreter"
    assert cls(nat("start_thread", "libc.so.6")) == "system"


def test_fold_keeps_landmarks_and_ends():
    frames = [nat("syscall", "libc.so.6")] + [nat("absl::Wait%d()" % i) for i in range(12)] + [
        nat("TFE_Execute")] + [nat("pybind11::x%d" % i) for i in range(10)] + [py("main", "/home/me/t.py")]
    frames = typed(*frames)
    plan = render.fold_plan(frames)
    shown = [frames[i].function for i in plan if not isinstance(i, tuple)]
    folds = [i[1] for i in plan if isinstance(i, tuple)]
    assert shown[0] == "syscall" and "TFE_Execute" in shown and shown[-1] == "main"
    assert folds == [8, 6]
    text = render.thread_block(EventThread(tid=1, name="t", frames=frames))
    assert any("... 8 TensorFlow frames ..." in ln for ln in text)
    assert len(render.thread_block(EventThread(tid=1, frames=frames), fold=False)) == len(frames) + 1


def test_merge_mismatch_never_guesses():
    native = typed(nat("f", "libc.so.6"), nat("_PyEval_EvalFrameDefault", "libpython3.11.so.1.0"))
    out = Thread(tid=1)
    merge(out, native, [typed(py("a", "/x.py")), typed(py("b", "/x.py"))])
    assert out.merge == "mismatch" and out.frames == native and "2 Python eval group(s)" in out.merge_detail
    assert [f.function for f in out.python_frames] == ["a", "b"]
    assert not any(f.eval_address for f in out.python_frames)
    ok = Thread(tid=1)
    merge(ok, native, [typed(py("a", "/x.py"))])
    assert ok.merge == "ok" and [f.function for f in ok.frames] == ["f", "a"]
    assert ok.frames[1].eval_address == "0x1"  # the eval frame it replaced
    none = Thread(tid=1)
    merge(none, native, None)
    assert none.merge == "no-thread-state" and none.frames == native


def test_glue_hidden():
    frames = [nat("cfunction_call", "libpython3.11.so.1.0"), nat("_PyEval_Vector", "libpython3.11.so.1.0"),
              nat("TF_NewSession")]
    assert [f.function for f in shown(typed(*frames))] == ["TF_NewSession"]


def test_linetable_matches_this_interpreter():
    def sample(x):
        y = x + 1
        for i in range(3):
            y += i
        return y

    co = sample.__code__
    for start, end, line in co.co_lines():
        for addr in range(start, end, 2):
            assert line_for(sys.version_info[:2], co.co_linetable, co.co_firstlineno, addr) == line
