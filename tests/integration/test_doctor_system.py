"""``tfnative doctor --system`` on this machine, changed the ways a user's machine differs: each line says ok
or what to do, and the exit status says whether something needs a fix."""

import os
import resource
import shutil
import subprocess

import pytest

from ..utils import ROOT, TFNATIVE, pyenv_pythons


def doctor(*args, preexec=None, prefix=()):
    r = subprocess.run(list(prefix) + TFNATIVE + ["doctor", "--system", *args], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, preexec_fn=preexec)
    lines = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.strip()}
    return r, lines


def _cores(limit):
    return lambda: resource.setrlimit(resource.RLIMIT_CORE, (limit, resource.RLIM_INFINITY))


def test_every_topic_is_answered_in_one_line():
    r, lines = doctor(preexec=_cores(resource.RLIM_INFINITY))
    assert r.stderr == ""
    assert list(lines) == ["gdb", "ptrace", "container", "cores", "debuginfod", "python", "tensorflow"]
    assert all(ln.split()[1] in ("ok", "fix", "note") for ln in lines.values())
    assert lines["gdb"].split()[1] == "ok" and shutil.which("gdb") in lines["gdb"]


def test_no_core_limit_is_a_fix_and_the_exit_status_says_so():
    r, lines = doctor(preexec=_cores(0))
    assert "fix" in lines["cores"] and "ulimit -c unlimited" in lines["cores"]
    assert r.returncode == 1
    pattern = open("/proc/sys/kernel/core_pattern").read().strip()
    if not pattern.startswith("|"):
        r, lines = doctor(preexec=_cores(resource.RLIM_INFINITY))
        assert lines["cores"].split()[1] == "ok" and pattern in lines["cores"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_without_cap_sys_ptrace_says_how_to_get_it():
    _r, lines = doctor(prefix=["setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace"])
    assert lines["ptrace"].split()[1] == "fix" and "SYS_PTRACE" in lines["ptrace"]
    _r, lines = doctor()
    assert lines["ptrace"].split()[1] == "ok"


def test_a_python_tfnative_cannot_read_is_named():
    old = pyenv_pythons().get("3.9") or shutil.which("python2") or "/bin/sh"
    _r, lines = doctor("--python", old)
    assert lines["python"].split()[1] == "fix" and "3.10 to 3.15" in lines["python"]


def test_the_distributions_stripped_python_is_readable():
    if not os.path.exists("/usr/bin/python3.11"):
        pytest.skip("no /usr/bin/python3.11")
    _r, lines = doctor("--python", "/usr/bin/python3.11")
    assert lines["python"].split()[1] == "ok"
    assert lines["tensorflow"].split()[1] == "note"  # Debian's python imports no TensorFlow: said, not a failure


def test_system_takes_no_path():
    r = subprocess.run(TFNATIVE + ["doctor", "--system", "/lib/x86_64-linux-gnu/libc.so.6"], capture_output=True,
                       text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.strip() == "tfnative: error: --system checks this machine: give it no PATH"
