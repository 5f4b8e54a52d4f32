"""``stack`` of a process whose files have not changed touches only cached indexes (issue #26): a second
snapshot builds, rewrites and adds nothing in the cache, and shows the same stacks."""

import os
import subprocess
import sys

from ..utils import load_json, run_tfnative


def _cache_files(root):
    out = {}
    for d, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            out[os.path.relpath(path, root)] = os.stat(path).st_mtime_ns
    return out


def _stack(tmp_path, pid, name, env):
    out = tmp_path / ("%s.json" % name)
    r = run_tfnative(["stack", "--pid", str(pid), "--all-threads", "--json", str(out)], env=env)
    assert r.returncode == 0, r.stderr
    return [[(f["kind"], f["function"], f.get("line")) for f in t["frames"]]
            for t in load_json(out)["events"][0]["threads"]]


def test_a_second_stack_reads_only_the_cache(tmp_path):
    cache = tmp_path / "cache"
    env = dict(os.environ, TFNATIVE_CACHE_DIR=str(cache))
    target = subprocess.Popen([sys.executable, "-c", "import time\nprint('ready', flush=True)\ntime.sleep(120)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        first = _stack(tmp_path, target.pid, "first", env)
        built = _cache_files(cache)
        assert any(name.endswith(".idx") for name in built)  # the libraries' symbol indexes
        assert any(name.startswith(os.path.join("index", "syms-")) for name in built)  # the interpreter's symbols
        second = _stack(tmp_path, target.pid, "second", env)
        assert _cache_files(cache) == built  # nothing built again, rewritten or added
        assert second == first
        assert any(("python", "<module>", 3) == f for t in first for f in t)
    finally:
        target.kill()
        target.wait()
