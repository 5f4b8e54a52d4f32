"""Mixed stacks on every supported CPython, with and without debug info.

CPython 3.14 and 3.15 are Debian unstable's builds that ``.ci/pythons`` unpacks into a private root
(non-PIE, stripped, their DWARF under the root's own ``usr/lib/debug``): with ``CI`` set the session runs
it, else the tests use what its cache holds and skip, saying how to get it, where it holds nothing.
CPython's own ``_remote_debugging.RemoteUnwinder`` (3.14+) reads the same processes as an oracle.
"""

import json
import os
import shutil
import subprocess
import time

import pytest

from ..utils import (
    ROOT,
    frames_of,
    held,
    line_of,
    load_json,
    pyenv_pythons,
    python_frames,
    requires_gdb,
    run_tfnative,
    script,
    wait_for_file,
)

pytestmark = requires_gdb

STRIPPED = "/usr/bin/python3.11"
NEW = ("3.14", "3.15")
CACHE = os.environ.get("TFNATIVE_CACHE") or os.path.expanduser("~/.cache/tfnative")
TF_VENV = os.path.join(CACHE, "venvs", "py3.14-tf2.22.0rc0")


@pytest.fixture(scope="session")
def new_pythons():
    """{"3.14": path, "3.15": path}: ``.ci/pythons``' interpreters (provisioned here when ``CI`` is set)."""
    if os.environ.get("CI"):
        r = subprocess.run([os.path.join(ROOT, ".ci", "pythons"), *NEW], capture_output=True, text=True,
                           timeout=1800, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr[-3000:]
        return dict(line.split(None, 1) for line in r.stdout.splitlines() if line.strip())
    out = {}
    for version in NEW:
        python = os.path.join(CACHE, "cpython", version, "usr", "bin", "python" + version)
        if os.access(python, os.X_OK):
            out[version] = python
    return out


def _new_python(new_pythons, version):
    python = new_pythons.get(version)
    if python is None:
        pytest.skip("no CPython %s in %s/cpython (run .ci/pythons %s, or set CI)" % (version, CACHE, version))
    return python


def _any_python(version, new_pythons):
    if version == "stripped":
        return STRIPPED if os.path.exists(STRIPPED) else None
    if version in NEW:
        return new_pythons.get(version)
    return pyenv_pythons().get(version)


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


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "stripped"])
def test_function_context_local_read_from_memory(version, tmp_path, new_pythons):
    """The str local ``op_name`` of TF's ``quick_execute`` is read from memory on every version.

    A stand-in ``tensorflow/python/eager/execute.py`` (same function, same local) keeps
    this test independent of which interpreters have TensorFlow installed.
    """
    python = _any_python(version, new_pythons)
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


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "stripped"])
def test_autograph_source_map_read_from_memory(version, tmp_path, new_pythons):
    """dicts, namedtuples and ints read from memory on every version: a stand-in for AutoGraph's
    ``converted_call`` runs a function from an ``__autograph_generated_file*.py`` whose
    ``ag_source_map`` sends its line back to the user's file."""
    python = _any_python(version, new_pythons)
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


# -- CPython 3.14 and 3.15 ------------------------------------------------------------------------------------

ORACLE = r"""
import json, sys, _remote_debugging
trace = _remote_debugging.RemoteUnwinder(int(sys.argv[1]), all_threads=True).get_stack_trace()
threads = [t for i in trace for t in i.threads] if trace and hasattr(trace[0], "threads") else trace
def line(f):
    return f.lineno if hasattr(f, "lineno") else f.location.lineno
print(json.dumps({t.thread_id: [[f.funcname, f.filename, line(f)] for f in t.frame_info] for t in threads}))
"""

LOAD = {"batch_index": ("41", True), "paths": ("('a.tfrecord',)", True), "options": ("{'cycle': 2}", True),
        "shard": ("'train-00041'", False), "sizes": ("[128, 256, 512, 1024, ... 1 more]", False),
        "ratio": ("0.25", False), "done": ("None", False)}
TRAIN = {"step": ("7", True), "flags": ("{'a': 1, 'b': 2}", False), "pair": ("(7, b'xy')", False),
         "active": ("True", False)}


def _oracle(python, pid):
    """CPython's own reading of the Python stacks of ``pid``: {native thread id: [(function, file, line)]}."""
    r = subprocess.run([python, "-I", "-c", ORACLE, str(pid)], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return {int(tid): [tuple(f) for f in frames] for tid, frames in json.loads(r.stdout).items()}


def _started(argv, tmp_path, name="ready"):
    ready = str(tmp_path / name)
    proc = subprocess.Popen(argv + [ready], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for_file(ready, proc=proc)
    return proc


def _stopped(proc):
    proc.kill()
    proc.wait()
    proc.stderr.close()


def _stack(tmp_path, pid, *options):
    out = tmp_path / "s.json"
    r = run_tfnative(["stack", "--pid", str(pid), *options, "--json", str(out)])
    assert r.returncode == 0, r.stderr
    return r, load_json(out)["events"][0]


def _py(thread):
    return [(f["function"], f["file"], f["line"]) for f in thread["frames"] if f["kind"] == "python"]


@pytest.mark.parametrize("version", NEW)
def test_new_python_attach_break(version, tmp_path, new_pythons):
    """attach --break uname: the four user frames in order, file:line, merged with the native stack."""
    python = _new_python(new_pythons, version)
    doc = _check(python, tmp_path, qualified=True)
    assert doc["events"][0]["python"] == version


@pytest.mark.parametrize("version", NEW)
def test_new_python_stack_pid(version, tmp_path, new_pythons):
    """stack --pid --locals of three named threads: threading's names, each thread's Python frames as
    CPython's own RemoteUnwinder reads them (in order, with file:line), merged, and their locals."""
    python = _new_python(new_pythons, version)
    program = script("named_threads.py")
    proc = _started([python, program], tmp_path)
    try:
        r, event = _stack(tmp_path, proc.pid, "--locals")
        oracle = _oracle(python, proc.pid)
    finally:
        _stopped(proc)
    assert event["python"] == version
    threads = {t.get("python_name"): t for t in event["threads"]}
    assert {"MainThread", "loader-1", "trainer"} <= set(threads)
    assert threads["MainThread"]["tid"] == proc.pid
    for name, function, marker in (("MainThread", "main", "MAIN_LINE"), ("loader-1", "load", "LOADER_LINE"),
                                   ("trainer", "train", "TRAINER_LINE")):
        thread = threads[name]
        assert thread["merge"] == "ok", thread.get("merge_detail")
        ours = _py(thread)
        assert (function, program, line_of(program, "# " + marker)) in ours
        theirs = oracle[thread["tid"]]
        # 3.14's RemoteUnwinder stops at the first C call below the innermost eval loop; 3.15's goes on
        assert len(theirs) >= 3 and ours[:len(theirs)] == theirs, (ours, theirs)
        assert thread.get("gil") != "held"  # all three wait in Event.wait, the GIL released
    for name, function, expected in (("loader-1", "load", LOAD), ("trainer", "train", TRAIN)):
        frame = next(f for f in threads[name]["frames"] if f["kind"] == "python" and f["function"] == function)
        assert [(v["name"], (v["repr"], v["arg"])) for v in frame["variables"]] == list(expected.items())
    assert 'Thread %d "loader-1"' % threads["loader-1"]["tid"] in r.stdout


def _gil_holder_event(argv, env, tmp_path):
    """(pid, stack event) of ``gil_holder.py`` run by ``argv`` once it is ready (it is killed after)."""
    proc = subprocess.Popen(argv + [script("gil_holder.py")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        _r, event = _stack(tmp_path, proc.pid)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    return proc.pid, event


@pytest.mark.parametrize("version", NEW)
def test_new_python_gil_holder(version, tmp_path, new_pythons):
    """The main thread holds the GIL (in a collection, sleeping in C); the two spinning threads wait for it."""
    python = _new_python(new_pythons, version)
    pid, event = _gil_holder_event([python], None, tmp_path)
    threads = {t["tid"]: t for t in event["threads"]}
    assert [tid for tid, t in threads.items() if t["gil"] == "held"] == [pid]
    assert [tid for tid, t in threads.items() if t.get("gc")] == [pid]
    spinners = [t for t in threads.values() if (t.get("python_name") or "").endswith("(spin)")]
    assert len(spinners) == 2 and all(t["gil"] == "waiting" for t in spinners)
    path = script("gil_holder.py")
    holder = [(f, os.path.basename(p), n) for f, p, n in _py(threads[pid])]
    assert holder[:2] == [("hold_gil", "gil_holder.py", line_of(path, "PyDLL(None).sleep")),
                        ("Holder.__del__", "gil_holder.py", line_of(path, "        hold_gil()"))]


@pytest.mark.parametrize("version", NEW)
def test_new_python_core(version, tmp_path, new_pythons):
    """core of a plain-Python segfault: the crashing thread's user frames with file:line, merged."""
    python = _new_python(new_pythons, version)
    proc = subprocess.run(["bash", "-c", 'ulimit -c unlimited && exec "$0" "$1"', python, script("segv.py")],
                          cwd=tmp_path, capture_output=True, timeout=120)
    assert proc.returncode != 0
    core = tmp_path / "core"
    assert core.exists(), "no core in %s (core_pattern?)" % tmp_path
    out = tmp_path / "c.json"
    r = run_tfnative(["core", str(core), "--json", str(out)])
    assert r.returncode == 0, r.stderr
    event = load_json(out)["events"][0]
    assert (event["signal"], event["python"]) == ("SIGSEGV", version)
    thread = event["threads"][0]
    assert thread["merge"] == "ok", thread.get("merge_detail")
    assert thread["gil"] == "held"
    path = script("segv.py")
    user = [(f, n) for f, p, n in _py(thread) if p == path]
    assert user == [("poke", line_of(path, "string_at(0)")), ("main", line_of(path, "    poke()")),
                    ("<module>", _last_line(path))]


def _last_line(path):
    with open(path) as f:
        return len(f.read().rstrip("\n").splitlines())


def test_python_through_the_loader(tmp_path, new_pythons):
    """``ld-linux-x86-64.so.2 --library-path ... python3.14 script``: /proc/PID/exe names the loader, the
    interpreter is found from the mappings (stack and attach --pid)."""
    python = _new_python(new_pythons, "3.14")
    root = os.path.dirname(os.path.dirname(os.path.dirname(python)))
    libdir = os.path.join(root, "usr", "lib", "x86_64-linux-gnu")
    loader = os.path.join(libdir, "ld-linux-x86-64.so.2")
    program = script("named_threads.py")
    proc = _started([loader, "--library-path", libdir, python, program], tmp_path)
    try:
        assert os.path.basename(os.readlink("/proc/%d/exe" % proc.pid)) == "ld-linux-x86-64.so.2"
        _r, event = _stack(tmp_path, proc.pid)
        oracle = _oracle(python, proc.pid)
    finally:
        _stopped(proc)
    assert event["python"] == "3.14"
    main = next(t for t in event["threads"] if t["tid"] == proc.pid)
    assert main["merge"] == "ok" and main.get("python_name") == "MainThread"
    theirs = oracle[proc.pid]
    assert _py(main)[:len(theirs)] == theirs
    assert ("main", program, line_of(program, "# MAIN_LINE")) in _py(main)


@pytest.mark.slow
def test_tensorflow_222_on_python_314(tmp_path):
    """TF 2.22.0rc0 on 3.14: stack --pid of a tf.function hung in a py_function names the op on the kernel
    frame, the callback's line on the pool thread and the tf.function the main thread waits in."""
    python = os.path.join(TF_VENV, "bin", "python")
    if not os.path.exists(os.path.join(TF_VENV, "READY")):
        msg = "no %s (.ci/setup provisions it: tests/matrix/run --provision --pair py3.14-tf2.22.0rc0)" % TF_VENV
        if os.environ.get("CI"):
            pytest.fail("CI must provision the pairs it runs: " + msg, pytrace=False)
        pytest.skip(msg)
    hang = script("tf_hang.py")
    with held(python, hang, tmp_path) as proc:
        r, event = _stack(tmp_path, proc.pid)
    assert event["python"] == "3.14"
    main = next(t for t in event["threads"] if t["tid"] == proc.pid)
    assert main["tf_function"]["python_function"] == "step"
    assert ("main", hang, line_of(hang, 'print("result"')) in _py(main)
    worker = next(t for t in event["threads"] if any(f[0] == "slow_callback" for f in _py(t)))
    assert worker["merge"] == "ok"
    loop = range(line_of(hang, "while RELEASE"), line_of(hang, "return x * 2"))
    assert any(f[:2] == ("slow_callback", hang) and f[2] in loop for f in _py(worker))
    kernel = [f for f in worker["frames"] if f["kind"] == "native" and "PyFuncOp::Compute" in (f["function"] or "")]
    assert kernel and kernel[0].get("op", {}).get("type") == "EagerPyFunc", kernel
    assert "slow_callback at tf_hang.py:" in r.stderr


def _without_debug_file(python, tmp_path):
    """(argv prefix, environment) that run a copy of the stripped ``python`` whose prefix has no debug files,
    through its private loader (the copy's rpath, relative to it, finds nothing)."""
    usr = os.path.dirname(os.path.dirname(python))
    libdir = os.path.join(usr, "lib", "x86_64-linux-gnu")
    copy = tmp_path / "bin" / os.path.basename(python)
    copy.parent.mkdir()
    with open(python, "rb") as f:
        copy.write_bytes(f.read())
    copy.chmod(0o755)
    argv = [os.path.join(libdir, "ld-linux-x86-64.so.2"), "--library-path", libdir, str(copy)]
    return argv, dict(os.environ, PYTHONHOME=usr)


@pytest.mark.parametrize("version", NEW)
def test_gil_waits_seen_without_the_debug_file(version, tmp_path, new_pythons):
    """Without names for take_gil (static) the wait is the condition wait called from an unnamed frame of
    the interpreter; the holder comes from memory."""
    python = _new_python(new_pythons, version)
    argv, env = _without_debug_file(python, tmp_path)
    _pid, event = _gil_holder_event(argv, env, tmp_path)
    gil = {t.get("python_name"): t["gil"] for t in event["threads"]}
    assert gil == {"MainThread": "held", "Thread-1 (spin)": "waiting", "Thread-2 (spin)": "waiting"}


@pytest.mark.parametrize("version", NEW)
@pytest.mark.parametrize("how", ["snapshot", "gdb"])
def test_stripped_interpreter_without_its_debug_file(version, how, tmp_path, new_pythons):
    """Debian's python3.X as it ships without its -dbg package: a copy of the stripped binary (no debug file
    under its prefix), run through the private loader.  ``.dynsym`` does not name the part of
    ``_PyEval_EvalFrameDefault`` the eval loop calls from (``.cold``): the eval frames are found by where
    their entry frames lie on the stack, and every thread merges; gdb's capture (``--with-gdb``) too."""
    python = _new_python(new_pythons, version)
    argv, env = _without_debug_file(python, tmp_path)
    program = script("named_threads.py")
    ready = str(tmp_path / "ready")
    proc = subprocess.Popen(argv + [program, ready], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_file(ready, proc=proc)
        _r, event = _stack(tmp_path, proc.pid, *(["--with-gdb"] if how == "gdb" else []))
        oracle = _oracle(python, proc.pid)
    finally:
        _stopped(proc)
    assert event["python"] == version
    threads = {t.get("python_name"): t for t in event["threads"]}
    assert {"MainThread", "loader-1", "trainer"} <= set(threads)
    for thread in threads.values():
        assert thread["merge"] == "ok", thread.get("merge_detail")
        theirs = oracle[thread["tid"]]
        assert _py(thread)[:len(theirs)] == theirs
        evals = [f for f in thread["frames"] if f["kind"] == "native" and f["function"] == "_PyEval_EvalFrameDefault"]
        assert evals == []  # each was replaced by its Python frames


@pytest.mark.parametrize("version", NEW)
def test_gdb_reads_the_interpreters_debug_file_under_its_prefix(version, tmp_path, new_pythons):
    """stack --with-gdb: gdb is given the -dbg file under the interpreter's own root (where its
    debug-file-directory does not look): the interpreter's frames get source lines, every thread merges."""
    python = _new_python(new_pythons, version)
    proc = _started([python, script("named_threads.py")], tmp_path)
    try:
        _r, event = _stack(tmp_path, proc.pid, "--with-gdb", "--native-all")
    finally:
        _stopped(proc)
    assert event["via"] == "gdb"
    threads = {t.get("python_name"): t for t in event["threads"]}
    assert {"MainThread", "loader-1", "trainer"} <= set(threads)
    for thread in threads.values():
        assert thread["merge"] == "ok", thread.get("merge_detail")
        interp = [f for f in thread["frames"] if f["kind"] == "native" and f["library"] == "python" + version]
        assert any((f["file"] or "").endswith(".c") and f["line"] for f in interp), interp


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (tests/hangs/gil_mutex.cpp)")
@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "stripped"])
def test_a_gil_waiter_s_futex_lies_in_the_runtime_span(version, tmp_path, new_pythons):
    """``watch`` tells a GIL waiter's wake-ups (every 5 ms, over the CPU floor in all) from work by where its
    futex lies: inside ``_PyRuntime`` as the interpreter's file defines it (``snapshot/progress.runtime_span``),
    on every version, the stripped one and the non-PIE ones included.  On tests/hangs/gil_mutex.py: the
    ext-worker's futex is inside, the main thread's (the C library's mutex) outside, and over a second the
    process has not progressed, the ext-worker a re-waiter."""
    from tfnative.analysis.progress import carry, judge
    from tfnative.snapshot import progress

    python = _any_python(version, new_pythons)
    if python is None or not os.path.exists(python):
        pytest.skip("no CPython %s here" % version)
    so = str(tmp_path / "gil_mutex.so")
    subprocess.run(["g++", "-shared", "-fPIC", "-O0", "-o", so, os.path.join(ROOT, "tests", "hangs", "gil_mutex.cpp"),
                    "-lpthread"], check=True)
    ready = str(tmp_path / "ready")
    proc = subprocess.Popen([python, os.path.join(ROOT, "tests", "hangs", "gil_mutex.py"), ready, so])
    try:
        wait_for_file(ready, 60, proc)
        time.sleep(0.6)  # the ext-worker's usleep(500 ms) ends: it waits for the GIL
        span = progress.runtime_span(proc.pid)
        assert span is not None
        (worker,) = [tid for tid in os.listdir("/proc/%d/task" % proc.pid) if int(tid) != proc.pid]
        worker = int(worker)
        readings = []
        for _ in range(40):  # a reading with the ext-worker in its futex (on a loaded machine it may be runnable)
            one = progress.sample(proc.pid)
            one.runtime = span
            readings.append(one)
            wait = one.threads[worker].wait
            if wait is not None and wait[0] == 202:
                break
            time.sleep(0.05)
        assert wait is not None and wait[0] == 202, wait
        assert span[0] <= int(wait[1], 16) < span[1], (wait, [hex(a) for a in span])
        main = one.threads[proc.pid].wait
        assert main is not None and not span[0] <= int(main[1], 16) < span[1]
        before, kinds = one, []
        for _ in range(3):  # as the watch judges: a thread caught on a CPU is judged at the next reading
            time.sleep(1.0)
            after = progress.sample(proc.pid)
            after.runtime = span
            j = judge(before, after)
            assert not j.progressed, j.why
            kinds.append(j)
            before = carry(before, after, j.caught)
        assert any(j.rewaiters == (worker,) for j in kinds), [j.why for j in kinds]
    finally:
        proc.kill()
        proc.wait()
