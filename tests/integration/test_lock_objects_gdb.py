"""gdb's walk of the lock objects in the frames (``gdb_scripts/tfnative_gdb/lockobjects.py``) on a real hung
process: a C++ program built ``-g`` that locks a ``std::mutex`` its own ``std::lock_guard`` already holds.

The guard is recognised whatever language gdb's current frame gives it: a thread blocked in a libc without
debug info leaves gdb in C, whose type printer writes ``class std::lock_guard<std::mutex>`` (the newest pair,
Python 3.14's libc, hung in a ``tsl::mutex``: the guard was missed, the self-deadlock not seen).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Iterator, Tuple

import pytest

from ..utils import ROOT, requires_gdb, wait_for_file

pytestmark = [requires_gdb, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")]

PROGRAM = r"""
#include <fstream>
#include <mutex>
std::mutex mu;
__attribute__((noinline)) void again() {
  std::lock_guard<std::mutex> inner(mu);  // locks it again
}
int main(int, char** argv) {
  std::lock_guard<std::mutex> outer(mu);  // holds it
  { std::ofstream(argv[1]) << "ready"; }
  again();
  return 0;
}
"""


@pytest.fixture(scope="module")
def hung(tmp_path_factory) -> Iterator[Tuple[int, str]]:
    """(pid, the tree's root) of the program, hung in ``again``."""
    where = tmp_path_factory.mktemp("lock_objects")
    src, exe, ready = where / "relock.cc", where / "relock", where / "ready"
    src.write_text(PROGRAM)
    subprocess.run(["g++", "-g", "-O1", "-o", str(exe), str(src), "-pthread"], check=True, timeout=120)
    proc = subprocess.Popen([str(exe), str(ready)], stdin=subprocess.DEVNULL)
    try:
        wait_for_file(str(ready), 60, proc)
        yield proc.pid, ROOT
    finally:
        proc.kill()
        proc.wait(timeout=60)


def _lock_objects(pid: int, root: str, language: str) -> dict:
    code = ("import sys, json; sys.path[:0] = [%r, %r]; from tfnative_gdb import lockobjects; "
            "print('LOCKS=' + json.dumps(lockobjects.lock_objects()))" % (os.path.join(root, "gdb_scripts"), root))
    r = subprocess.run(["gdb", "-nx", "-batch", "-p", str(pid), "-ex", "set language %s" % language,
                        "-ex", "python " + code], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    [line] = [ln for ln in r.stdout.splitlines() if ln.startswith("LOCKS=")] or [r.stdout + r.stderr]
    return json.loads(line[len("LOCKS="):])


@pytest.mark.parametrize("language", ["c", "c++"])
def test_the_guard_that_holds_the_mutex_is_read_in_any_current_language(hung, language):
    pid, root = hung
    [main] = [t for t in _lock_objects(pid, root, language)["threads"] if t["tid"] == pid]
    acquiring = main["acquiring"]
    assert acquiring is not None and acquiring["where"].startswith("again at relock.cc:"), main
    [held] = main["held"]
    assert held["mutex"] == acquiring["mutex"] and held["variable"] == "outer", main
    assert held["type"] == "std::lock_guard" and held["where"].startswith("main at relock.cc:"), main
