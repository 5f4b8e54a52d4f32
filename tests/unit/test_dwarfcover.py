"""dwarfcover: whether a library's DWARF describes its own code, on real files built here and real wheels.

Libraries are compiled with the system's gcc (skipped without it); TensorFlow's and pyenv's libraries are
used where this machine has them.
"""

from __future__ import annotations

import glob
import os
import shutil
import struct
import subprocess

import pytest

from tfnative.core.binary import dwarfcover
from tfnative.core.binary.symindex import ElfIndex
from tfnative.gdb.symbols import wants_surrogate

requires_gcc = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("objcopy") is None,
                                  reason="gcc and objcopy are needed to build the test libraries")

BIG_FUNCTIONS = 60  # a file without debug info: some 10 kB of code, so that the helper's unit is under 1%


def _big_source() -> str:
    body = []
    for i in range(BIG_FUNCTIONS):
        body.append("int f%d(int x) { int s = x; for (int i = 0; i < x; i++) { s = s * %d + i / (x | 1) - (s >> 3);"
                    " if (s %% %d == 0) s ^= i * 7; } return s + %d; }" % (i, i + 3, i + 5, i))
    return "\n".join(body) + "\n"


def _build(tmp_path, files, out="lib.so", extra=()):
    """Compile each (relative path, source, flags) in ``tmp_path`` and link them into ``out``."""
    objs = []
    for rel, src, flags in files:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src)
        obj = str(path) + ".o"
        subprocess.run(["gcc", "-c", "-fPIC", "-O1", *flags, rel, "-o", obj], cwd=tmp_path, check=True)
        objs.append(obj)
    lib = str(tmp_path / out)
    subprocess.run(["gcc", "-shared", *extra, "-o", lib, *objs], cwd=tmp_path, check=True)
    return lib


def _vaddr(lib, name):
    with ElfIndex.open(lib, use_cache=False) as idx:
        (found, vaddr), = idx.find(name)
    return vaddr


HELPER = "int helper(int x) { return x * 3 + 1; }\nint unused_helper(int x) { return x - 7; }\n"


@requires_gcc
@pytest.mark.parametrize("flags", [["-g", "-gdwarf-4"], ["-g", "-gdwarf-5"], ["-g", "-gdwarf-5", "-ffunction-sections"],
                                   ["-g1"]], ids=["dwarf4", "dwarf5", "dwarf5-ranges", "g1"])
def test_a_debug_build_describes_its_code(tmp_path, flags):
    lib = _build(tmp_path, [("mylib/a.c", _big_source(), flags), ("mylib/helper.c", HELPER, flags)])
    cov = dwarfcover.read(lib)
    assert cov.readable, cov.why_unreadable
    assert cov.units == 2 and cov.runtime_units == 0
    assert cov.describes_code and cov.share > 0.5
    assert cov.describes(_vaddr(lib, "f17")) and cov.describes(_vaddr(lib, "helper"))
    assert not cov.describes(_vaddr(lib, "_init"))  # crt code: no unit describes it
    assert dwarfcover.gdb_gives_lines(lib)


@requires_gcc
def test_units_of_a_compiler_runtime_do_not_make_a_debug_build(tmp_path):
    """TensorFlow 2.16-2.20's case in small: code without DWARF plus one libgcc unit with it."""
    lib = _build(tmp_path, [("src/a.c", _big_source(), []), ("libgcc/helper.c", HELPER, ["-g"])])
    cov = dwarfcover.read(lib)
    assert cov.has_dwarf and cov.units == 1 and cov.runtime_units == 1
    assert 0 < cov.described_bytes < 0.01 * cov.code_bytes
    assert cov.own_bytes == 0
    assert not cov.describes_code
    assert not cov.describes(_vaddr(lib, "helper"))  # its unit describes it, but gdb's full symbols are not wanted
    assert not dwarfcover.gdb_gives_lines(lib)


@requires_gcc
def test_one_file_of_the_library_with_debug_info_is_its_own(tmp_path):
    """A targeted build (one file with -g, as tfn_targeted makes): a tiny share, but the library's own code."""
    lib = _build(tmp_path, [("src/a.c", _big_source(), []), ("mylib/helper.c", HELPER, ["-g"])])
    cov = dwarfcover.read(lib)
    assert cov.described_bytes < 0.01 * cov.code_bytes and cov.own_bytes == cov.described_bytes > 0
    assert cov.describes_code
    assert cov.describes(_vaddr(lib, "helper")) and not cov.describes(_vaddr(lib, "f17"))


@requires_gcc
def test_ranges_of_code_the_linker_dropped_describe_nothing(tmp_path):
    """A unit whose function was garbage-collected: its range points at no code of the file."""
    only_unused = "int unused_helper(int x) { return x - 7; }\n"
    lib = _build(tmp_path, [("src/a.c", _big_source(), ["-ffunction-sections"]),
                            ("mylib/gone.c", only_unused, ["-g", "-ffunction-sections"])],
                 extra=["-Wl,--gc-sections", "-Wl,--version-script=%s" % _exports(tmp_path, "f0")])
    cov = dwarfcover.read(lib)
    assert cov.units == 1 and cov.has_dwarf
    assert cov.described_bytes == 0
    assert not cov.describes_code


def _exports(tmp_path, *names):
    path = tmp_path / "exports.map"
    path.write_text("{ global: %s local: *; };\n" % " ".join(n + ";" for n in names))
    return str(path)


@requires_gcc
def test_debuglink_to_an_object_file_is_ignored(tmp_path):
    lib = _build(tmp_path, [("src/a.c", "int f(int x) { return x + 1; }\n", [])])
    (tmp_path / "crti.o").write_bytes(b"")
    subprocess.run(["objcopy", "--add-gnu-debuglink=crti.o", lib], cwd=tmp_path, check=True)
    cov = dwarfcover.read(lib)
    assert cov.debuglink == "crti.o" and not cov.debuglink_plausible
    assert "object file" in cov.debuglink_note
    assert cov.debug_file() is None  # crti.o lies next to it, yet gdb would not take it: neither do we
    assert wants_surrogate(lib)


@requires_gcc
def test_a_separate_debug_file_gives_lines_only_when_found(tmp_path):
    lib = _build(tmp_path, [("mylib/a.c", _big_source(), ["-g"])])
    subprocess.run(["objcopy", "--only-keep-debug", lib, "lib.so.debug"], cwd=tmp_path, check=True)
    subprocess.run(["objcopy", "--strip-debug", "--add-gnu-debuglink=lib.so.debug", lib], cwd=tmp_path, check=True)
    cov = dwarfcover.read(lib)
    assert not cov.has_dwarf and cov.debuglink == "lib.so.debug" and cov.debuglink_plausible
    assert cov.debug_file() == str(tmp_path / "lib.so.debug")
    debug = dwarfcover.read(cov.debug_file())
    assert debug.describes_code and debug.describes(_vaddr(lib, "f3"))  # code sections are NOBITS there
    assert dwarfcover.gdb_gives_lines(lib) and not wants_surrogate(lib)
    os.unlink(tmp_path / "lib.so.debug")
    assert not dwarfcover.gdb_gives_lines(lib) and wants_surrogate(lib)  # not found: only a note


@requires_gcc
def test_unreadable_dwarf_counts_as_describing_the_code(tmp_path):
    lib = _build(tmp_path, [("mylib/a.c", HELPER, ["-g"])])
    cov = dwarfcover.read(lib)
    assert cov.readable
    with open(lib, "r+b") as f:
        import mmap

        from tfnative.core.binary.elf import ElfFile
        with mmap.mmap(f.fileno(), 0) as mm:
            info = ElfFile(mm, lib).section(".debug_info")
            struct.pack_into("<I", mm, info.offset, 0xFFFFFFF0)  # a reserved unit length
    bad = dwarfcover.read(lib)
    assert not bad.readable and "reserved" in bad.why_unreadable
    assert bad.describes_code  # as before this module: gdb keeps the library


def test_parse_debuglink():
    assert dwarfcover.parse_debuglink(b"libfoo.so.debug\0" + b"\0" * 0 + b"\x01\x02\x03\x04") == (
        "libfoo.so.debug", True, "")
    name, ok, note = dwarfcover.parse_debuglink(b"crti.o\0\0" + b"abcd" + b"crtn.o\0\0" + b"efgh")
    assert name == "crti.o" and not ok and "object file" in note
    name, ok, note = dwarfcover.parse_debuglink(b"a.debug\0" + b"abcd" + b"b.debug\0" + b"efgh")
    assert not ok and "more than one" in note
    assert dwarfcover.parse_debuglink(b"\0\0\0\0abcd")[1] is False
    assert dwarfcover.parse_debuglink(b"../x.debug\0\0abcd")[1] is False


def test_runtime_units_by_their_source_directory():
    assert dwarfcover.is_runtime_unit("/dt9-src/libstdc++-v3/src/nonshared11/cxx11-locale-inst.cc")
    assert dwarfcover.is_runtime_unit("/dt9-src/libgcc/config/i386/cpuinfo.c")
    assert not dwarfcover.is_runtime_unit("tensorflow/core/kernels/matmul_op.cc")
    assert not dwarfcover.is_runtime_unit("libgcc2.c")  # a file name alone says nothing
    assert not dwarfcover.is_runtime_unit(None)


def _tf_libraries():
    """libtensorflow_cc.so.2 of every TensorFlow install this machine has (the cache's venvs, this venv)."""
    roots = glob.glob(os.path.expanduser("~/.cache/tfnative/venvs/*/lib/python3.*/site-packages/tensorflow"))
    try:
        import importlib.util

        spec = importlib.util.find_spec("tensorflow")
        if spec and spec.submodule_search_locations:
            roots += list(spec.submodule_search_locations)
    except Exception:
        pass
    return sorted({os.path.realpath(os.path.join(r, "libtensorflow_cc.so.2")) for r in roots
                   if os.path.exists(os.path.join(r, "libtensorflow_cc.so.2"))})


@pytest.mark.parametrize("lib", _tf_libraries() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no TensorFlow install on this machine"))])
def test_tensorflow_wheels_have_no_dwarf_of_their_own(lib):
    """Every wheel: no DWARF for TensorFlow's code, whatever units of the C++ runtime it carries (2.16-2.20)."""
    cov = dwarfcover.cover(lib)
    assert cov.readable and not cov.describes_code
    assert cov.runtime_units == cov.units  # 22-30 units in 2.16-2.20, none in 2.21
    assert cov.described_bytes < 0.001 * cov.code_bytes
    if cov.debuglink is not None:
        assert not cov.debuglink_plausible  # crti.o
    assert wants_surrogate(lib)


def test_pyenv_libpython_describes_its_code():
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-3].*/lib/libpython3.*.so.1.0")))
    if not found:
        pytest.skip("no pyenv libpython here")
    for lib in found:
        cov = dwarfcover.cover(lib)
        assert cov.describes_code and cov.share > 0.9, (lib, cov.summary())
        assert cov.describes(_vaddr(lib, "PyEval_EvalCode"))
