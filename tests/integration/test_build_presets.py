"""tfnative presets / bazelrc and tfnative.toolchain.bazelpaths: no Bazel needed."""

import json
import os

import pytest

from tfnative.toolchain import bazelpaths, presets

from ..utils import ROOT, run_tfnative

OP = os.path.join(ROOT, "tests", "bazel_op")
NAMES = ["tfn_symbols", "tfn_lines", "tfn_targeted", "tfn_split", "tfn_dbg", "tfn_index", "tfn_compressed",
         "tfn_dwarf64"]


def test_presets_json_table():
    r = run_tfnative(["presets", "--json"], timeout=60)
    assert r.returncode == 0, r.stderr
    table = json.loads(r.stdout)
    assert [p["name"] for p in table] == NAMES
    for p in table:
        assert {"name", "gives", "costs", "flags"} <= set(p) and p["gives"] and p["costs"] and p["flags"]
    by = {p["name"]: p for p in table}
    assert by["tfn_symbols"]["flags"] == ["-c opt", "--copt=-g", "--strip=never"]
    assert "--copt=-g1" in by["tfn_lines"]["flags"]
    assert {"--fission=yes", "--features=per_object_debug_info"} <= set(by["tfn_split"]["flags"])
    assert "--linkopt=-Wl,--gdb-index" in by["tfn_index"]["flags"]
    assert "-c dbg" in by["tfn_dbg"]["flags"]


def test_presets_text_states_the_order_rule():
    r = run_tfnative(["presets"], timeout=60)
    assert r.returncode == 0 and "LAST" in r.stdout and "tfn_targeted  [debug-info]" in r.stdout


def test_shipped_bazelrc_is_the_generated_one():
    with open(os.path.join(ROOT, "build", "tfnative.bazelrc")) as f:
        shipped = f.read()
    assert shipped == presets.render_bazelrc(), "regenerate: tfnative bazelrc > build/tfnative.bazelrc"
    r = run_tfnative(["bazelrc"], timeout=60)
    assert r.stdout == shipped
    for p in presets.PRESETS:  # every flag line, each preset with its gives/costs comment
        assert "# %s (%s)" % (p.name, p.kind) in shipped
        for flag in p.flags:
            assert "build:%s %s\n" % (p.name, flag) in shipped
    assert "try-import %workspace%/tfnative.bazelrc" in shipped


def test_targeted_snippet_checks_regexes_against_the_workspace():
    r = run_tfnative(["bazelrc", "tfn_targeted", "--files", "zero_out_kernel", "--files", "^ops/check",
                      "--workspace", OP], timeout=60)
    assert r.returncode == 0, r.stderr
    assert "build:tfn_targeted --per_file_copt=zero_out_kernel,^ops/check@-g\n" in r.stdout
    assert "build:tfn_targeted -c opt\n" in r.stdout
    assert "'zero_out_kernel' (unanchored) selects 1 file(s): ops/zero_out_kernel.cc" in r.stdout
    assert "anchored" in r.stdout and "LAST" in r.stdout
    none = run_tfnative(["bazelrc", "tfn_targeted", "--files", "no_such_file", "--workspace", OP], timeout=60)
    assert none.returncode == 0 and "matches none" in none.stdout


@pytest.mark.parametrize("regex,words", [
    ("*.cc", ["not a valid regex", "glob"]),
    ("a,b", ["','"]),
    ("x@y", ["'@'"]),
    ("-foo", ["starts with '-'"]),
    ("$(" * 3000, ["nest 3000 deep", "(6000 characters)"]),  # found by tests/fuzz: was RecursionError, exit 70
    ("a{99999999999999}", ["repetition number is too large"]),  # was OverflowError
    ("a" * 20000, ["at most 10000"]),
])
def test_bad_regexes_are_one_line_errors(regex, words):
    r = run_tfnative(["bazelrc", "tfn_targeted", "--files", regex], timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("tfnative: error: --files") and len(r.stderr.strip().splitlines()) == 1
    for w in words:
        assert w in r.stderr


def test_other_snippet_errors():
    r = run_tfnative(["bazelrc", "tfn_nope"], timeout=60)
    assert r.returncode == 2 and "unknown preset" in r.stderr
    r = run_tfnative(["bazelrc", "tfn_lines", "--files", "x"], timeout=60)
    assert r.returncode == 2 and "tfn_targeted only" in r.stderr
    r = run_tfnative(["bazelrc", "tfn_targeted"], timeout=60)
    assert r.returncode == 2 and "at least one --files" in r.stderr
    r = run_tfnative(["bazelrc", "index"], timeout=60)  # the tfn_ prefix is optional
    assert r.returncode == 0 and "build:tfn_index --linkopt=-Wl,--gdb-index" in r.stdout


def _fake_bazel_tree(tmp_path):
    """A workspace and the output base Bazel makes for it (directories and links only)."""
    ob = tmp_path / "root" / "0123abcd"
    execroot = ob / "execroot" / "my_ws"
    (execroot / "bazel-out" / "k8-opt" / "bin").mkdir(parents=True)
    (ob / "external" / "com_google_absl").mkdir(parents=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "WORKSPACE").write_text("")
    os.symlink(execroot / "bazel-out", ws / "bazel-out")
    os.symlink(execroot, ws / "bazel-ws")
    return ws, execroot, ob


def test_substitutions_for_a_workspace(tmp_path):
    ws, execroot, ob = _fake_bazel_tree(tmp_path)
    subs = bazelpaths.substitutions([str(ws)])
    assert subs == [
        ("/proc/self/cwd/external", str(ob / "external")),
        ("external", str(ob / "external")),
        ("/proc/self/cwd/bazel-out", str(execroot / "bazel-out")),
        ("bazel-out", str(execroot / "bazel-out")),
        ("/proc/self/cwd", str(ws)),
        (str(execroot), str(ws)),
    ]
    assert bazelpaths.gdb_cwd([str(ws)]) == str(execroot)
    assert bazelpaths.gdb_commands([str(ws)])[0] == "set substitute-path /proc/self/cwd/external %s" % (
        ob / "external")


def test_substitutions_for_an_execroot_or_output_base_and_plain_dirs(tmp_path):
    ws, execroot, ob = _fake_bazel_tree(tmp_path)
    from_execroot = dict(bazelpaths.substitutions([str(execroot)]))
    assert from_execroot["/proc/self/cwd"] == str(execroot)
    assert from_execroot["external"] == str(ob / "external")
    assert dict(bazelpaths.substitutions([str(ob)]))["/proc/self/cwd"] == str(execroot)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert bazelpaths.substitutions([str(plain), str(tmp_path / "missing")]) == []
    assert bazelpaths.gdb_cwd([str(plain)]) is None
    # the first workspace wins for a shared FROM
    both = bazelpaths.substitutions([str(ws), str(execroot)])
    assert [f for f, _ in both].count("/proc/self/cwd") == 1 and dict(both)["/proc/self/cwd"] == str(ws)
