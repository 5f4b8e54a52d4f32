"""``tfnative attach -m MODULE ARGS`` runs the module exactly as ``python -m`` does (field issue: "-m" refused)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ..utils import TFNATIVE, load_json, requires_gdb

pytestmark = requires_gdb

PROBE = """import json, os, sys
print("PROBE " + json.dumps([sys.argv, sys.path[0], __name__, __spec__.name, __file__]), flush=True)
os.uname()
"""


@pytest.fixture
def package(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "probe.py").write_text(PROBE)
    return tmp_path


def _probe(out: str) -> list:
    return json.loads(next(ln for ln in out.splitlines() if ln.startswith("PROBE "))[len("PROBE "):])


def test_module_sees_what_python_m_gives_it(package):
    args = ["a", "-m", "b", "--max-hits", "7"]  # after -m MODULE everything is the module's, as with python
    plain = subprocess.run([sys.executable, "-m", "pkg.probe", *args], cwd=package, capture_output=True, text=True,
                           timeout=60)
    out = package / "s.json"
    ours = subprocess.run(TFNATIVE + ["attach", "--break", "uname", "--json", str(out), "-m", "pkg.probe", *args],
                          cwd=package, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert plain.returncode == ours.returncode == 0, ours.stderr
    assert _probe(ours.stdout) == _probe(plain.stdout)
    assert _probe(ours.stdout)[2:4] == ["__main__", "pkg.probe"]
    doc = load_json(out)
    assert doc["argv"][1:] == ["-m", "pkg.probe", *args]
    py = [(f["function"], os.path.basename(f["file"])) for f in doc["events"][0]["threads"][0]["frames"]
          if f["kind"] == "python"]
    assert py[0] == ("<module>", "probe.py")
    assert "nearest user frame <module> at %s:3" % (package / "pkg" / "probe.py") in ours.stderr


def test_dash_m_after_the_script_is_the_scripts(package):
    script = package / "show.py"
    script.write_text("import sys; print(sys.argv[1:])\n")
    r = subprocess.run(TFNATIVE + ["attach", str(script), "-m", "x"], cwd=package, capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['-m', 'x']"


def test_missing_module_fails_as_python_does(package):
    r = subprocess.run(TFNATIVE + ["attach", "-m", "no_such_module_here"], cwd=package, capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    plain = subprocess.run([sys.executable, "-m", "no_such_module_here"], cwd=package, capture_output=True,
                           text=True, timeout=60)
    assert r.returncode == plain.returncode == 1
    assert "No module named no_such_module_here" in r.stderr
    assert "Traceback" not in r.stderr
