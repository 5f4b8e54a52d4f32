"""Deep stacks read whole: no silent cut, the outermost frames kept, the middle elided and said.

Real interpreters (pyenv 3.10 and 3.12) recurse 5000 plain Python calls, or
600 levels each through C (``next(map(recurse, ...))``: one eval loop per
level), then wait; ``tfnative stack`` must merge the whole stack and show
``<module>`` at the bottom, with one ``elided`` entry in the middle.
"""

import subprocess

import pytest

from ..utils import line_of, pyenv_pythons, script, stack_event, wait_for_file

PYTHONS = pyenv_pythons()
CASES = [(v, mode, depth) for v in ("3.10", "3.12") for mode, depth in (("python", 5000), ("c", 600))]


@pytest.mark.parametrize("version,mode,depth", CASES, ids=["%s-%s-%d" % c for c in CASES])
def test_deep_recursion_whole_stack(version, mode, depth, tmp_path):
    if version not in PYTHONS:
        pytest.skip("no pyenv Python %s" % version)
    ready = tmp_path / "ready"
    target = subprocess.Popen([PYTHONS[version], script("deep_recursion.py"), str(depth), mode, str(ready)])
    try:
        wait_for_file(str(ready), 60, target)
        r, ev = stack_event(tmp_path, target.pid)
        assert ev["via"] == "cfi"
        (thread,) = ev["threads"]
        assert thread["merge"] == "ok" and "error" not in thread, thread.get("merge_detail") or thread.get("error")
        frames = thread["frames"]
        elided = [f for f in frames if f["kind"] == "elided"]
        assert len(elided) == 1 and "recurse" in elided[0]["functions"]
        python = [(f["function"], f["line"]) for f in frames if f["kind"] == "python"]
        path = script("deep_recursion.py")
        assert python[0] == ("bottom", line_of(path, "# the bottom of the recursion"))
        assert python[1][0] == "recurse"
        module_line = line_of(path, "recurse(DEPTH)")
        assert python[-1] == ("<module>", module_line)
        if elided[0]["functions"] == ["recurse"]:
            # nothing but Python frames cut: every level is accounted for
            assert sum(f == "recurse" for f, _ in python) + elided[0]["count"] == depth + 1
        assert "... %d frames of " % elided[0]["count"] in r.stdout
        assert "[py] <module> at %s:%d" % (path, module_line) in r.stdout
    finally:
        target.kill()
        target.wait()
