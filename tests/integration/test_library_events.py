"""Libraries loaded after every breakpoint resolved, when gdb no longer follows library loads.

Once the breakpoints are in, tfnative's gdb stops following ``dlopen``s
(``symbolload.SymbolLoader.release``): that is what keeps TensorFlow's import
fast under tfnative.  What a user would notice if that went wrong:

* a function defined again by a library loaded later gets no breakpoint
  there (gdb would add a location);
* a crash in such a library, one with its own DWARF, loses its file:line
  (gdb must read that library, which it no longer knows of);
* a crash before any breakpoint, or with none, is not caught.
"""

import os
import shutil
import subprocess
import textwrap

import pytest

from ..utils import frames_of, line_of, load_json, python_frames, requires_gdb, run_tfnative

pytestmark = [requires_gdb, pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")]

SOURCE = textwrap.dedent("""\
    extern "C" int NAME(int x) {
        return x + OFFSET;
    }
    extern "C" int tfn_crash(int *p) {
        return *p + 1;
    }
    """)

SCRIPT = textwrap.dedent("""\
    import ctypes
    import sys
    import time


    def first(lib):
        return lib.tfn_twice(1)


    def later(lib):
        return lib.tfn_twice(2)


    def crash(lib):
        return lib.tfn_crash(None)


    def main():
        a = ctypes.CDLL(sys.argv[1])
        print("first", first(a), flush=True)
        time.sleep(0.5)
        # loaded well after the breakpoint resolved in the first library
        b = ctypes.CDLL(sys.argv[2])
        time.sleep(1.5)
        print("later", later(b), flush=True)
        if len(sys.argv) > 3:
            crash(b)


    main()
    """)


def _library(tmp_path, name, offset, *flags, function="tfn_twice"):
    src = tmp_path / ("%s.cc" % name)
    src.write_text(SOURCE.replace("OFFSET", str(offset)).replace("NAME", function))
    out = tmp_path / ("lib%s.so" % name)
    subprocess.run(["g++", "-shared", "-fPIC", "-O0", *flags, "-o", str(out), str(src)], check=True)
    return out, src


def test_function_defined_again_by_a_later_library_is_a_breakpoint_there(tmp_path):
    first, _ = _library(tmp_path, "first", 10)
    later, _ = _library(tmp_path, "later", 20)
    caller = tmp_path / "caller.py"
    caller.write_text(SCRIPT)
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--break", "tfn_twice", "--max-hits", "2", "--json", str(out),
                      str(caller), str(first), str(later)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["first", "11", "later", "22"]
    doc = load_json(out)
    assert [ev["location"] for ev in doc["events"]] == ["tfn_twice", "tfn_twice"]
    tops = [frames_of(doc, i)[0] for i in range(2)]
    assert [f["function"] for f in tops] == ["tfn_twice", "tfn_twice"]
    assert [f["library"] for f in tops] == ["libfirst.so", "liblater.so"]
    assert [python_frames(frames_of(doc, i))[0][0] for i in range(2)] == ["first", "later"]


def test_crash_in_a_later_library_with_debug_info_has_its_line(tmp_path):
    """gdb gets the libraries back to unwind a frame with DWARF (via gdb), with file:line."""
    first, _ = _library(tmp_path, "first", 10)
    later, src = _library(tmp_path, "later", 20, "-g")
    caller = tmp_path / "caller.py"
    caller.write_text(SCRIPT)
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--break", "tfn_twice", "--json", str(out),
                      str(caller), str(first), str(later), "crash"])
    assert r.returncode == 128 + 11, r.stderr
    doc = load_json(out)
    assert [ev["kind"] for ev in doc["events"]] == ["breakpoint", "signal"]
    ev = doc["events"][1]
    assert ev["signal"] == "SIGSEGV" and ev["via"] == "gdb"
    frames = ev["threads"][0]["frames"]
    assert frames[0]["function"].startswith("tfn_crash") and frames[0]["library"] == "liblater.so"
    assert os.path.basename(frames[0]["file"]) == "later.cc"
    assert frames[0]["line"] == line_of(str(src), "return *p + 1;")
    assert [p[0] for p in python_frames(frames)] == ["crash", "main", "<module>"]


def test_crash_without_breakpoints_is_caught(tmp_path):
    """No breakpoint: gdb follows no library at all, and still catches the fault."""
    first, _ = _library(tmp_path, "first", 10)
    later, _ = _library(tmp_path, "later", 20)
    caller = tmp_path / "caller.py"
    caller.write_text(SCRIPT)
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--json", str(out), str(caller), str(first), str(later), "crash"])
    assert r.returncode == 128 + 11, r.stderr
    ev = load_json(out)["events"][0]
    assert ev["kind"] == "signal" and ev["signal"] == "SIGSEGV" and ev["via"] == "cfi"
    frames = ev["threads"][0]["frames"]
    assert frames[0]["function"] == "tfn_crash" and frames[0]["library"] == "liblater.so"
    assert [p[0] for p in python_frames(frames)] == ["crash", "main", "<module>"]


UNLOAD = textwrap.dedent("""\
    import _ctypes
    import ctypes
    import sys
    import time


    def first(lib):
        return lib.tfn_twice(1)


    def later(lib):
        return lib.tfn_twice(2)


    def other(lib):
        return lib.tfn_other(3)


    a = ctypes.CDLL(sys.argv[1])
    old = ctypes.cast(a.tfn_twice, ctypes.c_void_p).value
    print("first", first(a), flush=True)
    b = ctypes.CDLL(sys.argv[2])
    time.sleep(1)
    _ctypes.dlclose(a._handle)
    c = ctypes.CDLL(sys.argv[3])
    print("reused", ctypes.cast(c.tfn_other, ctypes.c_void_p).value == old, flush=True)
    # a stop right after the unload, before tfnative's next look at the maps
    print("later", later(b), flush=True)
    print("other", other(c), flush=True)
    """)


def test_breakpoint_in_an_unloaded_library_leaves_no_trap_behind(tmp_path):
    """dlclose of a library with a breakpoint, and other code mapped where it was.

    gdb puts its traps back at every resume; had it kept the breakpoint, the
    other library's function (same code, same place) would stop or die of
    SIGTRAP.
    """
    first, _ = _library(tmp_path, "first", 10)
    later, _ = _library(tmp_path, "later", 20)
    other, _ = _library(tmp_path, "other", 20, function="tfn_other")
    caller = tmp_path / "caller.py"
    caller.write_text(UNLOAD)
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--break", "tfn_twice", "--max-hits", "3", "--json", str(out),
                      str(caller), str(first), str(later), str(other)])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    if "reused True" not in lines:
        pytest.skip("the loader did not map the other library where the unloaded one was")
    assert [ln for ln in lines if ln and not ln.startswith("reused")] == ["first 11", "later 22", "other 23"]
    doc = load_json(out)
    tops = [ev["threads"][0]["frames"][0] for ev in doc["events"]]
    assert [(f["function"], f["library"]) for f in tops] == [("tfn_twice", "libfirst.so"),
                                                             ("tfn_twice", "liblater.so")]
