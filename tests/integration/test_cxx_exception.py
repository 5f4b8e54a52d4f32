"""A real TensorFlow crash that comes from a C++ exception: its type, message, op and throw site.

``tests/scripts/tf_audio_spectrogram_exc.py`` (TF issue 108664):
``AudioSpectrogram`` with a negative ``window_size`` throws ``std::length_error``
in its kernel; the exception unwinds the kernel's frames and the process dies
of SIGSEGV in pybind11's translators (``PyErr_Occurred`` under ``raise_err``).
The exception is read from libstdc++'s per-thread globals (``core/cxxexc.py``),
the op from the op's generated Python wrapper (``analysis/pyop.py``).  One
``attach`` run, one ``attach --break __cxa_throw`` run and one core are shared.
``stack --pid`` is checked on ``cxx_in_flight.py`` (a small C++ library built
with g++): one thread in a catch block, one in a destructor run by the unwinding.
``cxx_terminate.py``: a throw out of a ``noexcept`` function, ``std::terminate``.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from ..utils import held, line_of, load_json, make_core, requires_gdb, requires_tf, run_tfnative, script, stack_event


def tf_test(f):  # noqa: ANN001, ANN201 - a test
    for mark in (requires_gdb, requires_tf, pytest.mark.tf):
        f = mark(f)
    return f

SCRIPT = script("tf_audio_spectrogram_exc.py")
EXCEPTION = {"type": "std::length_error", "what": "vector::_M_default_append", "state": "caught"}
LINE = 'C++ exception in flight: std::length_error: "vector::_M_default_append" (being handled)'


@pytest.fixture(scope="module")
def crash(tmp_path_factory):
    out = tmp_path_factory.mktemp("cxx") / "a.json"
    r = run_tfnative(["attach", "--json", str(out), SCRIPT], timeout=600)
    assert out.exists(), (r.returncode, r.stdout[-2000:], r.stderr[-4000:])
    return r, load_json(out)


@pytest.fixture(scope="module")
def throw(tmp_path_factory):
    out = tmp_path_factory.mktemp("cxxthrow") / "b.json"
    r = run_tfnative(["attach", "--break", "__cxa_throw", "--json", str(out), SCRIPT], timeout=600)
    assert out.exists(), (r.returncode, r.stdout[-2000:], r.stderr[-4000:])
    return r, load_json(out)


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    return make_core(str(tmp_path_factory.mktemp("cxxcore")), "tf_audio_spectrogram_exc.py")


def _user_line(triage):
    nearest = triage["nearest_user_frame"]
    return os.path.basename(nearest["file"]), nearest["line"]


CALL = ("tf_audio_spectrogram_exc.py", line_of(SCRIPT, "tf.raw_ops.AudioSpectrogram("))


@tf_test
def test_attach_names_the_exception_the_op_and_the_users_line(crash):
    r, doc = crash
    assert r.returncode == 128 + 11, r.stderr[-3000:]
    (event,) = doc["events"]
    assert (event["kind"], event["signal"]) == ("signal", "SIGSEGV")
    stopped = event["threads"][0]
    assert stopped["frames"][0]["function"] == "PyErr_Occurred"  # the kernel is gone from the stack
    assert not any((f.get("op") or {}) for f in stopped["frames"])
    assert stopped["cxx_exception"] == EXCEPTION
    triage = doc["triage"]
    assert triage["cxx_exception"] == EXCEPTION
    op = triage["op"]
    assert {k: op[k] for k in ("type", "name", "from")} == {
        "type": "AudioSpectrogram", "name": None, "from": "gen_audio_ops.audio_spectrogram"}
    # the kernel is gone, its wrapper's arguments are not (issue #45): the op's input and attributes as passed
    assert [(i["dtype"], i["shape"]) for i in op["inputs"]] == [("float32", [8, 1])]
    assert op["attrs"] == {"magnitude_squared": False, "stride": -1, "window_size": -5}
    assert _user_line(triage) == CALL
    assert LINE in r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("tfnative: triage: ")]
    assert 'C++ exception std::length_error: "vector::_M_default_append" (being handled)' in line
    assert "op AudioSpectrogram (from gen_audio_ops.audio_spectrogram)" in line
    assert "rerun with --break-throw std::length_error" in line


@tf_test
def test_break_cxa_throw_shows_the_throwing_kernel_and_its_op(throw):
    r, doc = throw
    assert r.returncode == 128 + 11, r.stderr[-3000:]
    hit, crash = doc["events"]
    assert (hit["kind"], hit["location"], crash["signal"]) == ("breakpoint", "__cxa_throw", "SIGSEGV")
    frames = hit["threads"][0]["frames"]
    assert frames[0]["function"] == "__cxa_throw"
    kernel = next(f for f in frames if f["function"] == "tensorflow::AudioSpectrogramOp::Compute("
                  "tensorflow::OpKernelContext*)")
    assert kernel["op"]["type"] == "AudioSpectrogram"
    assert hit["threads"][0]["cxx_exception"] == dict(EXCEPTION, state="thrown")
    assert crash["threads"][0]["cxx_exception"] == EXCEPTION
    assert "AudioSpectrogramOp::Compute" in r.stderr and "<-- op AudioSpectrogram" in r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("tfnative: triage: ")]
    assert "__cxa_throw x1" in line and "rerun" not in line  # the throw site is in the report already


@tf_test
def test_core_names_the_exception_the_op_and_the_users_line(tmp_path, core):
    out = tmp_path / "core.json"
    r = run_tfnative(["core", core, "--json", str(out)])
    assert r.returncode == 0, r.stderr
    doc = load_json(out)
    event = doc["events"][0]
    assert event["signal"] == "SIGSEGV"
    assert event["threads"][0]["cxx_exception"] == EXCEPTION
    assert [t["tid"] for t in event["threads"] if t.get("cxx_exception")] == [event["threads"][0]["tid"]]
    triage = doc["triage"]
    assert triage["cxx_exception"] == EXCEPTION
    assert triage["op"]["type"] == "AudioSpectrogram"
    assert _user_line(triage) == CALL
    assert "op AudioSpectrogram (from gen_audio_ops.audio_spectrogram)" in r.stderr
    r = run_tfnative(["core", core])  # the text (with --json only the triage line)
    assert LINE in r.stderr + r.stdout


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_stack_shows_an_exception_being_handled_and_one_being_unwound(tmp_path):
    with held(sys.executable, script("cxx_in_flight.py"), tmp_path) as proc:
        r, event = stack_event(tmp_path, proc.pid)
    by_name = {t.get("python_name"): t for t in event["threads"]}
    # the exception objects live on the heap, outside the stacks stack copies while it holds the process: they
    # are read after the release, and marked so
    assert by_name["in-catch"]["cxx_exception"] == {"type": "std::runtime_error", "what": "held in a catch block",
                                                    "state": "caught", "read_after_release": True}
    assert by_name["unwinding"]["cxx_exception"] == {"type": "std::length_error", "what": "held while unwinding",
                                                     "state": "uncaught", "read_after_release": True}
    assert "cxx_exception" not in by_name["MainThread"]
    assert 'C++ exception in flight: std::runtime_error: "held in a catch block" (being handled)' in r.stdout
    assert 'std::length_error: "held while unwinding" (thrown, not caught yet)' in r.stdout


@tf_test
def test_core_through_gdb_names_the_exception_too(tmp_path, core):
    out = tmp_path / "gdb.json"
    r = run_tfnative(["core", core, "--with-gdb", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    doc = load_json(out)
    assert doc["events"][0]["via"] == "gdb"
    assert doc["events"][0]["threads"][0]["cxx_exception"] == EXCEPTION
    assert doc["triage"]["cxx_exception"] == EXCEPTION


@requires_gdb
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_std_terminate_is_named_as_such(tmp_path):
    out = tmp_path / "t.json"
    r = run_tfnative(["attach", "--json", str(out), script("cxx_terminate.py"), str(tmp_path)], timeout=120)
    assert r.returncode == 128 + 6, r.stderr[-3000:]
    doc = load_json(out)
    expected = {"type": "std::runtime_error", "what": "escaped a noexcept function", "state": "terminate"}
    assert doc["events"][0]["threads"][0]["cxx_exception"] == expected
    assert doc["triage"]["cxx_exception"] == expected
    assert '"escaped a noexcept function" (not caught: std::terminate)' in r.stderr
