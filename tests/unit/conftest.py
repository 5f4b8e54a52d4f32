"""The unit layer's rule, enforced: a unit test starts no process to look at.

A unit test may run a tool to completion through ``subprocess.run`` (or ``call``, ``check_output``): the
compiler that makes an ELF file, ``readelf``, ``mkdocs``, ``c++filt``, ``python -m tfnative`` for its exit
status and output; ``run`` waits for it (and kills it at its timeout), so nothing it starts outlives the call.
What a unit test may not do is start a process that lives on beside it (``subprocess.Popen`` called
directly, ``os.fork``, ``os.posix_spawn``, ``pty.fork``, ``multiprocessing``): a target to read, hold or
signal is an integration test (``tests/integration/``).  Nor may it run gdb, in any way.
"""

from __future__ import annotations

import multiprocessing.util
import os
import subprocess
import sys
from typing import Any, Iterator

import pytest

# The functions of subprocess that start a process and wait for its end before they return.
_TO_COMPLETION = {subprocess.run.__code__, subprocess.call.__code__}


def _refuse(what: str) -> None:
    pytest.fail("a unit test started %s: a process that lives beside the test is an integration test "
                "(tests/integration/); see tests/unit/conftest.py" % what, pytrace=True)


@pytest.fixture(autouse=True)
def _no_process_of_its_own(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_execute = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def execute_child(self: subprocess.Popen[Any], args: Any, executable: Any, *rest: Any) -> Any:
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        first = os.fsdecode(executable or (argv[0] if argv else "")).split()
        if first and os.path.basename(first[0]) in ("gdb", "gdb-multiarch"):
            _refuse("gdb (%r)" % (argv,))
        if not _waited_for(sys._getframe(1)):  # the frame of Popen.__init__
            _refuse("a process with subprocess.Popen (%r); run a tool to completion with subprocess.run" % (argv,))
        return real_execute(self, args, executable, *rest)

    def refused(name: str) -> Any:
        def call(*_a: Any, **_k: Any) -> Any:
            _refuse(name)
        return call

    monkeypatch.setattr(subprocess.Popen, "_execute_child", execute_child)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "spawnv", "spawnve", "spawnvp", "spawnvpe"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refused("os.%s" % name))
    monkeypatch.setattr(multiprocessing.util, "spawnv_passfds", refused("a multiprocessing process"))
    yield


def _waited_for(frame: Any) -> bool:
    """Whether ``frame`` (Popen.__init__) was called, through subprocess's own functions only, by
    ``subprocess.run`` or ``subprocess.call``."""
    frame = frame.f_back
    while frame is not None and frame.f_code.co_filename == subprocess.__file__:
        if frame.f_code in _TO_COMPLETION:
            return True
        frame = frame.f_back
    return False
