"""tfnative core on real cores: a small Python segfault, a TF py_function segfault, bad and damaged input."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ..utils import line_of, load_json, make_core, run_tfnative, script

PYTHON = os.path.realpath(sys.executable)


@pytest.fixture(scope="module")
def small_core(tmp_path_factory) -> str:
    return make_core(str(tmp_path_factory.mktemp("small")), "segv.py", timeout=60)


@pytest.fixture(scope="module")
def tf_core(tmp_path_factory) -> str:
    return make_core(str(tmp_path_factory.mktemp("tf")), "tf_pyfunc_segv.py")


def core_doc(tmp_path, core: str, *args: str) -> dict:
    out = tmp_path / "core.json"
    res = run_tfnative(["core", core, "--json", str(out), *args])
    assert res.returncode == 0, res.stderr
    return load_json(out)


def gdb_frames(core: str) -> dict:
    """tid -> [(pc or None, function)] from gdb's 'thread apply all bt' (inlined frames have no address)."""
    res = subprocess.run(["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled off", "-ex",
                          "thread apply all bt", PYTHON, core], capture_output=True, text=True, timeout=300)
    threads: dict = {}
    cur = None
    for line in res.stdout.splitlines():
        m = re.match(r"Thread \d+ \(.*?LWP (\d+)", line)
        if m:
            cur = threads.setdefault(int(m.group(1)), [])
            continue
        m = re.match(r"#\d+\s+(?:(0x[0-9a-f]+) in )?(\S+) \(", line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16) if m.group(1) else None, m.group(2)))
    return threads


def test_small_core_matches_gdb_and_pystack(tmp_path, small_core):
    doc = core_doc(tmp_path, small_core, "--native-all")
    ev = doc["events"][0]
    assert (ev["kind"], ev["signal"], ev["signal_code"], ev["fault_address"]) == ("core", "SIGSEGV", 1, "0x0")
    assert doc["argv"][-1].endswith("segv.py") and doc["pid"] == ev["thread"]
    t = ev["threads"][0]
    assert t["tid"] == ev["thread"]
    py = [(f["function"], os.path.basename(f["file"]), f["line"]) for f in t["frames"] if f["kind"] == "python"]
    assert py[-3:] == [("poke", "segv.py", 5), ("main", "segv.py", 9), ("<module>", "segv.py", 12)]
    # Every native frame we show is one of gdb's, at the same address, with the same name
    # (gdb's extra frames are inlined ones and the interpreter's, which we show as Python frames).
    gdb = gdb_frames(small_core)[t["tid"]]
    gdb_at: dict = {}  # pc -> the names gdb gives there (an inlined call and the function it is inlined into)
    pc_now = None
    for pc, fn in gdb:
        pc_now = pc if pc is not None else pc_now
        gdb_at.setdefault(pc_now, set()).add(fn)
    ours = [(int(f["address"], 16), f["function"]) for f in t["frames"] if f["kind"] == "native"]
    # libc picks its strlen by the CPU (__strlen_evex, __strlen_avx2, ...): the same one gdb names
    assert ours[0][1] == gdb[0][1] and "strlen" in ours[0][1]
    for pc, fn in ours[1:]:
        assert pc in gdb_at, (hex(pc), fn, gdb)
        assert fn in gdb_at[pc], (hex(pc), fn, gdb_at[pc])
    # pystack's Python frames on the same core
    ps = subprocess.run([shutil.which("pystack") or os.path.join(os.path.dirname(sys.executable), "pystack"),
                         "core", small_core, PYTHON], capture_output=True, text=True, timeout=120)
    ps_funcs = re.findall(r'\(Python\) File "[^"]+", line (\d+), in (\S+)', ps.stdout)
    assert ps_funcs, ps.stdout + ps.stderr
    assert [(fn, int(line)) for line, fn in reversed(ps_funcs)] == [(f, ln) for f, _, ln in py]


def test_text_report_marks_the_crashed_thread(small_core):
    res = run_tfnative(["core", small_core])
    assert res.returncode == 0, res.stderr
    assert "fatal signal SIGSEGV" in res.stdout and "(stopped here)" in res.stdout
    assert "poke at" in res.stdout and "segv.py:5" in res.stdout


def test_zstd_core(tmp_path, small_core):
    zstandard = pytest.importorskip("zstandard")
    packed = tmp_path / "core.zst"
    with open(small_core, "rb") as src, open(packed, "wb") as dst:
        zstandard.ZstdCompressor().copy_stream(src, dst)
    plain = run_tfnative(["core", small_core])
    res = run_tfnative(["core", str(packed)])
    assert res.returncode == 0, res.stderr
    assert res.stdout == plain.stdout


@pytest.mark.parametrize("case", ["missing", "text", "elf_not_core", "other_arch", "cut_headers", "cut_stack"])
def test_bad_input_is_one_line(tmp_path, small_core, case):
    path = str(tmp_path / "input")
    with open(small_core, "rb") as f:
        data = f.read()
    if case == "text":
        open(path, "w").write("not a core\n" * 20)
    elif case == "elf_not_core":
        path = PYTHON
    elif case == "other_arch":
        open(path, "wb").write(data[:18] + b"\xb7\x00" + data[20:])  # EM_AARCH64
    elif case == "cut_headers":
        open(path, "wb").write(data[:2000])
    elif case == "cut_stack":
        open(path, "wb").write(data[:len(data) // 2])  # the main thread's stack is the last segment
    res = run_tfnative(["core", path])
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfnative: error: "), res.stderr
    assert "Traceback" not in res.stderr
    expect = {"missing": "no such file", "text": "not an ELF core", "elf_not_core": "not an ELF core",
              "other_arch": "another architecture", "cut_headers": "truncated", "cut_stack": "truncated"}[case]
    assert expect in lines[0]


def test_tf_pyfunc_segfault(tmp_path, tf_core):
    doc = core_doc(tmp_path, tf_core)
    ev = doc["events"][0]
    assert ev["signal"] == "SIGSEGV" and ev["fault_address"] == "0x0"
    crashed = ev["threads"][0]
    assert crashed["tid"] == ev["thread"]
    frames = crashed["frames"]
    names = [f["function"] for f in frames]
    cb = next(i for i, f in enumerate(frames) if f["kind"] == "python" and f["function"] == "bad_callback")
    assert os.path.basename(frames[cb]["file"]) == "tf_pyfunc_segv.py" and frames[cb]["line"] == 10
    compute = next(i for i, n in enumerate(names) if "PyFuncOp::Compute" in n)
    assert compute > cb
    assert frames[compute].get("op", {}).get("type") == "EagerPyFunc"
    main = next(t for t in ev["threads"] if t["tid"] == doc["pid"])
    py = [(f["function"], f["line"]) for f in main["frames"] if f["kind"] == "python"
          and f["file"].endswith("tf_pyfunc_segv.py")]
    assert py == [("train", 20), ("<module>", 23)]


def test_tf_truncated_core_gives_the_readable_threads(tmp_path, tf_core):
    cut = tmp_path / "cut"
    size = os.path.getsize(tf_core)
    with open(tf_core, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(size - (size // 50)))
    res = run_tfnative(["core", str(cut), "--all-threads"])
    assert res.returncode == 0, res.stderr
    assert "truncated" in res.stdout
    # The executor thread's stack is not at the end of the core: it is still unwound and named;
    # the main thread's stack (the highest addresses, the end of the core) is reported as missing.
    assert "tensorflow::PyFuncOp::Compute(tensorflow::OpKernelContext*)" in res.stdout
    assert "is not in the core (the core is truncated)" in res.stdout


@pytest.fixture(scope="module")
def abort_core(tmp_path_factory) -> str:
    return make_core(str(tmp_path_factory.mktemp("abort")), "tf_check_failed.py")


def test_tf_check_failed_abort_names_the_kernel_op(tmp_path, abort_core):
    doc = core_doc(tmp_path, abort_core)
    ev = doc["events"][0]
    assert (ev["signal"], ev["fault_address"]) == ("SIGABRT", None)
    frames = ev["threads"][0]["frames"]
    names = [f["function"] for f in frames]
    assert names[:3] == ["__pthread_kill_implementation", "raise", "abort"]
    kernel = next(f for f in frames if f["function"].startswith("tensorflow::FusedResizeConv2DUsingGemmOp<")
                  and "::Compute(tensorflow::OpKernelContext*)" in f["function"])
    assert kernel["op"]["type"] == "FusedPadConv2D"
    main = next(t for t in ev["threads"] if t["tid"] == doc["pid"])
    user = [(f["function"], f["line"]) for f in main["frames"] if f["kind"] == "python"
            and f["file"].endswith("tf_check_failed.py")]
    assert user == [("<module>", line_of(script("tf_check_failed.py"), "print(bad_pad_conv("))]


def test_wrong_executable_is_never_used_for_names(tmp_path, small_core):
    """Another build of the executable is not read: its frames show an address and the library, never a
    name from it; the stack ends where its CFI would be needed, and says so, with the Python frames kept."""
    if not os.path.exists("/usr/bin/python3.11"):
        pytest.skip("needs Debian's /usr/bin/python3.11 (another build than the core's)")
    out = tmp_path / "w.json"
    res = run_tfnative(["core", small_core, "/usr/bin/python3.11", "--json", str(out)])
    assert res.returncode == 0, res.stderr
    assert "warning: /usr/bin/python3.11: build-id " in res.stdout and "not the file the process ran" in res.stdout
    t = load_json(out)["events"][0]["threads"][0]
    assert [(f["function"], f["line"]) for f in t["frames"] if f["kind"] == "python"][-3:] == [
        ("poke", 5), ("main", 9), ("<module>", 12)]
    in_exe = [f for f in t["frames"] if f.get("library") == "python3.11"]
    assert in_exe and all(f["function"] == "??" for f in in_exe)
    assert "python3.11 was not read (missing on this host or another build)" in t["error"]
    assert "_start" not in [f["function"] for f in t["frames"]]  # the name in the core's python3.11


def test_locals_of_the_crashing_callback(tmp_path, tf_core):
    """core --locals: the arguments the crashing frames had, read from the core."""
    doc = core_doc(tmp_path, tf_core, "--locals")
    event = doc["events"][0]
    crashed = next(t for t in event["threads"] if t["tid"] == event["thread"])
    by_function = {f["function"]: f for f in crashed["frames"] if f["kind"] == "python"}
    assert [(v["name"], v["repr"], v["arg"]) for v in by_function["string_at"]["variables"]] == [
        ("ptr", "0", True), ("size", "-1", True)]
    (x,) = by_function["bad_callback"]["variables"]
    assert x["name"] == "x" and x["arg"] and re.fullmatch(r"<EagerTensor at 0x[0-9a-f]+>", x["repr"])


def test_json_to_stdout_is_only_the_document(small_core):
    """--json -: standard output is one JSON document; the text report goes to standard error."""
    res = run_tfnative(["core", small_core, "--json", "-"])
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["events"][0]["kind"] == "core"
    assert "=== tfnative: core of pid" in res.stderr
