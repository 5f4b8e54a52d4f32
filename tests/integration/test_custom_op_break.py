"""``attach --break-op TYPE`` for an op type a library registers when it loads (a custom op).

One real custom op (tests/custom_op/zero_out.cc, tensorflow/custom-op's ``zero_out``) is built with g++
against the TensorFlow of this interpreter, once, and cached by the hash of its source and flags under
``~/.cache/tfnative/ops/``.  Three attach runs: launch mode (the stop, its frame, file:line and the
user's Python line), ``-m`` with a misspelt type beside it (the end-of-run line, close names only), and
``--pid`` on a process that loads the library after the attach.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from ..installed import import_paths
from ..kernels import build_op, source
from ..utils import ROOT, SCRIPTS, TFNATIVE, line_of, load_json, requires_gdb, requires_tf, run_tfnative

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf,
              pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")]

SOURCE = source("zero_out")
USE = os.path.join(SCRIPTS, "use_zero_out.py")
COMPUTE_LINE = line_of(SOURCE, "tfn: the kernel's Compute")
PY_LINE = line_of(USE, "tfn: the Python line that calls the op")
ASYNC_LINE = line_of(SOURCE, "tfn: the kernel's ComputeAsync")
ASYNC_PY_LINE = line_of(USE, "tfn: the Python line that calls the async op")


@pytest.fixture(scope="session")
def zero_out_so() -> str:
    """The op library, built once (``-g -O1``, ``tests/kernels.py``)."""
    return build_op("zero_out", "g")


def _top_and_user(doc: dict) -> tuple:
    [event] = doc["events"]
    frames = event["threads"][0]["frames"]
    user = [(os.path.basename(f["file"]), f["line"]) for f in frames if f["kind"] == "python" and f.get("user")]
    return event, frames[0], user


def test_break_op_on_a_custom_op_stops_in_its_kernel(zero_out_so, tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--break-op", "ZeroOut", "--json", str(out), USE, zero_out_so], timeout=300)
    assert r.returncode == 0, r.stderr
    assert "[[1, 0], [0, 0]]" in r.stdout
    assert "tfnative: --break-op ZeroOut: pending until a library registers it\n" in r.stderr
    assert "armed ZeroOutOp::Compute(tensorflow::OpKernelContext*)" in r.stderr
    event, top, user = _top_and_user(load_json(out))
    assert event["location"] == "op ZeroOut" and event["op"]["type"] == "ZeroOut"
    assert top["function"].startswith("ZeroOutOp::Compute"), top
    assert (os.path.basename(top["file"]), top["line"]) == ("zero_out.cc", COMPUTE_LINE)
    assert top["op"]["type"] == "ZeroOut"
    assert user[0] == ("use_zero_out.py", PY_LINE)
    assert "ZeroOut: no library" not in r.stderr and "but no op of that type ran" not in r.stderr


def test_break_op_in_module_mode_async_kernel_and_a_type_no_library_registers(zero_out_so, tmp_path):
    """``-m``: ZeroOutAsync (an AsyncOpKernel) stops in its own ComputeAsync; ZeroOot (a typo) gets one line
    at the end, with ZeroOut (which the library registers) as its close name and nothing unrelated."""
    out = tmp_path / "s.json"
    r = subprocess.run(TFNATIVE + ["attach", "--break-op", "ZeroOutAsync", "--break-op", "ZeroOot", "--json",
                                   str(out), "-m", "use_zero_out", zero_out_so],
                       capture_output=True, text=True, timeout=300, cwd=SCRIPTS, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(import_paths())))
    assert r.returncode == 0, r.stderr
    assert "[[5, 0]]" in r.stdout
    event, top, user = _top_and_user(load_json(out))
    assert event["op"]["type"] == "ZeroOutAsync" and top["function"].startswith("ZeroOutAsyncOp::ComputeAsync"), top
    assert (os.path.basename(top["file"]), top["line"]) == ("zero_out.cc", ASYNC_LINE)
    assert user[0] == ("use_zero_out.py", ASYNC_PY_LINE)
    assert "tfnative: --break-op ZeroOot: pending until a library registers it\n" in r.stderr
    [end] = [line for line in r.stderr.splitlines() if line.startswith("tfnative: --break-op ZeroOot: no ")]
    assert end == ("tfnative: --break-op ZeroOot: no library the process loaded registers an op type of "
                   "that name; close names: ZeroOut")
    assert r.stderr.index("ZeroOot: pending until") < r.stderr.index("armed ZeroOutAsyncOp::ComputeAsync")
    assert "tfnative: error" not in r.stderr and "ZeroOutAsync: no " not in r.stderr
    assert "op ZeroOot resolved but never fired" not in r.stderr  # the line above says it, and says it right


def test_break_op_with_pid_on_a_process_that_loads_the_library_later(zero_out_so, tmp_path):
    ready, release, out = tmp_path / "ready", tmp_path / "release", tmp_path / "s.json"
    err = tmp_path / "attach.err"
    job = subprocess.Popen([sys.executable, USE, zero_out_so, str(ready), str(release)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    attach = None
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert job.poll() is None and time.monotonic() < deadline, "the job did not get ready"
            time.sleep(0.05)
        with open(err, "w") as e:
            attach = subprocess.Popen(TFNATIVE + ["attach", "--pid", str(job.pid), "--break-op", "ZeroOut",
                                                  "--json", str(out)],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=e, cwd=ROOT)
        while "tfnative: attached to" not in err.read_text():
            assert attach.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        assert "--break-op ZeroOut: pending until a library registers it" in err.read_text()
        release.write_text("go")
        assert attach.wait(timeout=180) == 0, err.read_text()
        assert job.wait(timeout=60) == 0
    finally:
        for p in (attach, job):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    event, top, user = _top_and_user(load_json(out))
    assert event["op"]["type"] == "ZeroOut" and top["function"].startswith("ZeroOutOp::Compute")
    assert (os.path.basename(top["file"]), top["line"]) == ("zero_out.cc", COMPUTE_LINE)
    assert user[0] == ("use_zero_out.py", PY_LINE)


def test_what_a_library_registers_and_close_names(zero_out_so):
    """Read from the files (no attach): the custom op library registers ZeroOut (its name in the .rodata of
    a library that calls TensorFlow's registrars); libc registers nothing; close names are close only."""
    from tfnative.gdb.ops import close_names, op_types, registering_strings, string_names
    from tfnative.toolchain.tfinstall import tensorflow_package_dirs

    data = registering_strings(zero_out_so)
    assert data is not None and b"\0ZeroOut\0" in data
    assert "ZeroOut" in string_names(data)
    libc = next(p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6")
                if os.path.exists(p))
    assert registering_strings(libc) is None
    assert registering_strings(USE) is None  # not ELF
    stock = op_types(tensorflow_package_dirs(sys.executable)[0])
    assert close_names("KfAllReduce", stock) == []  # the case: no NcclAllReduce
    assert close_names("matmul", stock) == ["MatMul"]
    assert close_names("ZeroOot", string_names(data)) == ["ZeroOut"]
