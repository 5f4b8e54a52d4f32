"""tfnative attach on plain Python scripts: real gdb, real processes, real signals."""

import json
import os

import pytest

from ..utils import (
    SCRIPTS,
    frames_of,
    line_of,
    load_json,
    python_frames,
    requires_gdb,
    run_tfnative,
    script,
)

pytestmark = requires_gdb


def test_breakpoint_hit_gives_interleaved_stack(tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", script("nested_uname.py"), "--break", "uname", "--json", str(out), "x", "--", "-y"])
    assert r.returncode == 0, r.stderr
    # the script's own output is untouched, and it got its arguments
    assert r.stdout.strip() == "done ['x', '-y']"
    doc = load_json(out)
    assert doc["tfnative"] == 1 and doc["exit"] == {"code": 0} and doc["unresolved"] == []
    ev = doc["events"][0]
    assert ev["kind"] == "breakpoint" and ev["location"] == "uname"
    assert ev["thread"] == doc["pid"] == ev["threads"][0]["tid"]
    frames = frames_of(doc)
    assert frames[0]["kind"] == "native" and "uname" in frames[0]["function"]
    assert frames[0]["library"] == "libc.so.6" and frames[0]["address"].startswith("0x")
    path = script("nested_uname.py")
    assert python_frames(frames) == [
        ("leaf", "nested_uname.py", line_of(path, "os.uname()")),
        ("middle", "nested_uname.py", line_of(path, "return leaf()")),
        ("Runner.run", "nested_uname.py", line_of(path, "return middle()")),
        ("<module>", "nested_uname.py", line_of(path, "Runner().run()")),
    ]
    # native frames above the Python ones, glue hidden, user frames marked
    kinds = [f["kind"] for f in frames]
    first_py = kinds.index("python")
    assert all(k == "native" for k in kinds[:first_py])
    assert not any(f["function"].startswith(("_PyEval_", "cfunction_", "_PyObject_Vectorcall")) for f in frames)
    assert all(f["user"] for f in frames if f["kind"] == "python")
    # the text report on stderr says the same, innermost first
    text = r.stderr
    assert "breakpoint uname hit" in text
    assert text.index("[py] leaf at") < text.index("[py] middle at") < text.index("[py] Runner.run at")
    assert "nested_uname.py:%d  <-- your code" % line_of(path, "os.uname()") in text


def test_native_all_keeps_glue(tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--native-all", "--break", "uname", "--json", str(out), script("nested_uname.py")])
    assert r.returncode == 0, r.stderr
    names = [f["function"] for f in frames_of(load_json(out))]
    assert any(n.startswith(("cfunction_vectorcall", "_PyEval_Vector", "PyObject_Vectorcall")) or "vectorcall" in n
               for n in names), names


def test_environment_argv_path_stdio_are_the_scripts(tmp_path):
    """sys.argv, sys.path[0], __main__, cwd, env and stdin/stdout/stderr as if run directly."""
    env = dict(os.environ, TFNATIVE_TEST_VAR="hello world")
    r = run_tfnative(["attach", script("env_probe.py"), "a b", "--c"], input="line-from-stdin\n", env=env,
                     cwd=str(tmp_path), stdin=None)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["argv"] == [script("env_probe.py"), "a b", "--c"]
    assert got["path0"] == SCRIPTS
    assert got["name"] == "__main__" and got["spec"] == "None"
    assert got["cwd"] == str(tmp_path)
    assert got["env"] == "hello world"
    assert got["stdin"] == "line-from-stdin"
    assert "to-stderr" in r.stderr


def test_max_hits_then_full_speed(tmp_path):
    out = tmp_path / "s.json"
    src = tmp_path / "many.py"
    src.write_text("import os\nfor i in range(5):\n    os.uname()\nprint('ok')\n")
    r = run_tfnative(["attach", "--break", "uname", "--max-hits", "3", "--json", str(out), str(src)])
    assert r.returncode == 0, r.stderr
    doc = load_json(out)
    assert [e["kind"] for e in doc["events"]] == ["breakpoint"] * 3
    assert "breakpoints removed" in r.stderr and r.stdout.strip() == "ok"


def test_exit_status_is_the_scripts():
    r = run_tfnative(["attach", script("exit_code.py"), "7"])
    assert r.returncode == 7
    assert "exited with status 7" in r.stderr


def test_fatal_signal_is_reported_and_kills_the_script(tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--json", str(out), script("segv.py")])
    assert r.returncode == 128 + 11, r.stderr
    doc = load_json(out)
    assert doc["exit"] == {"signal": "SIGSEGV"}
    ev = doc["events"][0]
    assert ev["kind"] == "signal" and ev["signal"] == "SIGSEGV"
    frames = ev["threads"][0]["frames"]
    assert "strlen" in frames[0]["function"]
    py = python_frames(frames)
    path = script("segv.py")
    assert py[0][0] == "string_at"  # ctypes' Python wrapper
    assert py[1:] == [
        ("poke", "segv.py", line_of(path, "string_at(0)")),
        ("main", "segv.py", line_of(path, "    poke()")),
        ("<module>", "segv.py", len(open(path).read().splitlines())),  # the last line: main()
    ]
    assert "fatal signal SIGSEGV" in r.stderr and "killed by SIGSEGV" in r.stderr


@pytest.mark.parametrize("sig, name", [(6, "SIGABRT"), (8, "SIGFPE"), (4, "SIGILL"), (7, "SIGBUS")])
def test_other_fatal_signals(tmp_path, sig, name):
    src = tmp_path / "die.py"
    src.write_text("import os, signal\ndef die():\n    os.kill(os.getpid(), %d)\ndie()\n" % sig)
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--json", str(out), str(src)])
    assert r.returncode == 128 + sig, r.stderr
    doc = load_json(out)
    assert doc["events"][0]["signal"] == name and doc["exit"] == {"signal": name}
    assert ("die", "die.py", 3) in python_frames(frames_of(doc))


def test_unknown_location_is_named_not_dropped(tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--break", "no_such_function_xyz", "--break", "uname", "--json", str(out),
                      script("exit_code.py")])
    assert r.returncode == 0, r.stderr
    doc = load_json(out)
    assert doc["unresolved"] == ["no_such_function_xyz"]
    assert "no_such_function_xyz never resolved" in r.stderr
    assert "uname resolved but never fired" in r.stderr
    assert "Traceback" not in r.stderr


def test_all_threads(tmp_path):
    src = tmp_path / "threads.py"
    src.write_text(
        "import os, threading, time\n"
        "ev = threading.Event()\n"
        "def worker():\n"
        "    ev.wait()\n"
        "ts = [threading.Thread(target=worker) for _ in range(3)]\n"
        "[t.start() for t in ts]\n"
        "time.sleep(0.2)\n"
        "os.uname()\n"
        "ev.set()\n"
        "[t.join() for t in ts]\n"
    )
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--all-threads", "--break", "uname", "--json", str(out), str(src)])
    assert r.returncode == 0, r.stderr
    ev = load_json(out)["events"][0]
    assert len(ev["threads"]) == 4
    assert ev["threads"][0]["tid"] == ev["thread"]
    for t in ev["threads"][1:]:
        assert ("worker", "threads.py", 4) in python_frames(t["frames"])
        assert t["merge"] == "ok"
