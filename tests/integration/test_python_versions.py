"""Mixed stacks on every supported CPython, with and without debug info."""

import os
import subprocess

import pytest

from ..conftest import (
    ROOT,
    frames_of,
    line_of,
    load_json,
    pyenv_pythons,
    python_frames,
    requires_gdb,
    run_tfnative,
    script,
)

pytestmark = requires_gdb

STRIPPED = "/usr/bin/python3.11"


def _expected(path):
    return [
        ("leaf", "nested_uname.py", line_of(path, "os.uname()")),
        ("middle", "nested_uname.py", line_of(path, "return leaf()")),
        ("run", "nested_uname.py", line_of(path, "return middle()")),
        ("<module>", "nested_uname.py", line_of(path, "Runner().run()")),
    ]


def _check(python, tmp_path, qualified):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--python", python, "--break", "uname", "--json", str(out), script("nested_uname.py")])
    assert r.returncode == 0, r.stderr
    doc = load_json(out)
    frames = frames_of(doc)
    assert doc["events"][0]["threads"][0]["merge"] == "ok"
    expected = _expected(script("nested_uname.py"))
    if qualified:  # co_qualname exists from 3.11 on
        expected[2] = ("Runner.run",) + expected[2][1:]
    assert python_frames(frames) == expected
    assert doc["argv"][0] == python
    return doc


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13"])
def test_pyenv_versions(version, tmp_path):
    python = pyenv_pythons().get(version)
    if python is None:
        pytest.skip("no pyenv CPython %s on this machine" % version)
    doc = _check(python, tmp_path, qualified=version != "3.10")
    assert doc["events"][0]["python"] == version


@pytest.mark.skipif(not os.path.exists(STRIPPED), reason="no Debian python3.11 on this machine")
def test_stripped_python_without_debug_info(tmp_path):
    sections = subprocess.run(["readelf", "-S", "-W", STRIPPED], capture_output=True, text=True).stdout
    if ".debug_info" in sections or ".symtab" in sections:
        pytest.skip("%s carries symbols here; this test needs a stripped interpreter" % STRIPPED)
    doc = _check(STRIPPED, tmp_path, qualified=True)
    frames = frames_of(doc)
    # native frames of the stripped binary still appear (unnamed), with their library
    assert any(f["kind"] == "native" and f["library"] == "python3.11" for f in frames)


def test_sourced_into_users_own_gdb(tmp_path):
    """gdb_scripts/tf-bt.py works in a plain gdb session: tf-bt prints the same stack."""
    python = pyenv_pythons().get("3.12") or STRIPPED
    gdbscript = os.path.join(ROOT, "gdb_scripts", "tf-bt.py")
    r = subprocess.run(
        ["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled off", "-ex", "source " + gdbscript,
         "-ex", "set breakpoint pending on", "-ex", "break uname", "-ex", "run", "-ex", "tf-bt",
         "--args", python, script("nested_uname.py")],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    lines = [ln for ln in r.stdout.splitlines() if "[py]" in ln]
    path = script("nested_uname.py")
    assert lines[0].endswith("leaf at %s:%d  <-- your code" % (path, line_of(path, "os.uname()"))), r.stdout
    assert "Runner.run at" in lines[2]
    assert "<module> at" in lines[3]


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13", "stripped"])
def test_function_context_local_read_from_memory(version, tmp_path):
    """The str local ``op_name`` of TF's ``quick_execute`` is read from memory on every version.

    A stand-in ``tensorflow/python/eager/execute.py`` (same function, same local) keeps
    this test independent of which interpreters have TensorFlow installed.
    """
    python = STRIPPED if version == "stripped" else pyenv_pythons().get(version)
    if python is None or not os.path.exists(python):
        pytest.skip("no CPython %s here" % version)
    pkg = tmp_path / "tensorflow" / "python" / "eager"
    pkg.mkdir(parents=True)
    (pkg / "execute.py").write_text(
        "import os\n"
        "def quick_execute(op_name, num_outputs, inputs, attrs, ctx, name=None):\n"
        "    cell = [op_name]\n"
        "    def inner():\n"
        "        return cell\n"
        "    os.uname()\n"
    )
    main = tmp_path / "main.py"
    main.write_text("import sys\nsys.path.insert(0, sys.argv[1])\nfrom tensorflow.python.eager import execute\n"
                    "execute.quick_execute('__inference_train_step_1234', 1, [], (), None)\n")
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--python", python, "--break", "uname", "--json", str(out), str(main), str(tmp_path)])
    assert r.returncode == 0, r.stderr
    thread = load_json(out)["events"][0]["threads"][0]
    assert thread["tf_function"] == {"name": "__inference_train_step_1234", "python_function": "train_step"}
    assert "in tf.function train_step (__inference_train_step_1234)" in r.stderr


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13", "stripped"])
def test_autograph_source_map_read_from_memory(version, tmp_path):
    """dicts, namedtuples and ints read from memory on every version: a stand-in for AutoGraph's
    ``converted_call`` runs a function from an ``__autograph_generated_file*.py`` whose
    ``ag_source_map`` sends its line back to the user's file."""
    python = STRIPPED if version == "stripped" else pyenv_pythons().get(version)
    if python is None or not os.path.exists(python):
        pytest.skip("no CPython %s here" % version)
    api = tmp_path / "tensorflow" / "python" / "autograph" / "impl"
    api.mkdir(parents=True)
    (api / "api.py").write_text(
        "def converted_call(f, args):\n"
        "    converted_f = f\n"
        "    return converted_f(*args)\n"
    )
    gen = tmp_path / "__autograph_generated_filetest1.py"
    gen.write_text("import os\n\ndef tf__model(x):\n    return os.uname()\n")
    main = tmp_path / "main.py"
    main.write_text(
        "import collections, importlib.util, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tensorflow.python.autograph.impl import api\n"
        "LineLocation = collections.namedtuple('LineLocation', ('filename', 'lineno'))\n"
        "Location = collections.namedtuple('Location', ('filename', 'lineno', 'col_offset'))\n"
        "OriginInfo = collections.namedtuple('OriginInfo', ('loc', 'function_name', 'source_code_line', 'comment'))\n"
        "spec = importlib.util.spec_from_file_location('gen', sys.argv[2])\n"
        "gen = importlib.util.module_from_spec(spec); spec.loader.exec_module(gen)\n"
        "f = gen.tf__model\n"
        "f.ag_module = gen\n"
        "f.ag_source_map = {LineLocation(sys.argv[2], n): OriginInfo(Location('/home/me/model.py', 100 + n, 4),"
        " 'model', 'x', None) for n in range(1, 5)}\n"
        "api.converted_call(f, (1,))\n"
    )
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--python", python, "--break", "uname", "--json", str(out), str(main),
                      str(tmp_path), str(gen)])
    assert r.returncode == 0, r.stderr
    frames = load_json(out)["events"][0]["threads"][0]["frames"]
    model = [f for f in frames if f.get("converted")]
    assert len(model) == 1
    assert (model[0]["function"], model[0]["file"], model[0]["line"]) == ("model", "/home/me/model.py", 104)
    assert model[0]["converted"]["file"] == str(gen) and model[0]["converted"]["line"] == 4
