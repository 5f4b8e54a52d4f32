"""The user's own kernel is theirs: its frames are classed ``user`` and marked ``<-- your kernel, op TYPE``,
the same on every path; a build without debug info gets one line with the rebuild; ``doctor --pid`` lists it.

One op library (tests/custom_op/user_kern.cc) built twice by tests/kernels.py: ``-g -O1`` (``stack`` and
``core`` take gdb's path: it has DWARF) and ``-O2 -g0`` (tfnative's own unwinder).  Two processes parked
inside UserPark's Compute, shared by the module (``stack --pid`` and ``doctor --pid`` on each), and two
cores of UserSegv's null write, one of each build, made while the parked processes start.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, Iterator, List, Tuple

import pytest

from ..kernels import build_op, source
from ..utils import SCRIPTS, line_of, load_json, requires_gdb, requires_tf, run_tfnative

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf,
              pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")]

SOURCE = source("user_kern")
USE = os.path.join(SCRIPTS, "use_user_kern.py")
PARK_LINE = line_of(SOURCE, "tfn: the kernel parks here")
SEGV_LINE = line_of(SOURCE, "tfn: the kernel's bad write")
NANOSLEEP = {"35", "230"}  # x86_64 nanosleep, clock_nanosleep: the main thread sleeps inside the kernel


def _core_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def _syscall(pid: int) -> str:
    try:
        with open("/proc/%d/syscall" % pid) as f:
            return f.read().split()[0]
    except (OSError, IndexError):
        return ""


@pytest.fixture(scope="module")
def libs() -> Dict[str, str]:
    return {flavour: build_op("user_kern", flavour) for flavour in ("g", "g0")}


@pytest.fixture(scope="module")
def runs(libs, tmp_path_factory) -> Iterator[Tuple[Dict[str, int], Dict[str, str]]]:
    """({flavour: pid parked in UserPark's Compute}, {flavour: core of UserSegv}): all four started at once."""
    tmp = tmp_path_factory.mktemp("user_kern")
    parked: Dict[str, subprocess.Popen] = {}
    crashing: List[Tuple[str, str, subprocess.Popen]] = []
    try:
        for flavour, so in libs.items():
            # the library named as a program may name it: relative to its working directory (gdb names it so)
            ready = str(tmp / ("ready_" + flavour))
            parked[flavour] = subprocess.Popen([sys.executable, USE, os.path.relpath(so, str(tmp)), "park", ready],
                                               cwd=str(tmp), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL)
            where = tmp / ("core_" + flavour)
            where.mkdir()
            crashing.append((flavour, str(where), subprocess.Popen(
                [sys.executable, USE, os.path.relpath(so, str(where)), "segv"], cwd=str(where), preexec_fn=_core_limit,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        cores = {}
        for flavour, where, proc in crashing:
            assert proc.wait(timeout=300) == -signal.SIGSEGV
            cores[flavour] = os.path.join(where, "core")
            assert os.path.exists(cores[flavour]), "no core in %s (core_pattern?)" % where
        deadline = time.monotonic() + 300
        for flavour, proc in parked.items():
            # READY is written just before the op runs: then the main thread sleeps in the kernel
            while not (os.path.exists(str(tmp / ("ready_" + flavour))) and _syscall(proc.pid) in NANOSLEEP):
                assert proc.poll() is None and time.monotonic() < deadline, "the parked process did not park"
                time.sleep(0.05)
        yield {f: p.pid for f, p in parked.items()}, cores
    finally:
        for proc in list(parked.values()) + [p for _f, _w, p in crashing]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _kernel_frame(doc: dict, function: str) -> dict:
    [event] = doc["events"]
    frames = [f for t in event["threads"] for f in t["frames"] if (f.get("function") or "").startswith(function)]
    assert frames, [f.get("function") for f in event["threads"][0]["frames"]]
    return frames[0]


def _tfnative(args: List[str], tmp_path, name: str) -> Tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / (name + ".json")
    r = run_tfnative(args + ["--json", str(out)], timeout=300)  # the text goes to stdout all the same
    assert r.returncode == 0, r.stderr
    return r, load_json(out)


def test_stack_of_a_process_parked_in_a_g_kernel_marks_it_with_its_line_and_locals(runs, tmp_path):
    pids, _cores = runs
    r, doc = _tfnative(["stack", "--pid", str(pids["g"]), "--locals"], tmp_path, "g")
    frame = _kernel_frame(doc, "UserParkOp::Compute")
    assert frame["class"] == "user" and frame["op"]["type"] == "UserPark"
    assert (os.path.basename(frame["file"]), frame["line"]) == ("user_kern.cc", PARK_LINE)
    assert "tfn: the kernel parks here" in frame["source"]
    [line] = [ln for ln in r.stdout.splitlines() if "UserParkOp::Compute" in ln]
    assert line.startswith("> ") and line.endswith("<-- your kernel, op UserPark"), line
    # --locals: the kernel's arguments, then its locals, from its DWARF (gdb's path)
    variables = {v["name"]: v for v in frame["variables"]}
    assert variables["context"]["arg"] and variables["context"]["repr"].startswith("0x")
    assert variables["seconds"] == {"name": "seconds", "repr": "300", "arg": False}
    assert "               seconds = 300\n" in r.stdout
    # TensorFlow's frames get none: only the user's own code is read
    assert not any(f.get("variables") for t in doc["events"][0]["threads"] for f in t["frames"]
                   if f["kind"] == "native" and f is not frame)
    assert "no debug info" not in r.stdout and "no_debug_info" not in doc["events"][0]
    # TensorFlow's own frames stay TensorFlow's, libc's the system's
    classes = {f["library"]: f["class"] for t in doc["events"][0]["threads"] for f in t["frames"]
               if f["kind"] == "native" and f["library"]}
    assert classes["libtensorflow_framework.so.2"] == "tensorflow-native"
    assert classes["libc.so.6"] == "system"


def test_stack_of_a_g0_kernel_marks_it_and_says_how_to_rebuild_with_debug_info(runs, tmp_path):
    pids, _cores = runs
    r, doc = _tfnative(["stack", "--pid", str(pids["g0"])], tmp_path, "g0")
    frame = _kernel_frame(doc, "UserParkOp::Compute")
    assert frame["class"] == "user" and frame["file"] is None
    [line] = [ln for ln in r.stdout.splitlines() if "UserParkOp::Compute" in ln]
    assert line.endswith("<-- your kernel, op UserPark"), line
    [lib] = doc["events"][0]["no_debug_info"]
    assert lib["library"] == "user_kern.so" and lib["built_by"] == "g++"
    assert lib["rebuild"].startswith("g++ -std=c++17 -shared -fPIC -g -O1 user_kern.cc ")
    [said] = [ln for ln in r.stdout.splitlines() if "no debug info" in ln]
    assert said.startswith("no debug info in your library user_kern.so (no file:line, no locals in its frames); "
                           "rebuild it with -g: g++ -std=c++17 -shared -fPIC -g -O1 user_kern.cc "), said


@pytest.mark.parametrize("flavour", ["g", "g0"])
def test_core_of_a_crash_in_the_users_kernel(runs, tmp_path, flavour):
    _pids, cores = runs
    r, doc = _tfnative(["core", cores[flavour]], tmp_path, "core")
    frame = _kernel_frame(doc, "UserSegvOp::Compute")
    assert frame["class"] == "user" and frame["op"]["type"] == "UserSegv"
    [line] = [ln for ln in r.stdout.splitlines() if "UserSegvOp::Compute" in ln]
    assert line.startswith("> ") and line.endswith("<-- your kernel, op UserSegv"), line
    if flavour == "g":
        assert (os.path.basename(frame["file"]), frame["line"]) == ("user_kern.cc", SEGV_LINE)
        assert "no_debug_info" not in doc["events"][0]
    else:
        assert [lib["library"] for lib in doc["events"][0]["no_debug_info"]] == ["user_kern.so"]


def test_attach_marks_the_kernel_it_stops_in_and_its_locals(libs, tmp_path):
    """attach (gdb's path, the library loaded by a relative path): --break-op's stop and the crash are in the
    user's kernel; --locals gives the kernel frame's arguments and locals at the stop."""
    so = os.path.relpath(libs["g"], str(tmp_path))
    out = tmp_path / "a.json"
    r = run_tfnative(["attach", "--break-op", "UserSegv", "--locals", "--json", str(out), USE, so, "segv"],
                     timeout=300, cwd=str(tmp_path))
    assert r.returncode == 128 + signal.SIGSEGV, r.stderr
    stop, crash = load_json(out)["events"]
    assert stop["kind"] == "breakpoint" and crash["signal"] == "SIGSEGV"
    kernel = [f for f in stop["threads"][0]["frames"] if (f.get("function") or "").startswith("UserSegvOp::Compute")]
    assert kernel and kernel[0]["class"] == "user"
    assert any(v["name"] == "context" and v["arg"] for v in kernel[0]["variables"]), kernel[0].get("variables")
    top = crash["threads"][0]["frames"][0]
    assert top["function"].startswith("UserSegvOp::Compute") and top["class"] == "user" and top["line"] == SEGV_LINE
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("> #0        UserSegvOp::Compute")]
    assert len(lines) == 2 and all(ln.endswith("<-- your kernel, op UserSegv") for ln in lines), lines


def test_doctor_lists_the_op_library_a_process_loads_and_what_it_carries(runs, libs):
    pids, _cores = runs
    seen = {}
    for flavour, pid in pids.items():
        r = run_tfnative(["doctor", "--pid", str(pid), "--json"], timeout=120)
        assert r.returncode == 0, r.stderr
        [lib] = json.loads(r.stdout)["libraries"]
        assert lib["path"] == libs[flavour] and lib["op_library"] and lib["built_by"] == "g++"
        seen[flavour] = lib
    assert seen["g"]["report"]["can_see_lines"] and seen["g"]["rebuild"] is None
    assert not seen["g0"]["report"]["can_see_lines"] and seen["g0"]["report"]["symtab"]
    assert seen["g0"]["rebuild"].startswith("g++ -std=c++17 -shared -fPIC -g -O1 user_kern.cc ")
    text = run_tfnative(["doctor", "--pid", str(pids["g0"])], timeout=120)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("process %d maps 1 library of your own:\n" % pids["g0"])
    assert "%s, op library (links TensorFlow) built by g++\n" % libs["g0"] in text.stdout
    assert "  carries     no DWARF: no file:line, no locals; .symtab: " in text.stdout


def test_doctor_pid_and_script_refusals(tmp_path):
    r = run_tfnative(["doctor", "--pid", "999999999"], timeout=60)
    assert r.returncode != 0 and r.stderr == "tfnative: error: no process 999999999\n"
    r = run_tfnative(["doctor", USE], timeout=60)
    assert r.returncode != 0 and r.stderr.startswith("tfnative: error: %s is a Python script: run it, then "
                                                     "'tfnative doctor --pid PID'" % USE)
