"""The product's main scenarios on real TensorFlow (tensorflow-cpu)."""

import os
import subprocess
import sys
import time

import pytest

from ..utils import (
    ROOT,
    TFNATIVE,
    assert_gone,
    descendants,
    frames_of,
    line_of,
    load_json,
    python_frames,
    requires_gdb,
    requires_tf,
    run_tfnative,
    script,
    state_of,
    wait_for_file,
)

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]

EXAMPLE = os.path.join(ROOT, "examples", "open_session.py")


def _index(frames, pred):
    for i, f in enumerate(frames):
        if pred(f):
            return i
    raise AssertionError("no such frame in %s" % [f["function"] for f in frames])


def test_tf_newsession_from_a_nested_call_chain(tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", EXAMPLE, "--break", "TF_NewSession", "--json", str(out)], timeout=600)
    assert r.returncode == 0, r.stderr
    assert "result: [[5.0]]" in r.stdout  # the script ran on after the hit
    doc = load_json(out)
    assert doc["unresolved"] == [] and doc["exit"] == {"code": 0}
    frames = frames_of(doc)
    assert frames[0]["function"] == "TF_NewSession" and frames[0]["library"] == "libtensorflow_cc.so.2"
    # C++ glue between TF_NewSession and Python: TF_NewSessionRef, then pybind11's dispatcher
    first_py = _index(frames, lambda f: f["kind"] == "python")
    natives = [f["function"] for f in frames[:first_py]]
    assert any("TF_NewSessionRef" in n for n in natives)
    assert "pybind11::cpp_function::dispatcher" in natives[-1]
    py = python_frames(frames)
    assert [p[0] for p in py[:2]] == ["BaseSession.__init__", "Session.__init__"]
    assert py[0][1] == py[1][1] == "session.py"
    assert py[2:] == [
        ("make_session", "open_session.py", line_of(EXAMPLE, "return tf.compat.v1.Session(graph=graph)")),
        ("build_model", "open_session.py", line_of(EXAMPLE, "sess = make_session(graph)")),
        ("main", "open_session.py", line_of(EXAMPLE, "sess, y = build_model()")),
        ("<module>", "open_session.py", line_of(EXAMPLE, "    main()")),
    ]
    user = [f["function"] for f in frames if f.get("user")]
    assert user == ["make_session", "build_model", "main", "<module>"]
    # the triage summary: what fired, and the user frame nearest to it
    assert doc["triage"]["breakpoints"] == {"TF_NewSession": 1} and doc["triage"]["signal"] is None
    assert doc["triage"]["nearest_user_frame"] == {
        "function": "make_session", "file": EXAMPLE, "line": line_of(EXAMPLE, "return tf.compat.v1.Session(")}
    assert "triage: TF_NewSession x1; nearest user frame make_session at %s:" % EXAMPLE in r.stderr
    assert "[py] make_session at %s:" % EXAMPLE in r.stderr


def test_hung_tf_function_in_py_function(tmp_path):
    ready, release = tmp_path / "ready", tmp_path / "release"
    target = subprocess.Popen([sys.executable, script("tf_hang.py"), str(ready), str(release)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        pid = int(wait_for_file(str(ready), 300, target))
        out = tmp_path / "s.json"
        r = run_tfnative(["stack", "--pid", str(pid), "--all-threads", "--json", str(out)], timeout=600)
        assert r.returncode == 0, r.stderr
        ev = load_json(out)["events"][0]
        threads = {t["tid"]: t for t in ev["threads"]}
        # the main thread waits inside TFE_Execute, called from the user's main()
        main = threads[pid]["frames"]
        i_exec = _index(main, lambda f: f["function"] == "TFE_Execute")
        i_quick = _index(main, lambda f: f["function"] == "quick_execute")
        i_main = _index(main, lambda f: f["function"] == "main" and f["kind"] == "python")
        assert i_exec < i_quick < i_main
        assert main[i_main]["line"] == line_of(script("tf_hang.py"), 'print("result"')
        # an executor thread runs the callback inside PyFuncOp::Compute
        worker = [t for t in ev["threads"] if any(f["function"] == "slow_callback" for f in t["frames"])]
        assert len(worker) == 1 and worker[0]["tid"] != pid
        wf = worker[0]["frames"]
        i_cb = _index(wf, lambda f: f["function"] == "slow_callback")
        i_pyfunc = _index(wf, lambda f: "PyFuncOp::Compute" in f["function"])
        i_device = _index(wf, lambda f: "ThreadPoolDevice::Compute" in f["function"])
        assert i_cb < i_pyfunc < i_device
        # the wait loop: asleep, or, rarely, between two sleeps
        assert wf[i_cb]["line"] in {line_of(script("tf_hang.py"), "time.sleep(0.05)"),
                                    line_of(script("tf_hang.py"), "while RELEASE")}
        # op context: the kernel frame and the device frame name the op they run
        assert wf[i_pyfunc]["op"]["type"] == "EagerPyFunc" and wf[i_device]["op"] == wf[i_pyfunc]["op"]
        assert "<-- op EagerPyFunc" in r.stdout
        # the executor thread works for the only tf.function in flight
        assert worker[0]["tf_function"]["python_function"] == "step"
        assert worker[0]["tf_function"]["how"] == "only tf.function in flight"
        assert worker[0]["tf_function"]["called_by"] == pid
        # function context: the thread says which tf.function it waits for
        assert threads[pid]["tf_function"]["python_function"] == "step"
        assert threads[pid]["tf_function"]["name"].startswith("__inference_step_")
        assert main[i_quick]["tf_function"] == threads[pid]["tf_function"]
        assert 'in tf.function step (__inference_step_' in r.stdout
        # frame classes in JSON; in the text, long runs of TensorFlow-internal frames are folded,
        # but not TensorFlow's entry points and kernel Compute calls
        assert main[i_main]["class"] == "user" and main[i_exec]["class"] == "tensorflow-native"
        assert main[i_quick]["class"] == "tensorflow-python"
        assert main[-1]["class"] == "interpreter" and main[-2]["class"] == "system"  # _start, libc
        assert "TensorFlow frames ..." in r.stdout
        assert " TFE_Execute in libtensorflow_cc.so.2" in r.stdout and "PyFuncOp::Compute" in r.stdout
        # Python threads first
        has_py = [any(f["kind"] == "python" for f in t["frames"]) for t in ev["threads"]]
        assert has_py == sorted(has_py, reverse=True)
        # the process runs on unharmed and finishes its work
        time.sleep(0.2)
        assert state_of(pid) in ("S", "R")
        release.write_text("go")
        stdout, _ = target.communicate(timeout=120)
        assert target.returncode == 0 and "result 3.0" in stdout
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()


def test_segfault_inside_a_py_function(tmp_path, autograph_files):
    out = tmp_path / "s.json"
    proc = subprocess.Popen([*TFNATIVE, "attach", "--json", str(out), script("tf_segv.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    time.sleep(1)
    tree = descendants(proc.pid)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 128 + 11, err
    doc = load_json(out)
    assert doc["exit"] == {"signal": "SIGSEGV"}
    ev = doc["events"][0]
    assert ev["kind"] == "signal" and ev["signal"] == "SIGSEGV"
    frames = ev["threads"][0]["frames"]
    assert ev["threads"][0]["tid"] == ev["thread"]
    i_cb = _index(frames, lambda f: f["function"] == "bad_callback")
    i_pyfunc = _index(frames, lambda f: "PyFuncOp::Compute" in f["function"])
    assert "strlen" in frames[0]["function"] and i_cb < i_pyfunc
    assert frames[i_cb]["line"] == line_of(script("tf_segv.py"), "ctypes.string_at(0)")
    # deep below the kernel's entry (its Python callback crashed), the kernel still names its op
    assert frames[i_pyfunc]["op"]["type"] == "EagerPyFunc"
    assert "fatal signal SIGSEGV" in err
    assert doc["triage"]["signal"] == "SIGSEGV"
    assert doc["triage"]["nearest_user_frame"]["function"] == "bad_callback"
    assert "triage: no breakpoint hit; fatal SIGSEGV; op EagerPyFunc" in err
    assert "; nearest user frame bad_callback at" in err
    assert doc["triage"]["op"]["type"] == "EagerPyFunc"  # the crashing kernel's op
    assert_gone(tree)
