"""tfnative as users install it: the wheel (built from the sdist, as a release is) in a fresh virtual
environment, run from a directory outside the source tree.  A file the package forgets (the gdb scripts of
``tfnative_gdb``, ``tfnative/inject/sitecustomize.py``, a subpackage missing from pyproject's list) fails
here, where every other test would still find it in the checkout.

Only tfnative comes from the wheel: its dependencies (click, psutil, pygdbmi, zstandard, lz4, TensorFlow)
are the test environment's own, made importable by a ``.pth`` file that names their directories (installing
TensorFlow again would take minutes), and checked to be the only thing found there.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import zipfile

import pytest

from ..utils import has_tensorflow, script, wait_for_file

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
def installed(tmp_path_factory):
    """(venv, work directory, environment): the wheel installed in a fresh venv; the work directory is
    outside the checkout and the environment has no PYTHONPATH."""
    base = tmp_path_factory.mktemp("wheel")
    dist, venv, work = str(base / "dist"), str(base / "venv"), str(base / "work")
    os.makedirs(work)
    wheel = _build(dist)
    names = zipfile.ZipFile(wheel).namelist()
    for must in ("tfnative/inject/sitecustomize.py", "tfnative_gdb/gdbinit.py", "tfnative/py.typed"):
        assert must in names, must
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


def test_bazelrc_and_presets(installed):
    r = _run(installed, ["bazelrc"])
    assert r.returncode == 0, r.stderr
    with open(os.path.join(ROOT, "build", "tfnative.bazelrc")) as f:
        assert r.stdout == f.read()


@contextlib.contextmanager
def _sleeper(work):
    pidfile = os.path.join(work, "sleeper.pid")
    shutil.copy(script("sleeper.py"), work)
    proc = subprocess.Popen([sys.executable, os.path.join(work, "sleeper.py"), pidfile], cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_file(pidfile, 60, proc)
        yield proc
    finally:
        proc.kill()
        proc.wait()


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


def test_core(installed):
    if not _core_pattern_is_a_file():
        pytest.skip("cores go to a program (core_pattern starts with '|'): none is written here")
    work = os.path.join(installed[1], "core")
    os.makedirs(work)
    shutil.copy(script("segv.py"), work)

    def raise_limit():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    p = subprocess.run([sys.executable, "segv.py"], cwd=work, preexec_fn=raise_limit, capture_output=True,
                       timeout=60)
    assert p.returncode < 0
    cores = [n for n in os.listdir(work) if n.startswith("core")]
    if not cores:
        pytest.skip("no core written (core_pattern: another directory?)")
    r = _run(installed, ["core", os.path.join(work, cores[0])])
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
