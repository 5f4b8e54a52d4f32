"""A C++ exception out of the user's own kernel (``tests/custom_op/segment_throw.cc``: ``vector::at`` throws
``std::out_of_range``), and ``attach --break-throw``, which stops where it is thrown.

By the time the process dies (SIGSEGV in pybind11's translators), the kernel has unwound: the crash report
names the exception (read from libstdc++'s per-thread globals), the op (the eager frames' ``op_name``) and
advises ``--break-throw std::out_of_range``, whose stop is in the kernel frame (its ``.cc`` line with ``-g``).
``--break-throw=any`` passes over pybind11's ``error_already_set`` (Python exceptions crossing C++) and stops
at the kernel's throw too.  Three attach runs, one each.
"""

from __future__ import annotations

import os
import shutil

import pytest

from ..kernels import build_op, source
from ..utils import line_of, load_json, requires_gdb, requires_tf, run_tfnative, script

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf,
              pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")]

SCRIPT = script("kernel_throw.py")
THROW_LINE = line_of(source("segment_throw"), "tfn: vector::at throws std::out_of_range")
USER_LINE = line_of(SCRIPT, "tfn: SegmentThrow throws here")
WHAT = "vector::_M_range_check: __n (which is 7) >= this->size() (which is 3)"


def _attach(tmp_path_factory, name: str, flavour: str, *options: str):
    out = tmp_path_factory.mktemp(name) / "a.json"
    r = run_tfnative(["attach", *options, "--json", str(out), SCRIPT, build_op("segment_throw", flavour)],
                     timeout=300)
    assert out.exists(), (r.returncode, r.stderr[-4000:])
    return r, load_json(out)


@pytest.fixture(scope="module")
def crash(tmp_path_factory):
    return _attach(tmp_path_factory, "crash", "g0")


@pytest.fixture(scope="module")
def thrown(tmp_path_factory):
    return _attach(tmp_path_factory, "thrown", "g", "--break-throw", "std::out_of_range")


@pytest.fixture(scope="module")
def any_throw(tmp_path_factory):
    return _attach(tmp_path_factory, "any", "g0", "--break-throw=any")


def test_the_crash_names_the_exception_the_op_and_leads_to_the_throw(crash):
    r, doc = crash
    assert r.returncode == 128 + 11, r.stderr[-3000:]
    triage = doc["triage"]
    assert triage["cxx_exception"] == {"type": "std::out_of_range", "what": WHAT, "state": "caught"}
    assert triage["op"]["type"] == "SegmentThrow"
    nearest = triage["nearest_user_frame"]
    assert (os.path.basename(nearest["file"]), nearest["line"]) == ("kernel_throw.py", USER_LINE)
    [line] = [x for x in r.stderr.splitlines() if x.startswith("tfnative: triage: ")]
    assert 'C++ exception std::out_of_range: "%s" (being handled)' % WHAT in line
    assert "op SegmentThrow" in line
    assert line.endswith("to stop where it was thrown (in the kernel it escaped from): rerun with "
                         "--break-throw std::out_of_range")


def _stop(doc):
    event = doc["events"][0]
    thread = event["threads"][0]
    kernel = next(f for f in thread["frames"] if f.get("op"))
    return event, thread, kernel


def test_break_throw_stops_in_the_kernel_frame_at_its_line(thrown):
    r, doc = thrown
    event, thread, kernel = _stop(doc)
    assert (event["kind"], event["location"]) == ("breakpoint", "throw std::out_of_range")
    assert thread["frames"][0]["function"] == "__cxa_throw"
    assert thread["cxx_exception"] == {"type": "std::out_of_range", "what": WHAT, "state": "thrown"}
    assert kernel["function"].startswith("SegmentThrowOp::Compute") and kernel["op"]["type"] == "SegmentThrow"
    assert (os.path.basename(kernel["file"]), kernel["line"]) == ("segment_throw.cc", THROW_LINE)
    assert "breakpoint throw std::out_of_range hit (hit 1 of 1)" in r.stderr
    assert doc["triage"]["breakpoints"] == {"throw std::out_of_range": 1}
    assert "rerun with" not in r.stderr  # seen already
    # vector::at and _M_range_check, inlined into the user's library from the standard headers: not the user's code
    std = [f for f in thread["frames"] if f.get("library") == "segment_throw.so" and f["function"].startswith("std::")]
    assert [f["function"].split("::")[-1] for f in std] == ["_M_range_check", "at"], thread["frames"][:6]
    assert {f["class"] for f in std} == {"system"} and kernel["class"] == "user"
    assert all(os.path.basename(f["file"]) == "stl_vector.h" for f in std)
    for line in r.stderr.splitlines():
        if "std::vector<float" in line and "segment_throw.so" in line:
            assert "<--" not in line, line


def test_break_throw_of_any_type_passes_over_pythons_exceptions(any_throw):
    r, doc = any_throw
    event, thread, kernel = _stop(doc)
    assert event["location"] == "throw"
    assert thread["cxx_exception"]["type"] == "std::out_of_range"  # not pybind11::error_already_set
    assert kernel["function"].startswith("SegmentThrowOp::Compute") and kernel["library"] == "segment_throw.so"
