"""tfnative core where the core's files are not where the process saw them, or are another build.

One real core, made once: a Python process that has loaded an extension from its site-packages (psutil)
segfaults in ctypes.  Its files are then copied to another layout under tmp_path, as on another machine:
the system libraries under a sysroot, the interpreter under another prefix, the site-packages under
another venv.  And a library without a build-id, rebuilt after the crash, is named, never read.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig

import pytest

from ..utils import load_json, raise_core_limit, run_tfnative

PYVER = "python%d.%d" % sys.version_info[:2]
SITE_PART = "/lib/%s/site-packages/" % PYVER

APP = """import ctypes
import psutil  # an extension from site-packages: mapped by the process


def poke():
    ctypes.string_at(0)


poke()
"""


@pytest.fixture(scope="module")
def venv_core(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("venvcore")
    (tmp / "app.py").write_text(APP)
    proc = subprocess.run([sys.executable, str(tmp / "app.py")], cwd=tmp, preexec_fn=raise_core_limit,
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    return str(tmp / "core")


def mapped_files(core: str) -> list:
    from tfnative.corefile.reader import Core

    with Core(core) as c:
        return list(dict.fromkeys(m.path for m in c.notes.files if os.path.isfile(m.path)))


def frames(doc: dict) -> list:
    return [(f["kind"], f["function"], f.get("library")) for f in doc["events"][0]["threads"][0]["frames"]]


def core_json(tmp_path, *args: str, name: str = "c") -> dict:
    out = tmp_path / ("%s.json" % name)
    res = run_tfnative(["core", *args, "--json", str(out)])
    assert res.returncode == 0, res.stderr
    return load_json(out)


def test_files_found_under_sysroot_moved_prefix_and_venv(tmp_path, venv_core):
    """Nothing is where the process saw it: system libraries under --sysroot, the interpreter under
    another prefix (given as EXECUTABLE, a venv's bin/python), site-packages under that venv."""
    base = os.path.realpath(sys.base_prefix)
    prefix, venv, sysroot = tmp_path / "elsewhere" / "py", tmp_path / "elsewhere" / "venv", tmp_path / "sysroot"
    placed = {}
    for path in mapped_files(venv_core):
        if path.startswith(base + "/"):
            dest = str(prefix) + path[len(base):]
        elif SITE_PART in path:
            dest = str(venv) + SITE_PART + path.split(SITE_PART, 1)[1]
        else:
            dest = str(sysroot) + path
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(path, dest)
        placed[path] = dest
    assert any(SITE_PART in p for p in placed), placed  # the test needs a site-packages extension
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = %s/bin\n" % prefix)
    exe = os.path.realpath(sysconfig.get_config_var("BINDIR") + "/" + os.path.basename(os.path.realpath(
        sys.executable)))
    os.symlink(str(prefix) + exe[len(base):], venv / "bin" / "python")
    here = core_json(tmp_path, venv_core, name="here")
    moved = core_json(tmp_path, venv_core, str(venv / "bin" / "python"), "--sysroot", str(sysroot), name="moved")
    assert not moved["events"][0].get("warnings"), moved["events"][0].get("warnings")
    assert frames(moved) == frames(here)
    assert ("python", "poke", None) in frames(moved) and "??" not in [f[1] for f in frames(moved)[:2]]
    # Without the venv, its site-packages extension is missing: named, and the rest still read
    shutil.rmtree(venv / "lib")
    partial = core_json(tmp_path, venv_core, str(venv / "bin" / "python"), "--sysroot", str(sysroot),
                        name="partial")
    warnings = partial["events"][0]["warnings"]
    assert any("_psutil" in w and "missing on this host (under %s)" % sysroot in w for w in warnings), warnings
    assert frames(partial) == frames(here)


NOID_C = """
int crash_here(int *p) { return *p + %d; }
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_rebuilt_library_without_build_id_is_named_and_not_read(tmp_path):
    """A library without a build-id (as many wheels' .so) changed after the crash: the core's copy of its
    headers tells, and its frame is shown by address and library only."""
    lib = tmp_path / "libnoid.so"

    def build(extra: int) -> None:
        (tmp_path / "noid.c").write_text(NOID_C % extra + "int pad[%d] = {1};\n" % (1 + extra * 4096))
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,--build-id=none", "-o", str(lib),
                        str(tmp_path / "noid.c")], check=True, timeout=120)

    build(0)
    app = tmp_path / "crash.py"
    app.write_text("import ctypes\nctypes.CDLL(%r).crash_here(None)\n" % str(lib))
    proc = subprocess.run([sys.executable, str(app)], cwd=tmp_path, preexec_fn=raise_core_limit,
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    core = str(tmp_path / "core")
    same = core_json(tmp_path, core, name="same")
    assert frames(same)[0] == ("native", "crash_here", "libnoid.so")
    assert not same["events"][0].get("warnings")
    build(1)  # another build at the same path, bigger data: other program headers
    other = core_json(tmp_path, core, name="other")
    warnings = other["events"][0]["warnings"]
    assert "%s: no build-id, and its ELF and program headers differ from the core's copy: not the file the " \
           "process ran; its frames are shown by address only" % lib in warnings
    assert frames(other)[0] == ("native", "??", "libnoid.so")
    assert "crash_here" not in [f[1] for f in frames(other)]


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("gdb") is None, reason="needs gcc and gdb")
def test_library_with_dwarf_is_read_through_gdb_with_its_source_line(tmp_path):
    """A crash in a library built with -g: tfnative core hands the core to gdb by itself (its own unwinder
    steps aside for DWARF), and the frame has its file:line; the Python frames are the same."""
    src = tmp_path / "dw.c"
    src.write_text("int crash_here(int *p) {\n  int x = 3;\n  return *p + x;\n}\n")
    lib = tmp_path / "libdw.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O0", "-o", str(lib), str(src)], check=True, timeout=120)
    app = tmp_path / "crash.py"
    app.write_text("import ctypes\n\n\ndef call():\n    ctypes.CDLL(%r).crash_here(None)\n\n\ncall()\n" % str(lib))
    proc = subprocess.run([sys.executable, str(app)], cwd=tmp_path, preexec_fn=raise_core_limit,
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    out = tmp_path / "g.json"
    res = run_tfnative(["core", str(tmp_path / "core"), "--json", str(out)])
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith("tfnative: reading the core through gdb: %s has debug info" % lib)
    ev = load_json(out)["events"][0]
    assert ev["via"] == "gdb"
    top = ev["threads"][0]["frames"][0]
    assert (top["function"], top["file"], top["line"], top["library"]) == ("crash_here", str(src), 3, "libdw.so")
    assert [(f["function"], f["line"]) for f in ev["threads"][0]["frames"] if f["kind"] == "python"] == [
        ("call", 5), ("<module>", 8)]
    assert "return *p + x;" in res.stdout  # the source line, as stack --with-gdb shows it
