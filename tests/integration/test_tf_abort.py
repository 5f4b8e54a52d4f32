"""A real TensorFlow abort (``Check failed`` in a kernel, on an executor thread): what a user reads of it.

Field issue: the event named no user line (the executor thread has no Python
frame), the triage's op was null, and TensorFlow's own fatal log line was
not in the report.  One run of ``tests/scripts/tf_check_failed.py`` is shared.
"""

from __future__ import annotations

import os

import pytest

from ..conftest import line_of, load_json, requires_gdb, requires_tf, run_tfnative, script

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
