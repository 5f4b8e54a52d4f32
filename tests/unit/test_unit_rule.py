"""The unit layer's rule (``tests/unit/conftest.py``) holds: starting a process that lives beside the test, or gdb,
fails a unit test; a tool run to completion does not."""

import os
import subprocess

import pytest


def test_popen_fails_a_unit_test():
    with pytest.raises(pytest.fail.Exception, match="subprocess.Popen"):
        p = subprocess.Popen(["true"])
        p.wait()  # reached only when the rule is broken: nothing left behind either way


def test_fork_fails_a_unit_test():
    with pytest.raises(pytest.fail.Exception, match="os.fork"):
        pid = os.fork()
        if pid == 0:  # reached only when the rule is broken: the child goes at once
            os._exit(0)
        os.waitpid(pid, 0)


def test_gdb_fails_a_unit_test_even_run_to_completion():
    with pytest.raises(pytest.fail.Exception, match="gdb"):
        subprocess.run(["gdb", "--version"], capture_output=True, timeout=60)


def test_a_tool_run_to_completion_is_allowed():
    assert subprocess.run(["true"], timeout=60).returncode == 0
    assert subprocess.call(["true"], timeout=60) == 0
