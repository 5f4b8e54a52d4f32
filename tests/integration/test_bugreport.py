"""tfnative report: a Markdown bundle for a TensorFlow issue, from a real crash."""

import os

import pytest

from ..utils import line_of, requires_gdb, requires_tf, run_tfnative, script

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]


def test_report_of_a_segfault_in_a_py_function(tmp_path, autograph_files):
    out = tmp_path / "report.md"
    r = run_tfnative(["report", "-o", str(out), script("tf_segv.py")], timeout=600, cwd=str(tmp_path))
    assert r.returncode == 128 + 11, r.stderr
    assert "report written to %s" % out in r.stderr
    text = out.read_text()
    assert os.listdir(tmp_path) == ["report.md"]  # no temp file left behind
    for heading in ("## Versions", "## Command", "## What happened", "## Event 1: fatal signal SIGSEGV",
                    "## What the TensorFlow libraries carry"):
        assert heading in text
    assert "- **TensorFlow**: tensorflow" in text and "2." in text.split("**TensorFlow**:")[1].split("\n")[0]
    assert "- **gdb**: GNU gdb" in text and "- **oneDNN**: " in text and "- **CPU**: " in text
    assert "tf_segv.py" in text.split("## Command")[1].split("##")[0]
    crash_line = line_of(script("tf_segv.py"), "ctypes.string_at(0)")
    assert "nearest user frame `bad_callback` at `%s:%d`" % (script("tf_segv.py"), crash_line) in text
    assert "[py] bad_callback at %s:%d  <-- your code" % (script("tf_segv.py"), crash_line) in text
    assert "tensorflow::PyFuncOp::Compute" in text
    assert "`libtensorflow_cc.so.2`" in text and "break on any function" in text
