"""The presets proved on a real Bazel build of a TensorFlow custom op, read back by doctor and gdb.

One Bazel server and output base (under a pytest tmp dir) build tests/bazel_op once
per preset (bench/build_presets.py's builder); then ``tfnative doctor`` checks what
each ``.so`` carries and ``tfnative attach --break FILE:LINE`` stops in the kernel's
``Compute`` with file, line and source, the calling Python line below it.  No mocks.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from ..utils import ROOT, line_of, requires_gdb, requires_tf, run_tfnative

pytestmark = [
    pytest.mark.bazel,
    requires_tf,
    requires_gdb,
    pytest.mark.skipif(shutil.which("bazel") is None, reason="bazel is not on PATH (apt-get install bazel-bootstrap)"),
]

OP = os.path.join(ROOT, "tests", "bazel_op")
KERNEL = os.path.join(OP, "ops", "zero_out_kernel.cc")
KERNEL_LINE = line_of(KERNEL, "tfn: first line of the kernel's work")
PY_LINE = line_of(os.path.join(OP, "use_op.py"), "tfn: the Python line that calls the op")
BOTH = ["ops/checksum.cc", "ops/zero_out_kernel.cc"]
FULL = ["tfn_symbols", "tfn_dbg", "tfn_index", "tfn_compressed", "tfn_dwarf64"]


def _load_bench():
    spec = importlib.util.spec_from_file_location("tfn_build_presets", os.path.join(ROOT, "bench", "build_presets.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    bench = _load_bench()
    builder = bench.OpBuilder(str(tmp_path_factory.mktemp("bazel_op")))
    try:
        builder.build_all()
        yield builder
    finally:
        builder.close()  # bazel shutdown + remove the output base: nothing left behind


def doctor(path, *source_dirs):
    args = ["doctor", "--json", path]
    for d in source_dirs:
        args += ["--source-dir", d]
    r = run_tfnative(args, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)[0]


# ------------------------------------------------------------------ what the builds carry


def test_plain_opt_has_symbols_but_no_dwarf(built):
    d = doctor(built.built["plain -c opt"].so)
    assert d["symtab"] and d["dwarf_units"] == 0 and d["dwarf_files"] == []
    assert d["can_break_functions"] and not d["can_see_lines"]
    assert "break on any function" in d["verdict"] and "tfn_lines" in d["verdict"]


@pytest.mark.parametrize("label", FULL)
def test_full_debug_info_presets(built, label):
    d = doctor(built.built[label].so)
    assert d["symtab"] and d["build_id"]
    assert d["dwarf_units"] == 2 and sorted(d["dwarf_files"]) == BOTH
    assert d["can_see_lines"] and d["can_see_locals"] and d["locals_units"] == 2
    assert d["index"] == (".gdb_index" if label == "tfn_index" else None)
    assert d["compressed"] == ("zlib" if label == "tfn_compressed" else None)
    assert d["dwarf64"] is (label == "tfn_dwarf64")
    assert "see locals" in d["verdict"]


def test_index_and_compression_change_the_file(built):
    sym, idx, comp = (built.built[k] for k in ("tfn_symbols", "tfn_index", "tfn_compressed"))
    assert idx.size > sym.size  # the .gdb_index
    assert comp.size < sym.size / 2  # zlib on the DWARF


def test_lines_preset_has_lines_without_locals(built):
    d = doctor(built.built["tfn_lines"].so)
    assert d["dwarf_units"] == 2 and sorted(d["dwarf_files"]) == BOTH
    assert d["can_see_lines"] and not d["can_see_locals"] and d["locals_units"] == 0
    assert d["next_preset"] == "tfn_targeted"
    assert built.built["tfn_lines"].size < built.built["tfn_symbols"].size / 10


def test_targeted_preset_gives_dwarf_to_the_chosen_file_only(built):
    assert "--per_file_copt=zero_out_kernel@-g" in built.targeted_snippet
    assert "selects 1 file(s): ops/zero_out_kernel.cc" in built.targeted_snippet
    d = doctor(built.built["tfn_targeted"].so)
    assert d["dwarf_files"] == ["ops/zero_out_kernel.cc"] and d["dwarf_units"] == 1
    assert d["can_see_locals"] and d["symtab"]


def test_split_preset_keeps_dwarf_in_dwo_files(built):
    b = built.built["tfn_split"]
    alone = doctor(b.so)  # copied out of the tree: /proc/self/cwd/bazel-out/... is not found
    assert alone["split_units"] == 2
    assert sorted(os.path.basename(f) for f in alone["dwarf_files"]) == ["checksum.pic.dwo", "zero_out_kernel.pic.dwo"]
    assert len(alone["dwo_missing"]) == 2 and alone["dwo_found"] == 0
    assert not alone["can_see_lines"] and alone["next_preset"] == "tfn_split"
    found = doctor(b.so, built.workspace)  # the workspace maps /proc/self/cwd to its execroot
    assert found["dwo_found"] == 2 and found["dwo_missing"] == [] and found["can_see_locals"]
    assert sorted(found["dwarf_files"]) == BOTH  # names read from the .dwo files
    with_dwp = doctor(b.dwp)
    assert with_dwp["dwp"] and with_dwp["can_see_locals"]
    assert b.size < built.built["tfn_symbols"].size / 10


def test_gdb_finds_split_dwarf_and_sources_through_bazelpaths(built):
    """The pure functions of tfnative.toolchain.bazelpaths, given to a real gdb on the split build."""
    from tfnative.toolchain import bazelpaths

    cwd = bazelpaths.gdb_cwd([built.workspace])
    assert cwd and os.path.isdir(os.path.join(cwd, "bazel-out"))
    cmds = ["-iex", "set debuginfod enabled off", "-iex", "cd %s" % cwd]
    for c in bazelpaths.gdb_commands([built.workspace]):
        cmds += ["-iex", c]
    listing = "list zero_out_kernel.cc:%d,%d" % (KERNEL_LINE, KERNEL_LINE)
    r = subprocess.run(["gdb", "-nx", "-batch", *cmds, "-ex", listing,
                        "-ex", "info source", "-ex", "info scope zero_out_kernel.cc:%d" % KERNEL_LINE,
                        built.built["tfn_split"].so], capture_output=True, text=True, timeout=60, cwd="/")
    assert "Could not find DWO" not in r.stdout + r.stderr, r.stderr
    assert "tfn: first line of the kernel's work" in r.stdout
    assert "Located in %s" % os.path.join(os.path.realpath(built.workspace), "ops", "zero_out_kernel.cc") in r.stdout
    assert "Symbol context" in r.stdout or "Symbol this" in r.stdout  # locals, read from the .dwo


def test_substitute_path_alone_resolves_sources(built):
    """Without --source-dir directories, /proc/self/cwd -> workspace is what finds the file."""
    from tfnative.toolchain import bazelpaths

    cmds = ["-iex", "set debuginfod enabled off"]
    for c in bazelpaths.gdb_commands([built.workspace]):
        cmds += ["-iex", c]
    listing = "list zero_out_kernel.cc:%d,%d" % (KERNEL_LINE, KERNEL_LINE)
    so = built.built["tfn_symbols"].so
    r = subprocess.run(["gdb", "-nx", "-batch", *cmds, "-ex", listing, "-ex", "info source", so],
                       capture_output=True, text=True, timeout=60, cwd="/")
    assert "tfn: first line of the kernel's work" in r.stdout, r.stdout + r.stderr
    assert "Located in %s" % os.path.join(built.workspace, "ops", "zero_out_kernel.cc") in r.stdout


# ------------------------------------------------------------------ attach on each build

ATTACH = {  # label -> the .so to load, the breakpoint
    "plain -c opt": ("so", "tfn_op::ZeroOutOp::Compute"),
    "tfn_symbols": ("so", None),
    "tfn_lines": ("so", None),
    "tfn_targeted": ("so", None),
    "tfn_dbg": ("so", None),
    "tfn_index": ("so", None),
    "tfn_compressed": ("so", None),
    "tfn_dwarf64": ("so", None),
    # gdb finds a .dwo only at /proc/self/cwd/bazel-out/...: run it in the workspace (bazelpaths.gdb_cwd)
    "tfn_split": ("cwd", None),
}


@pytest.fixture(scope="module")
def attached(built, tmp_path_factory):
    """Run every attach (two at a time: gdb spends ~20 s reading libtensorflow_cc's symbols)."""
    out_dir = tmp_path_factory.mktemp("attach")
    script = os.path.join(built.workspace, "use_op.py")

    def one(label):
        which, brk = ATTACH[label]
        b = built.built[label]
        out = os.path.join(str(out_dir), label.replace(" ", "_") + ".json")
        r = run_tfnative(["attach", "--break", brk or "zero_out_kernel.cc:%d" % KERNEL_LINE,
                          "--source-dir", built.workspace, "--json", out, script, b.so], timeout=300,
                         cwd=built.workspace if which == "cwd" else ROOT)
        doc = json.load(open(out)) if os.path.exists(out) else None
        return r, doc

    def merged(doc):
        try:
            return doc["events"][0]["threads"][0]["merge"] == "ok"
        except (TypeError, KeyError, IndexError):
            return False

    def one_with_retry(label):
        # Known flake outside the presets (reported): under load the capture sometimes fails to
        # match the stopped thread to its Python thread state ("merge": "native", no Python frames).
        r, doc = one(label)
        if r.returncode == 0 and not merged(doc):
            r, doc = one(label)
        return label, r, doc

    with ThreadPoolExecutor(max_workers=2) as pool:
        return {label: (r, doc) for label, r, doc in pool.map(one_with_retry, list(ATTACH))}


def _kernel_and_caller(r, doc):
    assert r.returncode == 0, r.stderr[-3000:]
    assert "zeroed: [5, 0, 0, 0, 0]" in r.stdout
    assert doc["events"], r.stderr[-3000:]
    frames = doc["events"][0]["threads"][0]["frames"]
    top = frames[0]
    assert top["kind"] == "native" and "ZeroOutOp::Compute" in top["function"] and top["library"] == "zero_out.so"
    callers = [f for f in frames if f["kind"] == "python" and f.get("user")]
    assert callers, frames
    assert (os.path.basename(callers[0]["file"]), callers[0]["function"], callers[0]["line"]) == \
        ("use_op.py", "run", PY_LINE)
    assert frames.index(top) < frames.index(callers[0])
    return top


@pytest.mark.parametrize("label", [k for k in ATTACH if k != "plain -c opt"])
def test_attach_stops_in_the_kernel_source(attached, built, label):
    r, doc = attached[label]
    top = _kernel_and_caller(r, doc)
    assert top["line"] == KERNEL_LINE, top
    assert top["file"] and top["file"].endswith("ops/zero_out_kernel.cc"), top
    assert os.path.realpath(top["file"]).startswith(os.path.realpath(built.workspace)), top
    text = top.get("source")
    if text is None:  # not in the report yet: read it where gdb found it
        with open(top["file"]) as f:
            text = f.read().splitlines()[top["line"] - 1]
    assert "tfn: first line of the kernel's work" in text
    assert "zero_out_kernel.cc:%d" % KERNEL_LINE in r.stderr


def test_attach_on_plain_build_breaks_on_the_function_only(attached):
    r, doc = attached["plain -c opt"]
    top = _kernel_and_caller(r, doc)
    assert top["file"] is None and top["line"] is None  # .symtab names, no DWARF
