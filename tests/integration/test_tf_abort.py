"""A real TensorFlow abort (``Check failed`` in a kernel, on an executor thread): what a user reads of it.

Field issue: the event named no user line (the executor thread has no Python
frame), the triage's op was null, and TensorFlow's own fatal log line was
not in the report.  One run of ``tests/scripts/tf_check_failed.py`` is shared;
one more runs it on a terminal (issue 23: the text fits it, the triage last).
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
import time

import pytest

from ..utils import ROOT, TFNATIVE, line_of, load_json, requires_gdb, requires_tf, run_tfnative, script

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]
SCRIPT = script("tf_check_failed.py")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("abort") / "s.json"
    r = run_tfnative(["attach", "--json", str(out), SCRIPT], timeout=600)
    return r, load_json(out)


def test_the_abort_is_one_fatal_event_with_tensorflows_log_line(run):
    r, doc = run
    assert r.returncode == 128 + 6, r.stderr
    (event,) = doc["events"]
    assert (event["kind"], event["signal"], event["fatal"]) == ("signal", "SIGABRT", True)
    assert event["log"].endswith("tensor_shape.cc:362] Check failed: d < dims() (1 vs. 0)"), event["log"]
    assert doc["triage"]["log"] == event["log"]
    assert "TensorFlow's log: " + event["log"] in r.stderr
    # the script's stderr is untouched: TensorFlow's own line is still there, as without tfnative
    assert "Check failed: d < dims() (1 vs. 0)" in r.stderr.split("=== tfnative:")[0]


def test_the_kernel_frame_names_its_op_and_the_triage_has_it(run):
    _r, doc = run
    stopped = doc["events"][0]["threads"][0]
    kernel = next(f for f in stopped["frames"] if "FusedResizeConv2DUsingGemmOp" in (f["function"] or ""))
    assert kernel["op"]["type"] == "FusedPadConv2D"
    assert doc["triage"]["op"]["type"] == "FusedPadConv2D"


def test_the_users_line_comes_from_the_thread_that_called_the_function(run):
    r, doc = run
    event = doc["events"][0]
    stopped = event["threads"][0]
    call = line_of(SCRIPT, "print(bad_pad_conv(")
    nearest = doc["triage"]["nearest_user_frame"]
    assert (os.path.basename(nearest["file"]), nearest["line"]) == ("tf_check_failed.py", call)
    assert "nearest user frame <module> at %s:%d" % (SCRIPT, call) in r.stderr
    if not any(f["kind"] == "python" for f in stopped["frames"]):  # the kernel ran on an executor thread
        fn = stopped["tf_function"]
        assert fn["python_function"] == "bad_pad_conv" and fn["how"] == "only tf.function in flight"
        (caller,) = [t for t in event["threads"] if t["tid"] == fn["called_by"]]
        assert [f["line"] for f in caller["frames"] if f.get("user")] == [call]


COLUMNS = 100


@pytest.fixture(scope="module")
def on_a_terminal():
    """The same run with stdout and stderr on a pseudo-terminal, ``COLUMNS=100``: everything written there."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))  # COLUMNS wins over the window
    proc = subprocess.Popen(TFNATIVE + ["attach", SCRIPT], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            cwd=ROOT, env=dict(os.environ, COLUMNS=str(COLUMNS)))
    os.close(slave)
    chunks, deadline = [], time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        returncode = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return returncode, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def _triage_is_last(lines):
    """The last non-empty lines are the triage: its ``tfnative: triage:`` line and its own wrapped lines."""
    lines = [ln for ln in lines if ln.strip()]
    start = max(i for i, ln in enumerate(lines) if ln.startswith("tfnative: triage: "))
    return all(ln.startswith(" ") for ln in lines[start + 1:]), " ".join(ln.strip() for ln in lines[start:])


def test_on_a_terminal_the_text_fits_and_the_triage_comes_last(on_a_terminal):
    returncode, text = on_a_terminal
    assert returncode == 128 + 6, text
    # TensorFlow's own trace (the script's stderr, as without tfnative) comes before tfnative's report
    ours = text.index("=== tfnative: fatal signal SIGABRT")
    assert "*** Check failure stack trace: ***" in text[:ours]
    lines = text.splitlines()
    report = text[ours:].splitlines() + [ln for ln in text[:ours].splitlines() if ln.startswith("tfnative:")]
    wide = [ln for ln in report if len(ln) > COLUMNS]
    assert not wide, "\n".join(wide)
    last, triage = _triage_is_last(lines)
    assert last, text[-2000:]
    call = line_of(SCRIPT, "print(bad_pad_conv(")
    assert "fatal SIGABRT" in triage and "op FusedPadConv2D" in triage
    assert "nearest user frame <module> at %s:%d" % (SCRIPT, call) in triage
    # the marks are in the margin, and whole; the abort's frames are one line
    assert any(ln.startswith("> #") and ln.endswith("<-- op FusedPadConv2D") and "FusedResizeConv2DUsingGemmOp<...>"
               in ln for ln in report)
    assert any(ln.startswith("> #") and ln.endswith("tf_check_failed.py:%d  <-- your code" % call) for ln in report)
    assert "       ... 6 frames of abort() and TensorFlow's fatal log ..." in report


def test_piped_the_lines_are_whole(run):
    r, doc = run
    lines = r.stderr.splitlines()
    kernel = next(ln for ln in lines if "FusedResizeConv2DUsingGemmOp<float, " in ln)
    frame = next(f for f in doc["events"][0]["threads"][0]["frames"] if f["function"] and
                 f["function"].startswith("tensorflow::FusedResizeConv2DUsingGemmOp<"))
    assert kernel.startswith("> #") and kernel.endswith(" in libtensorflow_cc.so.2 [%s]  <-- op FusedPadConv2D"
                                                        % frame["address"])
    assert max(map(len, lines)) > 200
    last, triage = _triage_is_last(lines)
    assert last and lines[-1].startswith("tfnative: triage: ")  # one line, not wrapped
    # the JSON keeps every frame the text folds
    assert [f["function"] for f in doc["events"][0]["threads"][0]["frames"][:3]] == [
        "__pthread_kill_implementation", "raise", "abort"]
