"""Corrupted Python frame chains (written by the target itself with ctypes, as pystack's tests do).

A cyclic chain must be detected and said, never shown as thousands of
repeating frames; an unreadable frame must keep the frames read before it
and say where the walk stopped.
"""

import subprocess

import pytest

from ..utils import pyenv_pythons, script, stack_event, wait_for_file

PYTHONS = pyenv_pythons()
CASES = [(v, m) for v in ("3.10", "3.12") for m in ("cycle", "unreadable")]


def _python_names(thread):
    frames = thread["frames"] if thread["merge"] == "ok" else thread["python_frames"]
    return [f["function"] for f in frames if f["kind"] == "python"]


@pytest.mark.parametrize("version,mode", CASES, ids=["%s-%s" % c for c in CASES])
def test_corrupted_chain(version, mode, tmp_path):
    if version not in PYTHONS:
        pytest.skip("no pyenv Python %s" % version)
    ready = tmp_path / "ready"
    target = subprocess.Popen([PYTHONS[version], script("corrupt_frames.py"), mode, str(ready)])
    try:
        wait_for_file(str(ready), 60, target)
        r, ev = stack_event(tmp_path, target.pid)
        (thread,) = ev["threads"]
        names = _python_names(thread)
        if mode == "cycle":
            # bottom -> inner -> middle -> outer -> inner ...: each frame once, then the loop is said
            assert names == ["bottom", "inner", "middle", "outer"], names
            assert "loops back" in thread["error"] and "after 4 frames" in thread["error"]
            assert "!! the Python frame chain loops back" in r.stdout
        else:
            # middle's code pointer is garbage: bottom and inner were read, the walk stopped at frame 2
            assert names == ["bottom", "inner"], names
            assert thread["error"].startswith("cannot read Python frame 2 ")
            assert "!! cannot read Python frame 2" in r.stdout
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()
