"""tfnative doctor on real files: the stock TensorFlow wheel, and small libraries gcc builds here."""

import json
import os
import shutil
import subprocess
import time

import pytest

from ..utils import requires_tf, run_tfnative

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

SRC_A = "int helper(int x) { int y = x * 2; return y + 1; }\n"
SRC_B = "int helper(int);\nint entry(int v) { int w = helper(v); return w; }\n"


def doctor_json(*args):
    r = run_tfnative(["doctor", "--json", *args], timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def build_so(tmp_path, name, cflags, ldflags=(), sub="src"):
    """libNAME.so from two files (sub/a.c with CFLAGS, sub/b.c without -g), compiled in tmp_path."""
    d = tmp_path / sub
    d.mkdir(exist_ok=True)
    (d / "a.c").write_text(SRC_A)
    (d / "b.c").write_text(SRC_B)
    objs = []
    for f, flags in (("a", cflags), ("b", [])):
        obj = tmp_path / ("%s_%s.o" % (name, f))
        subprocess.run(["gcc", "-O1", "-fPIC", *flags, "-c", "%s/%s.c" % (sub, f), "-o", str(obj)], check=True,
                       cwd=str(tmp_path))
        objs.append(str(obj))
    out = tmp_path / ("lib%s.so" % name)
    subprocess.run(["gcc", "-shared", "-Wl,--build-id", *ldflags, *objs, "-o", str(out)], check=True,
                   cwd=str(tmp_path))
    return str(out)


@requires_tf
def test_stock_tensorflow_is_fast_and_symbols_only():
    t0 = time.monotonic()
    r = run_tfnative(["doctor", "--json"], timeout=120)  # default: the TF of this Python
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    docs = json.loads(r.stdout)
    by = {os.path.basename(d["path"]): d for d in docs}
    cc = by["libtensorflow_cc.so.2"]
    assert cc["size"] > 100e6 and cc["symtab"] and cc["symtab_symbols"] > 500000
    assert cc["dwarf_units"] == 0 and cc["dwarf_files"] == [] and not cc["can_see_lines"]
    assert "build_id" in cc and "break on any function" in cc["verdict"]
    assert "libtensorflow_framework.so.2" in by
    assert elapsed < 5.0, "doctor took %.1f s" % elapsed  # includes the CLI's own start


@requires_tf
def test_stock_tensorflow_text_report():
    import importlib.util

    spec = importlib.util.find_spec("tensorflow")
    lib = os.path.join(list(spec.submodule_search_locations)[0], "libtensorflow_cc.so.2")
    t0 = time.monotonic()
    r = run_tfnative(["doctor", lib], timeout=60)
    assert time.monotonic() - t0 < 5.0
    assert r.returncode == 0, r.stderr
    assert "DWARF       none" in r.stdout and "verdict     you can break on any function" in r.stdout
    assert "tfn_lines" in r.stdout


@needs_gcc
def test_full_lines_and_no_dwarf(tmp_path):
    full = build_so(tmp_path, "full", ["-g"])
    lines = build_so(tmp_path, "lines", ["-g1"])
    none = build_so(tmp_path, "none", [])
    f, ln, n = doctor_json(full, lines, none)
    assert f["dwarf_units"] == 1 and f["dwarf_files"] == ["src/a.c"] and f["can_see_locals"]
    assert f["build_id"] and len(f["build_id"]) == 40 and f["dwarf_versions"] == [5]
    assert ln["dwarf_units"] == 1 and ln["can_see_lines"] and not ln["can_see_locals"]
    assert n["dwarf_units"] == 0 and n["symtab"] and n["next_preset"] == "tfn_lines"


@needs_gcc
def test_compressed_dwarf64_and_index(tmp_path):
    comp = build_so(tmp_path, "comp", ["-g", "-gz"], ["-Wl,--compress-debug-sections=zlib"])
    d64 = build_so(tmp_path, "d64", ["-g", "-gdwarf64"])
    idx = build_so(tmp_path, "idx", ["-g"], ["-fuse-ld=gold", "-Wl,--gdb-index"])
    c, d, i = doctor_json(comp, d64, idx)
    assert c["compressed"] == "zlib" and c["dwarf_files"] == ["src/a.c"] and c["can_see_locals"]
    assert d["dwarf64"] and d["dwarf_files"] == ["src/a.c"]
    assert i["index"] == ".gdb_index"


@needs_gcc
def test_split_dwarf_dwo_found_or_missing(tmp_path):
    so = build_so(tmp_path, "split", ["-g", "-gsplit-dwarf"])
    d = doctor_json(so)[0]
    assert d["split_units"] == 1 and d["dwo_found"] == 1 and d["dwarf_files"] == ["src/a.c"]
    assert d["can_see_locals"]
    for dwo in tmp_path.glob("*.dwo"):
        dwo.unlink()
    d = doctor_json(so)[0]
    assert d["dwo_found"] == 0 and len(d["dwo_missing"]) == 1 and not d["can_see_lines"]
    assert "missing" in d["verdict"]


@needs_gcc
def test_debuglink_found_and_followed(tmp_path):
    so = build_so(tmp_path, "linked", ["-g"])
    dbg = so + ".debug"
    subprocess.run(["objcopy", "--only-keep-debug", so, dbg], check=True)
    subprocess.run(["objcopy", "--strip-debug", "--add-gnu-debuglink=%s" % dbg, so], check=True)
    d = doctor_json(so)[0]
    assert d["debuglink"] == os.path.basename(dbg) and d["debuglink_found"] == dbg
    assert d["dwarf_files"] == ["src/a.c"] and d["can_see_locals"]
    os.unlink(dbg)
    d = doctor_json(so)[0]
    assert d["debuglink_found"] is None and d["dwarf_units"] == 0
    assert "install the separate debug file" in d["verdict"]


def test_errors_are_one_line(tmp_path):
    (tmp_path / "text.so").write_text("not an ELF file at all, just text.......................\n")
    for args, words in ((["/nonexistent.so"], "no such file"), ([str(tmp_path / "text.so")], "not an ELF"),
                        ([str(tmp_path)], "is a directory")):
        r = run_tfnative(["doctor", *args], timeout=60)
        assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert "Traceback" not in r.stderr
    r = run_tfnative(["doctor", "--python", str(tmp_path / "nopython")], timeout=60)
    assert r.returncode == 2 and "cannot run --python" in r.stderr
