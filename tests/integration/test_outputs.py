"""User-named outputs through the real CLI: ``-`` is stdout, links are written through, nothing replaced.

Field issue: ``tfnative stack --pid N --json /dev/stdout`` as root replaced the
system's ``/dev/stdout`` link with a regular file.  The links here point where
``/dev/stdout`` points (``/proc/self/fd/1``), so a regression breaks a link in
a temporary directory, not the machine.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from ..utils import TFNATIVE, assert_running_untraced, requires_gdb, run_tfnative, script, wait_for_file


@pytest.fixture(scope="module")
def sleeper(tmp_path_factory):
    ready = tmp_path_factory.mktemp("sleeper") / "ready"
    proc = subprocess.Popen([sys.executable, script("sleeper.py"), str(ready)])
    try:
        wait_for_file(str(ready), proc=proc)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)


def _doc(text: str) -> dict:
    doc = json.loads(text)
    assert doc["tfnative"] == 1 and doc["events"][0]["kind"] == "snapshot"
    return doc


@requires_gdb
def test_json_dash_is_stdout_and_text_goes_to_stderr(sleeper, tmp_path):
    out = run_tfnative(["stack", "--pid", str(sleeper), "--json", "-"], cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    doc = _doc(out.stdout)
    assert doc["pid"] == sleeper
    assert "wait_here" in out.stderr  # the text report, on stderr
    assert not (tmp_path / "-").exists()
    assert_running_untraced(sleeper)


@requires_gdb
def test_json_through_a_link_to_stdout(sleeper, tmp_path):
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    out = run_tfnative(["stack", "--pid", str(sleeper), "--json", str(link)])
    assert out.returncode == 0, out.stderr
    text, _, rest = out.stdout.partition("\n{")
    assert "wait_here" in text
    _doc("{" + rest)
    assert os.path.islink(link) and os.readlink(link) == "/proc/self/fd/1"


@requires_gdb
def test_json_through_a_symlink_and_into_a_fifo(sleeper, tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    out = run_tfnative(["stack", "--pid", str(sleeper), "--json", str(link)])
    assert out.returncode == 0, out.stderr
    assert os.path.islink(link)
    _doc(real.read_text())
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([*TFNATIVE, "stack", "--pid", str(sleeper), "--json", str(fifo)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with open(fifo) as f:
        got = f.read()
    assert proc.wait(120) == 0, proc.stderr.read()
    _doc(got)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["fifo", "link.json", "real.json"]


@requires_gdb
def test_new_json_file_has_the_umask_mode(sleeper, tmp_path):
    out = subprocess.run(["sh", "-c", 'umask 022; exec "$@"', "sh", *TFNATIVE, "stack",
                          "--pid", str(sleeper), "--json", str(tmp_path / "new.json")],
                         capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert stat.S_IMODE(os.stat(tmp_path / "new.json").st_mode) == 0o644


def test_json_into_a_missing_directory_is_one_line(sleeper, tmp_path):
    out = run_tfnative(["stack", "--pid", str(sleeper), "--json", str(tmp_path / "no" / "x.json")])
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1].startswith("tfnative: error: cannot write")
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "no").exists()
