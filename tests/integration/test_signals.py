"""A signal is fatal only when the script dies of it, and one fault is one event (field issue items 4 and 7)."""

from __future__ import annotations

import pytest

from ..utils import load_json, requires_gdb, run_tfnative

pytestmark = requires_gdb

HANDLED = """import os, signal
def on_segv(signum, frame):
    print("handled", signum, flush=True)
signal.signal(signal.SIGSEGV, on_segv)
os.kill(os.getpid(), signal.SIGSEGV)
print("still alive")
"""

FAULTHANDLER = """import ctypes, faulthandler
faulthandler.enable()
def crash():
    ctypes.string_at(0)
crash()
"""


def _run(tmp_path, name, text, *extra):
    prog = tmp_path / name
    prog.write_text(text)
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--json", str(out), *extra, str(prog)])
    return r, load_json(out)


def test_a_signal_the_script_handles_is_not_called_fatal(tmp_path):
    r, doc = _run(tmp_path, "handled.py", HANDLED)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "handled 11\nstill alive\n"
    (event,) = doc["events"]
    assert (event["kind"], event["signal"], event["handler"], event["fatal"]) == ("signal", "SIGSEGV", True, False)
    assert "fatal" not in r.stderr.lower().replace("handled by the script", "")
    assert doc["triage"]["signal"] is None and doc["triage"]["handled_signals"] == ["SIGSEGV"]
    assert "signal SIGSEGV (handled by the script)" in r.stderr.splitlines()[-1]
    assert doc["exit"] == {"code": 0}


@pytest.mark.parametrize("how", ["in the script", "-X faulthandler"])
def test_faulthandler_reraise_is_the_same_event(tmp_path, how):
    text = FAULTHANDLER if how == "in the script" else FAULTHANDLER.replace("faulthandler.enable()\n", "")
    extra = [] if how == "in the script" else ["--python", __import__("sys").executable]
    prog = tmp_path / "fh.py"
    prog.write_text(text)
    out = tmp_path / "s.json"
    env = None
    if how != "in the script":
        import os

        env = dict(os.environ, PYTHONFAULTHANDLER="1")
    r = run_tfnative(["attach", "--json", str(out), *extra, str(prog)], env=env)
    doc = load_json(out)
    assert r.returncode == 128 + 11, r.stderr
    assert "Fatal Python error: Segmentation fault" in r.stderr  # faulthandler's own dump, untouched
    (event,) = doc["events"]
    assert event["signal"] == "SIGSEGV" and event["fatal"] is True and event["reraised_by_handler"] is True
    py = [f["function"] for f in event["threads"][0]["frames"] if f["kind"] == "python"]
    assert py[-3:] == ["string_at", "crash", "<module>"]
    top = event["threads"][0]["frames"][0]["function"]
    assert "kill" not in top and "raise" not in top, top  # the fault's own stack, not the handler's re-raise
    assert doc["triage"]["signal"] == "SIGSEGV"
    assert r.stderr.count("=== tfnative:") == 1


CHILD_CRASH = """import ctypes, multiprocessing as mp, sys
def crash():
    ctypes.string_at(0)
if __name__ == "__main__":
    p = mp.get_context(sys.argv[1]).Process(target=crash)
    p.start()
    p.join()
    print("child exit", p.exitcode, flush=True)
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_child_that_dies_of_a_signal_is_named(tmp_path, method):
    """Field issue: a crash in a multiprocessing child was invisible; the parent reaps it at once (join)."""
    prog = tmp_path / "mp.py"
    prog.write_text(CHILD_CRASH)
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--json", str(out), str(prog), method])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "child exit -11\n"
    doc = load_json(out)
    (dead,) = doc["children_killed"]
    assert dead["signal"] == "SIGSEGV" and dead["pid"] != doc["pid"]
    assert "child process %d" % dead["pid"] in r.stderr and "died of SIGSEGV" in r.stderr
    assert doc["triage"]["children_killed"] == ["%d SIGSEGV" % dead["pid"]]
    assert doc["events"] == []  # the script itself was not stopped for it
