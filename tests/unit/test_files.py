"""Output paths follow Unix habits (tfnative.files.open_output); no gdb, no target process."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

from tfnative.errors import TfnativeError
from tfnative.files import write_output

WRITE = ("import sys; from tfnative.files import write_output; "
         "print('text before', flush=True); write_output(sys.argv[1], b'{\"doc\": 1}\\n')")


def _leftovers(directory) -> list:
    return [n for n in os.listdir(directory) if "tfnative-tmp" in n]


def test_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_output(str(tmp_path / "out.json"), b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "out.json").st_mode) == 0o640
    assert (tmp_path / "out.json").read_bytes() == b"x"


def test_existing_file_keeps_its_mode_and_is_replaced_whole(tmp_path):
    p = tmp_path / "out.json"
    p.write_bytes(b"old content that is longer")
    os.chmod(p, 0o604)
    write_output(str(p), b"new")
    assert p.read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o604
    assert _leftovers(tmp_path) == []


def test_symlink_is_written_through(tmp_path):
    target = tmp_path / "real.json"
    target.write_bytes(b"old")
    link = tmp_path / "link.json"
    link.symlink_to("real.json")
    write_output(str(link), b"new")
    assert os.path.islink(link) and os.readlink(link) == "real.json"
    assert target.read_bytes() == b"new"
    assert _leftovers(tmp_path) == []


def test_dangling_symlink_creates_its_target(tmp_path):
    (tmp_path / "sub").mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "sub" / "new.json")
    write_output(str(link), b"x")
    assert os.path.islink(link)
    assert (tmp_path / "sub" / "new.json").read_bytes() == b"x"


def test_fifo_is_written_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    write_output(str(fifo), b"through the pipe")
    reader.join(10)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert _leftovers(tmp_path) == []


def test_character_device_is_written_not_replaced():
    write_output("/dev/null", b"nothing")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_dash_is_stdout_and_no_file_named_dash(tmp_path):
    out = subprocess.run([sys.executable, "-c", WRITE, "-"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == 'text before\n{"doc": 1}\n'
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("kind", ["pipe", "file"])
def test_link_to_own_stdout_writes_the_stream(tmp_path, kind):
    """A link into /proc/self/fd (what /dev/stdout is) writes the stream at its position: never replaced."""
    link = tmp_path / "stdout-link"
    link.symlink_to("/proc/self/fd/1")
    if kind == "pipe":
        out = subprocess.run([sys.executable, "-c", WRITE, str(link)], capture_output=True, text=True, timeout=60)
        text = out.stdout
    else:
        with open(tmp_path / "redirected.txt", "w") as f:
            out = subprocess.run([sys.executable, "-c", WRITE, str(link)], stdout=f, stderr=subprocess.PIPE,
                                 text=True, timeout=60)
        text = (tmp_path / "redirected.txt").read_text()
    assert out.returncode == 0, out.stderr
    assert text == 'text before\n{"doc": 1}\n'
    assert os.path.islink(link) and os.readlink(link) == "/proc/self/fd/1"


def test_missing_directory_is_one_clear_error(tmp_path):
    with pytest.raises(TfnativeError, match="no such directory"):
        write_output(str(tmp_path / "nope" / "out.json"), b"x")
    assert not (tmp_path / "nope").exists()


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    from tfnative.files import open_output

    p = tmp_path / "out.json"
    p.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with open_output(str(p)) as f:
            f.write(b"half")
            raise RuntimeError("interrupted")
    assert p.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []
