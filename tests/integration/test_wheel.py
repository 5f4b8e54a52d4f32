"""tfnative as users install it: the wheel (built from the sdist, as a release is) in a fresh virtual
environment, run from a directory outside the source tree.  A file the package forgets (the gdb scripts of
``tfnative_gdb``, ``tfnative/inject/sitecustomize.py``, a subpackage missing from pyproject's list) fails
here, where every other test would still find it in the checkout.

Only tfnative comes from the wheel: its dependencies (click, psutil, pygdbmi, zstandard, lz4, TensorFlow)
are the test environment's own, made importable by a ``.pth`` file that names their directories (installing
TensorFlow again would take minutes), and checked to be the only thing found there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile

import psutil
import pytest

from ..utils import has_tensorflow, make_core, script, started

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPS = ("click", "psutil", "pygdbmi", "zstandard", "lz4", "tensorflow")


def _build(dist: str) -> str:
    """The wheel of this checkout: ``python -m build`` (sdist, then the wheel from the sdist) where it is
    installed (the dev extra), else ``pip wheel``.  The wheel's path."""
    if importlib.util.find_spec("build") is not None:
        cmd = [sys.executable, "-m", "build", "--outdir", dist, ROOT]
    else:
        if os.environ.get("CI"):
            pytest.fail("CI: the 'build' package is missing (pip install -e '.[dev]')")
        cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, ROOT]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    wheels = [n for n in os.listdir(dist) if n.endswith(".whl")]
    assert len(wheels) == 1, os.listdir(dist)
    if importlib.util.find_spec("build") is not None:
        assert [n for n in os.listdir(dist) if n.endswith(".tar.gz")], os.listdir(dist)
    return os.path.join(dist, wheels[0])


def _dep_dirs() -> list:
    """The directories the test environment imports tfnative's dependencies from."""
    dirs = []
    for name in DEPS:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        d = os.path.dirname(os.path.dirname(spec.origin))
        if d not in dirs:
            dirs.append(d)
    return dirs


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(wheel, sdist): ``python -m build`` of this checkout, as a release is built (the sdist, then the wheel from
    the sdist)."""
    dist = str(tmp_path_factory.mktemp("dist"))
    wheel = _build(dist)
    sdists = [os.path.join(dist, n) for n in os.listdir(dist) if n.endswith(".tar.gz")]
    return wheel, (sdists[0] if sdists else None)


@pytest.fixture(scope="module")
def installed(tmp_path_factory, built):
    """(venv, work directory, environment): the wheel installed in a fresh venv; the work directory is
    outside the checkout and the environment has no PYTHONPATH."""
    base = tmp_path_factory.mktemp("wheel")
    venv, work = str(base / "venv"), str(base / "work")
    os.makedirs(work)
    wheel = built[0]
    # No PYTHONPATH from here on: with the checkout on it, pip would find tfnative "already installed".
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120, env=env)
    py = os.path.join(venv, "bin", "python")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index",
                        "--disable-pip-version-check", wheel], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, env=env).stdout.strip()
    # Plain directory lines: appended to sys.path after the venv's own site-packages, their own .pth files
    # (the test environment's editable tfnative) not run.
    with open(os.path.join(site, "zz_test_deps.pth"), "w") as f:
        f.write("\n".join(_dep_dirs()) + "\n")
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return venv, work, env


def _run(installed, args, timeout=300, **kw):
    venv, work, env = installed
    return subprocess.run([os.path.join(venv, "bin", "tfnative")] + args, cwd=work, env=env,
                          capture_output=True, text=True, timeout=timeout, **kw)


def test_tfnative_comes_from_the_wheel(installed):
    venv, work, env = installed
    r = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                        "import tfnative, tfnative_gdb, tfnative.cli, tfnative.snapshot.pipeline, "
                        "tfnative.corefile.reader, tfnative.gdb.control; "
                        "print(tfnative.__file__); print(tfnative_gdb.__file__)"],
                       cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    for path in r.stdout.split():
        assert path.startswith(os.path.realpath(venv) + os.sep) or path.startswith(venv + os.sep), path
        assert not path.startswith(ROOT + os.sep), path
    v = _run(installed, ["--version"])
    assert v.returncode == 0 and v.stdout.startswith("tfnative, version"), v.stderr


def _tracked(*dirs: str) -> list:
    """The files git tracks under ``dirs`` of the checkout (what a clone has), relative to the checkout."""
    r = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--", *dirs], capture_output=True, timeout=60)
    if r.returncode != 0:
        pytest.skip("not a git checkout: %s" % r.stderr.decode(errors="replace").strip())
    return sorted(n for n in r.stdout.decode().split("\0") if n)


def test_the_wheel_holds_every_module_and_data_file_of_the_tree(built):
    """Every file git tracks under tfnative/ and gdb_scripts/tfnative_gdb/ (modules, py.typed, the HTML page's
    template, inject/) is in the wheel, where Python imports it; the wheel holds nothing else but its metadata."""
    names = set(zipfile.ZipFile(built[0]).namelist())
    want = set()
    for rel in _tracked("tfnative", "gdb_scripts/tfnative_gdb"):
        want.add(rel[len("gdb_scripts/"):] if rel.startswith("gdb_scripts/") else rel)
    assert want, "no tracked file under tfnative/"
    for must in ("tfnative/watch/loop.py", "tfnative/inject/sitecustomize.py", "tfnative/py.typed",
                 "tfnative/output/flamegraph.html", "tfnative_gdb/gdbinit.py"):
        assert must in want, must
    assert sorted(want - names) == [], "tracked but not in the wheel"
    others = sorted(n for n in names - want if ".dist-info/" not in n)
    assert others == [], "in the wheel but not tracked"


def _members(wheel: str) -> dict:
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n) for n in z.namelist()}


def test_the_sdist_rebuilds_the_same_wheel(built, tmp_path):
    """The wheel built from the sdist (``python -m build``) is the wheel of the tree itself, member by member (a
    file the sdist forgets would be missing from the release's wheel alone)."""
    wheel, sdist = built
    if sdist is None:
        pytest.skip("no sdist: the 'build' package is missing")
    tree = tmp_path / "tree"
    for rel in _tracked("."):
        os.makedirs(tree / os.path.dirname(rel), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, rel), tree / rel)
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "direct"), str(tree)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    (direct,) = [str(tmp_path / "direct" / n) for n in os.listdir(tmp_path / "direct")]
    assert os.path.basename(direct) == os.path.basename(wheel)
    ours, theirs = _members(wheel), _members(direct)
    assert sorted(ours) == sorted(theirs)
    assert [n for n in ours if ours[n] != theirs[n]] == []


def test_one_version_in_the_metadata_the_command_and_the_documents(built, installed):
    """tfnative/__init__.py's version is the wheel's (its name and METADATA), what ``--version`` prints and what
    a document says it was written by."""
    import tfnative

    version = tfnative.__version__
    assert os.path.basename(built[0]).startswith("tfnative-%s-" % version)
    with zipfile.ZipFile(built[0]) as z:
        meta = z.read("tfnative-%s.dist-info/METADATA" % version).decode()
    assert "\nVersion: %s\n" % version in meta
    assert _run(installed, ["--version"]).stdout == "tfnative, version %s\n" % version
    assert _run(installed, ["-h"]).returncode == 0
    with _sleeper(installed[1]) as proc:
        r = _run(installed, ["stack", "--pid", str(proc.pid), "--json", "-"])
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert list(doc)[:2] == ["tfnative", "version"] and doc["version"] == version


def test_merge_of_stacks(installed):
    """``stack --json`` of two processes, then ``merge`` of the two documents: one tree, both processes."""
    venv, work, env = installed
    docs = []
    for i in range(2):
        os.makedirs(os.path.join(work, "m%d" % i), exist_ok=True)
    with _sleeper(os.path.join(work, "m0")) as a, _sleeper(os.path.join(work, "m1")) as b:
        for i, proc in enumerate((a, b)):
            path = os.path.join(work, "s%d.json" % i)
            r = _run(installed, ["stack", "--pid", str(proc.pid), "--json", path])
            assert r.returncode == 0, r.stderr[-3000:]
            docs.append(path)
    r = _run(installed, ["merge", *docs])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "wait_here" in r.stdout and r.stdout.startswith("2 processes"), r.stdout[-3000:]
    r = _run(installed, ["merge", "--json", "-", *docs])
    assert r.returncode == 0 and json.loads(r.stdout)["tfnative_merge"] == 1, r.stderr[-3000:]


def test_watch_reports_a_hang_and_kills_the_job(installed):
    """``watch --on-hang kill`` of a job that deadlocks: the report on stdout, exit 124, the job gone."""
    venv, work, env = installed
    shutil.copy(os.path.join(ROOT, "tests", "hangs", "rlock_order.py"), work)
    ready = os.path.join(work, "ready")
    r = _run(installed, ["watch", "--hang-after", "3", "--interval", "1", "--on-hang", "kill", "rlock_order.py",
                         ready], timeout=180)
    assert r.returncode == 124, (r.returncode, r.stderr[-3000:])
    assert "verdict: deadlock" in r.stdout, r.stdout[-3000:]
    job = int(open(ready).read())
    assert not psutil.pid_exists(job) or psutil.Process(job).status() == psutil.STATUS_ZOMBIE
    assert "Traceback" not in r.stderr


def test_report_of_a_core(installed, tmp_path):
    """``report --core``: the Markdown bug report of a crashed process, from the installed command."""
    core = _a_core(installed)
    out = os.path.join(installed[1], "report.md")
    r = _run(installed, ["report", "--core", core, "--output", out])
    assert r.returncode == 0, r.stderr[-3000:]
    text = open(out).read()
    assert "SIGSEGV" in text and "poke" in text, text[:3000]
    assert "Traceback" not in r.stderr


def test_doctor_and_doctor_system(installed):
    """``doctor``: the TensorFlow libraries of the interpreter and what debug info each carries; ``--system``:
    each check ok or what to do, exit 0 or 1 (one needs a fix), never a traceback."""
    if not has_tensorflow():
        pytest.skip("needs TensorFlow")
    venv, work, env = installed
    r = _run(installed, ["doctor", "--python", os.path.join(venv, "bin", "python")])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "libtensorflow_framework.so.2" in r.stdout, r.stdout[-3000:]
    r = _run(installed, ["doctor", "--system"])
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "gdb" in r.stdout and "ptrace" in r.stdout, r.stdout[-3000:]
    r = _run(installed, ["doctor", "--system", "--json"])
    checks = json.loads(r.stdout)
    assert checks and all({"topic", "status", "text"} <= set(c) for c in checks), checks
    assert (r.returncode == 1) == any(c.get("status") == "fix" for c in checks), (r.returncode, checks)


def test_shell_completion(installed):
    """click's completion, as docs/index.md's start-up line asks for it: the bash script, then completions."""
    venv, work, env = installed
    script_env = dict(env, _TFNATIVE_COMPLETE="bash_source")
    r = subprocess.run([os.path.join(venv, "bin", "tfnative")], cwd=work, env=script_env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "_tfnative_completion()" in r.stdout, r.stderr
    words = dict(env, _TFNATIVE_COMPLETE="bash_complete", COMP_WORDS="tfnative wa", COMP_CWORD="1")
    r = subprocess.run([os.path.join(venv, "bin", "tfnative")], cwd=work, env=words, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["plain,watch"], (r.stdout, r.stderr)


def test_bazelrc_and_presets(installed):
    r = _run(installed, ["bazelrc"])
    assert r.returncode == 0, r.stderr
    with open(os.path.join(ROOT, "build", "tfnative.bazelrc")) as f:
        assert r.stdout == f.read()
    r = _run(installed, ["presets"])
    assert r.returncode == 0 and "tfn_symbols" in r.stdout, r.stderr
    r = _run(installed, ["presets", "--json"])
    assert r.returncode == 0 and "tfn_symbols" in [p["name"] for p in json.loads(r.stdout)], r.stderr


def _sleeper(work):
    pidfile = os.path.join(work, "sleeper.pid")
    shutil.copy(script("sleeper.py"), work)
    return started([sys.executable, os.path.join(work, "sleeper.py"), pidfile], pidfile, cwd=work)


def test_stack_of_a_running_process(installed):
    with _sleeper(installed[1]) as proc:
        r = _run(installed, ["stack", "--pid", str(proc.pid)])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "wait_here" in r.stdout and "sleeper.py" in r.stdout, r.stdout[-3000:]


def _core_pattern_is_a_file() -> bool:
    try:
        with open("/proc/sys/kernel/core_pattern") as f:
            return not f.read().startswith("|")
    except OSError:
        return False


def _a_core(installed) -> str:
    """A core of tests/scripts/segv.py, made in a directory outside the checkout (once per module)."""
    work = os.path.join(installed[1], "core")
    if os.path.exists(os.path.join(work, "core")):
        return os.path.join(work, "core")
    if not _core_pattern_is_a_file():
        pytest.skip("cores go to a program (core_pattern starts with '|'): none is written here")
    os.makedirs(work, exist_ok=True)
    return make_core(work, "segv.py", timeout=60)


def test_core(installed):
    r = _run(installed, ["core", _a_core(installed)])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "poke" in r.stdout and "SIGSEGV" in r.stdout, r.stdout[-3000:]


def test_tf_bt_in_your_own_gdb(installed):
    """The page's recipe (docs/attach.md): source the installed gdbinit.py; tf-bt is there."""
    if shutil.which("gdb") is None:
        pytest.skip("no gdb")
    venv, work, env = installed
    init = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                           "import tfnative_gdb, os; print(os.path.dirname(tfnative_gdb.__file__) + '/gdbinit.py')"],
                          cwd=work, env=env, capture_output=True, text=True, check=True).stdout.strip()
    r = subprocess.run(["gdb", "-batch", "-nx", "-ex", "source " + init, "-ex", "help tf-bt"], cwd=work, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "tf-bt" in r.stdout and "Error" not in r.stderr, r.stdout + r.stderr


needs_tf_and_gdb = pytest.mark.skipif(not has_tensorflow() or shutil.which("gdb") is None,
                                      reason="needs TensorFlow and gdb")


@pytest.mark.tf
@needs_tf_and_gdb
def test_attach_the_example(installed):
    """The README's example, from the installed command: gdb loads the installed tfnative_gdb."""
    work = installed[1]
    shutil.copy(os.path.join(ROOT, "examples", "open_session.py"), work)
    r = _run(installed, ["attach", "--break", "TF_NewSession", "open_session.py"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "breakpoint TF_NewSession hit" in r.stderr, r.stderr[-3000:]
    assert "make_session at %s" % os.path.join(work, "open_session.py") in r.stderr, r.stderr[-3000:]
    assert "result: [[5.0]]" in r.stdout


@pytest.mark.tf
@needs_tf_and_gdb
def test_check_numerics_uses_the_installed_hook(installed):
    """--check-numerics puts tfnative/inject (sitecustomize.py) on the script's path: it must be installed."""
    work = installed[1]
    with open(os.path.join(work, "nan.py"), "w") as f:
        f.write("import tensorflow as tf\nprint(float(tf.reduce_sum(tf.math.log(tf.constant([-1.0, 2.0])))))\n")
    r = _run(installed, ["attach", "--check-numerics", "nan.py"])
    assert "NaN/Inf made by op Log" in r.stderr, r.stderr[-3000:]
    assert "nan.py:2" in r.stderr
