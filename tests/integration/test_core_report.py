"""tfnative on real cores, beyond the stacks: the Markdown report, the triage and hang verdict, truncated cores.

Three cores, each made once for the module: a TF process that segfaults in a ``tf.py_function`` callback,
a plain Python segfault, and a hung process (a thread holds the GIL in a C call while two wait for it)
killed from outside with ``SIGABRT`` (the usual way to get a core of a hang).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from ..utils import line_of, load_json, make_core, raise_core_limit, run_tfnative, script

SEGV = script("tf_pyfunc_segv.py")
GIL = script("gil_holder.py")


@pytest.fixture(scope="module")
def tf_core(tmp_path_factory) -> str:
    return make_core(str(tmp_path_factory.mktemp("tf")), "tf_pyfunc_segv.py")


LONG_ARGS = ["--learning-rate=0.001", "--model-dir", "/tmp/a/long/directory/name/for/the/model", "with space", "",
             "KEY=value", "last"]


@pytest.fixture(scope="module")
def small_core(tmp_path_factory) -> str:
    """A plain Python segfault, with arguments longer than the 80 characters NT_PRPSINFO keeps."""
    tmp = str(tmp_path_factory.mktemp("small"))
    proc = subprocess.run([sys.executable, script("segv.py"), *LONG_ARGS], cwd=tmp, preexec_fn=raise_core_limit,
                          capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGSEGV
    return os.path.join(tmp, "core")


def _syscall(pid: int, tid: int) -> str:
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            return f.read().split()[0]
    except (OSError, IndexError):
        return ""


@pytest.fixture(scope="module")
def gil_core(tmp_path_factory):
    """(core, pid, tids of the two waiters): gil_holder.py killed by SIGABRT once its main thread sleeps
    holding the GIL and both spinning threads wait for it (futex)."""
    tmp = str(tmp_path_factory.mktemp("gil"))
    proc = subprocess.Popen([sys.executable, GIL], cwd=tmp, preexec_fn=raise_core_limit, stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline() == b"ready\n"
        pid = proc.pid
        deadline = time.monotonic() + 60
        while True:
            tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))
            calls = {t: _syscall(pid, t) for t in tids}
            # clock_nanosleep (230) in the main thread; futex (202) in the two others
            if len(tids) == 3 and calls[pid] == "230" and all(calls[t] == "202" for t in tids if t != pid):
                break
            assert time.monotonic() < deadline, calls
            time.sleep(0.05)
        os.kill(pid, signal.SIGABRT)
        assert proc.wait(timeout=60) == -signal.SIGABRT
    finally:
        proc.kill()
        proc.wait()
    core = os.path.join(tmp, "core")
    assert os.path.exists(core)
    return core, pid, [t for t in tids if t != pid]


def test_report_of_a_tf_core(tmp_path, tf_core):
    out = tmp_path / "bug.md"
    res = run_tfnative(["report", "--core", tf_core, "-o", str(out)])
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip() == "tfnative: report written to %s" % out
    md = out.read_text()
    # versions of what the process ran: this interpreter and the TensorFlow it imported
    tf_dist = next(d for d in importlib.metadata.distributions()
                   if re.match(r"^(tensorflow|tf[-_]nightly)([-_]cpu)?$", d.metadata["Name"] or "", re.I))
    assert re.search(r"- \*\*TensorFlow\*\*: %s %s \(" % (re.escape(tf_dist.metadata["Name"]),
                                                         re.escape(tf_dist.version)), md), md[:800]
    python = platform.python_version()
    assert "- **Python**: %s (%s)" % (python, os.path.realpath(sys.executable)) in md
    assert "## Command\n\n```\n%s %s\n```" % (sys.executable, SEGV) in md
    happened = md.split("## What happened", 1)[1].split("##", 1)[0]
    assert "- the process died of SIGSEGV (core dumped)" in happened
    assert "- op `EagerPyFunc`" in happened
    assert "- nearest user frame `bad_callback` at `%s:10`" % SEGV in happened
    assert "hang verdict" not in happened  # a crash is no hang
    event = md.split("## Event 1: core dump, fatal signal SIGSEGV", 1)[1]
    callback = event.index("[py] bad_callback at %s:10" % SEGV)
    assert event.index("tensorflow::PyFuncOp::Compute(tensorflow::OpKernelContext*)") > callback
    assert "[py] train at %s:20" % SEGV in event
    # the doctor's verdicts on the TensorFlow libraries the core maps (those files are on this host)
    doctor = md.split("(`tfnative doctor`)", 1)[1]
    assert re.search(r"- `libtensorflow_framework\.so\.2` \([\d.]+ MB\): ", doctor)


def test_report_of_a_core_to_stdout_and_bad_core(tmp_path, small_core):
    res = run_tfnative(["report", "--core", small_core, "-o", "-"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("# Native debugging report (tfnative)")
    assert "- **TensorFlow**: not loaded by the process" in res.stdout
    assert "oneDNN" not in res.stdout
    assert "[py] poke at %s:5" % script("segv.py") in res.stdout
    # the arguments in full, from the process's stack
    assert "## Command\n\n```\n%s\n```" % shlex.join([sys.executable, script("segv.py"), *LONG_ARGS]) in res.stdout
    out = tmp_path / "c.json"
    assert run_tfnative(["core", small_core, "--json", str(out)]).returncode == 0
    assert load_json(out)["argv"] == [sys.executable, script("segv.py"), *LONG_ARGS]
    bad = run_tfnative(["report", "--core", str(tmp_path / "nothing"), "-o", str(tmp_path / "r.md")])
    assert bad.returncode != 0 and not (tmp_path / "r.md").exists()
    assert bad.stderr.strip().splitlines() == ["tfnative: error: %s: no such file" % (tmp_path / "nothing")]


def test_crash_core_gets_the_fatal_signal_triage_and_no_hang_verdict(tmp_path, tf_core):
    out = tmp_path / "c.json"
    res = run_tfnative(["core", tf_core, "--json", str(out)])
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [
        "tfnative: triage: fatal SIGSEGV; op EagerPyFunc; nearest user frame bad_callback at %s:10; "
        "in tf.function __inference_step_6" % SEGV]
    doc = load_json(out)
    assert doc["exit"] == {"signal": "SIGSEGV"}
    assert doc["triage"]["signal"] == "SIGSEGV" and doc["triage"]["op"]["type"] == "EagerPyFunc"
    assert doc["triage"]["nearest_user_frame"] == {"function": "bad_callback", "file": SEGV, "line": 10}
    assert "triage" not in doc["events"][0] and "sent_by" not in doc["events"][0]


def test_hang_core_killed_from_outside_gets_the_hang_verdict(tmp_path, gil_core):
    core, pid, waiters = gil_core
    out = tmp_path / "g.json"
    res = run_tfnative(["core", core, "--json", str(out)])
    assert res.returncode == 0, res.stderr
    hold = line_of(GIL, "ctypes.PyDLL(None).sleep")
    ev = load_json(out)["events"][0]
    assert (ev["signal"], ev["signal_code"], ev["sent_by"]) == ("SIGABRT", 0, os.getpid())
    t = ev["triage"]
    assert t["pattern"] == "gil_held_blocked"
    assert (t["gil_holder"]["tid"], t["gil_holder"]["function"], t["gil_holder"]["line"]) == (pid, "hold_gil", hold)
    assert t["gil_holder"]["blocked_in"] == "sleep"
    assert sorted(t["waiting_for_gil"]) == waiters
    assert t["stuck"] is None and t["moving"] is None  # a core has no samples
    assert all("kernel" not in th and "progress" not in th for th in ev["threads"])  # nor kernel state
    assert res.stderr.splitlines() == [
        "tfnative: triage: fatal SIGABRT (sent by pid %d); nearest user frame hold_gil at %s:%d" % (
            os.getpid(), GIL, hold),
        "tfnative: verdict: the main thread holds the GIL in hold_gil at gil_holder.py:%d, in sleep(); "
        "2 threads wait for it (%s)" % (hold, ", ".join(map(str, t["waiting_for_gil"])))]


def test_report_of_a_hang_core_has_the_hang_verdict(gil_core):
    core, pid, waiters = gil_core
    res = run_tfnative(["report", "--core", core, "-o", "-"])
    assert res.returncode == 0, res.stderr
    happened = res.stdout.split("## What happened", 1)[1].split("##", 1)[0]
    assert "- the process died of SIGABRT sent by pid %d (core dumped)" % os.getpid() in happened
    assert "- hang verdict: the main thread holds the GIL in hold_gil at gil_holder.py:%d, in sleep(); " \
           "2 threads wait for it" % line_of(GIL, "ctypes.PyDLL(None).sleep") in happened


def _cut(src: str, dst, fraction: float) -> None:
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data[:int(len(data) * fraction)])


@pytest.mark.parametrize("fraction", [0.0005, 0.1, 0.5, 0.9, 0.995])
def test_truncated_core_gives_what_it_can(tmp_path, gil_core, fraction):
    """Cut at any size: exit 0 with the threads it can read and what memory is missing, or one line."""
    core, pid, waiters = gil_core
    cut = tmp_path / "cut"
    _cut(core, cut, fraction)
    res = run_tfnative(["core", str(cut), "--all-threads"])
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    if res.returncode != 0:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tfnative: error: ") and "truncated" in lines[0], lines
        return
    assert "the core is truncated" in res.stdout
    blocks = {int(b.split('"', 1)[0]): b for b in res.stdout.split("\nThread ")[1:]}
    for block in blocks.values():
        # every thread either has frames or says which memory it lacks
        # (a frame's line starts with two spaces, or with ">" where it is the user's code)
        assert re.search(r"^[ >] #0 ", block, re.M) or re.search(
            r"!! .*0x[0-9a-f]+ is not in the core \(the core is truncated\)", block), block


def test_truncated_core_keeps_python_frames_of_threads_whose_stack_is_gone(tmp_path, gil_core):
    """The main thread's stack is the end of the core: without it the other threads' Python frames are
    still read, and the main thread says which memory it lacks."""
    core, pid, waiters = gil_core
    cut = tmp_path / "cut"
    _cut(core, cut, 0.995)
    out = tmp_path / "cut.json"
    res = run_tfnative(["core", str(cut), "--all-threads", "--json", str(out)])
    assert res.returncode == 0, res.stderr
    ev = load_json(out)["events"][0]
    by_tid = {t["tid"]: t for t in ev["threads"]}
    main = by_tid[pid]
    # its innermost frame comes from its registers; its Python frames and its callers are in the lost part
    assert [f["kind"] for f in main["frames"]] == ["native"]
    assert re.search(r"^cannot read Python frames: 0x[0-9a-f]+ is not in the core \(the core is truncated\); "
                     r"native unwinding stopped at the last frame shown: .* is not in the core", main["error"])
    for tid in waiters:
        py = [(f["function"], f["line"]) for f in by_tid[tid]["frames"] if f["kind"] == "python"]
        assert py[0] == ("spin", line_of(GIL, "sum(range(1000))")), py
        assert by_tid[tid]["gil"] == "waiting"


@pytest.mark.skipif(shutil.which("gdb") is None, reason="needs gdb")
def test_with_gdb_on_a_tf_core_agrees_with_the_own_unwinder(tmp_path, tf_core):
    """--with-gdb: the same threads, Python frames and op; gdb adds source lines where a library has them."""
    ours = load_json_of(tmp_path, ["core", tf_core], "ours")
    res = run_tfnative(["core", tf_core, "--with-gdb", "--json", str(tmp_path / "gdb.json")], timeout=600)
    assert res.returncode == 0, res.stderr
    theirs = load_json(tmp_path / "gdb.json")["events"][0]
    assert theirs["via"] == "gdb" and ours["via"] == "cfi"
    assert [t["tid"] for t in theirs["threads"]] == [t["tid"] for t in ours["threads"]]
    for a, b in zip(ours["threads"], theirs["threads"]):
        assert [(f["function"], f["line"]) for f in a["frames"] if f["kind"] == "python"] == \
            [(f["function"], f["line"]) for f in b["frames"] if f["kind"] == "python"]
    crashed = theirs["threads"][0]["frames"]
    compute = next(f for f in crashed if "PyFuncOp::Compute" in f["function"])
    assert compute["op"]["type"] == "EagerPyFunc"
    assert any(f.get("file") and f["kind"] == "native" for f in crashed)  # gdb's file:line (libc, _ctypes)


def test_with_gdb_reads_a_compressed_core(tmp_path, small_core):
    zstandard = pytest.importorskip("zstandard")
    if shutil.which("gdb") is None:
        pytest.skip("needs gdb")
    packed = tmp_path / "core.zst"
    with open(small_core, "rb") as src, open(packed, "wb") as dst:
        zstandard.ZstdCompressor().copy_stream(src, dst)
    ev = load_json_of(tmp_path, ["core", str(packed), "--with-gdb"], "z")
    assert ev["via"] == "gdb"
    assert [(f["function"], f["line"]) for f in ev["threads"][0]["frames"] if f["kind"] == "python"][-3:] == [
        ("poke", 5), ("main", 9), ("<module>", 12)]


def load_json_of(tmp_path, args, name):
    out = tmp_path / ("%s.json" % name)
    res = run_tfnative(args + ["--json", str(out)], timeout=600)
    assert res.returncode == 0, res.stderr
    return load_json(out)["events"][0]
