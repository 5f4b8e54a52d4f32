"""core/binary/mapfile.py at its edges, on real files: sizes one below, at and one above each bound, each kind of file
that is not a regular one, a path through a file, a NUL in a path, a descriptor that cannot be mapped, and what
comes back when all is well (the whole file, its first bytes, nothing else).  The odd files' common refusals are
in test_core_bounds.py."""

from __future__ import annotations

import errno
import importlib
import os
import socket
import stat

import pytest

from tfnative.core.binary.mapfile import (
    MAX_SIZE,
    FileUnusable,
    check_fd,
    check_file,
    map_fd,
    map_file,
    open_fd,
    read_file,
    read_head,
)


def _write(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def _reason(call, *args, **kw) -> str:
    with pytest.raises(FileUnusable) as e:
        call(*args, **kw)
    path = next(a for a in args if isinstance(a, str))  # the path the call was given: the error names it
    assert e.value.path == path and str(e.value) == "%s: %s" % (path, e.value.reason)
    return e.value.reason


def test_min_size_is_the_least_size_allowed(tmp_path):
    eight = _write(tmp_path / "eight", b"01234567")
    with map_file(eight, min_size=8) as mm:
        assert mm[:] == b"01234567"
    assert _reason(map_file, eight, min_size=9) == "too short (8 bytes)"
    assert check_file(eight, min_size=8) is None
    assert check_file(eight, min_size=9).reason == "too short (8 bytes)"
    with map_file(eight) as mm:  # the default: anything not empty
        assert len(mm) == 8
    one = _write(tmp_path / "one", b"x")
    assert check_file(one) is None and read_head(one, 10) == b"x" and read_file(one, 1) == b"x"
    with map_file(one) as mm:  # one byte is enough by default
        assert mm[:] == b"x"
    fd = os.open(one, os.O_RDONLY)
    try:
        with map_fd(fd, one) as mm:
            assert mm[:] == b"x"
    finally:
        os.close(fd)


def test_each_refusal_names_the_path_it_was_given(tmp_path):
    empty = _write(tmp_path / "empty", b"")
    short = _write(tmp_path / "short", b"abc")
    text = _write(tmp_path / "text", b"hello")
    for path, reason in ((empty, "empty"), (str(tmp_path), "not a regular file (a directory)")):
        assert _reason(read_head, path, 4) == reason
        assert _reason(read_file, path, 100) == reason
        bad = check_file(path)
        assert bad is not None and bad.path == path and bad.reason == reason
    bad = check_file(short, min_size=4)
    assert bad is not None and bad.path == short and str(bad) == short + ": too short (3 bytes)"
    bad = check_file(text, elf=True)
    assert bad is not None and bad.path == text and str(bad) == text + ": not an ELF file"
    assert _reason(read_file, text, 4) == "too large (5 bytes)"
    bad = check_file(text + "\0")
    assert bad is not None and bad.path == text + "\0"


def test_max_size_is_the_largest_size_allowed(tmp_path):
    path = str(tmp_path / "sparse")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.ftruncate(fd, MAX_SIZE)
        assert check_fd(fd, path).st_size == MAX_SIZE  # exactly the bound: mapped
        assert check_file(path) is None
        os.ftruncate(fd, MAX_SIZE + 1)
        assert _reason(check_fd, fd, path) == "too large (%d bytes)" % (MAX_SIZE + 1)
        assert check_fd(fd, path, max_size=None).st_size == MAX_SIZE + 1  # a core: no upper bound
        assert _reason(check_fd, fd, path, max_size=100) == "too large (%d bytes)" % (MAX_SIZE + 1)
        os.ftruncate(fd, 100)
        assert check_fd(fd, path, max_size=100).st_size == 100
        assert _reason(check_fd, fd, path, max_size=99) == "too large (100 bytes)"
        assert _reason(map_fd, fd, path, max_size=99) == "too large (100 bytes)"
        assert _reason(map_fd, fd, path, min_size=101) == "too short (100 bytes)"
        with map_fd(fd, path, min_size=100, max_size=100) as mm:
            assert mm[:] == bytes(100)
    finally:
        os.close(fd)


def test_read_file_reads_the_whole_file_up_to_its_bound(tmp_path):
    big = os.urandom(3 << 20) + b"end"  # several of its reads
    path = _write(tmp_path / "big", big)
    assert read_file(path, len(big)) == big
    assert read_file(path, len(big) + 1) == big
    assert _reason(read_file, path, len(big) - 1) == "too large (%d bytes)" % len(big)
    assert read_head(path, 5) == big[:5] and read_head(path, len(big) + 10) == big


def test_the_kinds_of_file_that_are_not_regular(tmp_path):
    sock = str(tmp_path / "sock")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(sock)
        fd = os.open(sock, os.O_PATH)  # a socket cannot be opened for reading; its kind is still told
        try:
            assert _reason(check_fd, fd, sock) == "not a regular file (a socket)"
        finally:
            os.close(fd)
        bad = check_file(sock)
        assert bad is not None and bad.reason == "no such device or address" and not bad.missing
    fd = os.open(str(tmp_path), os.O_RDONLY)
    try:
        assert _reason(check_fd, fd, "here") == "not a regular file (a directory)"
    finally:
        os.close(fd)
    # a block device (a disk): told by its kind, never opened here (O_PATH)
    blocks = [os.path.join("/dev", n) for n in sorted(os.listdir("/dev"))
              if stat.S_ISBLK(os.stat(os.path.join("/dev", n), follow_symlinks=False).st_mode)]
    for dev in blocks[:1]:  # where the machine shows one
        fd = os.open(dev, os.O_PATH)
        try:
            assert _reason(check_fd, fd, dev) == "not a regular file (a block device)"
        finally:
            os.close(fd)


def test_pseudo_files_of_proc_and_sys(tmp_path):
    for path in ("/proc/self/status", "/proc/self/mem", "/sys/kernel/notes", "/sys/kernel/uevent_seqnum"):
        if os.path.isfile(path):
            assert _reason(map_file, path) == "a file of /proc or /sys, not a file on disk", path
            assert check_file(path).reason == "a file of /proc or /sys, not a file on disk"
    assert any(os.path.isfile(p) for p in ("/sys/kernel/notes", "/sys/kernel/uevent_seqnum"))


def test_pseudo_files_when_first_checked(tmp_path):
    # which devices are /proc's and /sys's is found once per process, at the first file checked: here that
    # first time again (the module imported anew in this process, and put back as it was afterwards)
    import tfnative.core.binary.mapfile as module

    good = _write(tmp_path / "good", b"x")
    saved = dict(module.__dict__)
    try:
        for first in ("/proc/self/status", "/sys/kernel/notes", good):
            importlib.reload(module)
            said = [module.check_file(p) for p in (first, "/proc/self/status", "/sys/kernel/notes", good)]
            assert [b.reason if b else "ok" for b in said[1:]] == (
                ["a file of /proc or /sys, not a file on disk"] * 2 + ["ok"])
    finally:
        module.__dict__.clear()
        module.__dict__.update(saved)
    assert module.FileUnusable is FileUnusable


def test_open_errors_are_reasons_and_say_what_is_missing(tmp_path):
    afile = _write(tmp_path / "afile", b"data")
    through = afile + "/x"  # a path through a regular file: there is no such file
    with pytest.raises(FileUnusable) as e:
        map_file(through)
    assert e.value.reason == "not a directory" and e.value.missing
    assert e.value.path == through and str(e.value) == through + ": not a directory"
    assert check_file(through).missing
    with pytest.raises(FileUnusable) as e:
        open_fd(str(tmp_path / "none"))
    assert e.value.reason == "no such file or directory" and e.value.missing
    assert isinstance(e.value, OSError)
    with pytest.raises(FileUnusable) as e:
        map_file(afile + "\0x")
    assert e.value.reason == "not a valid path" and not e.value.missing
    assert check_file(afile + "\0x").reason == "not a valid path"
    assert _reason(read_head, afile + "\0", 4) == "not a valid path"


def test_a_descriptor_that_cannot_be_mapped(tmp_path):
    path = _write(tmp_path / "wo", b"data")
    fd = os.open(path, os.O_WRONLY)  # its size is fine; reading it through a map is not allowed
    try:
        assert _reason(map_fd, fd, path) == "cannot be mapped (permission denied)"
    finally:
        os.close(fd)


def test_check_fd_on_a_closed_descriptor():
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    assert _reason(check_fd, r, "gone") == os.strerror(errno.EBADF)[:1].lower() + os.strerror(errno.EBADF)[1:]


def test_the_elf_check_reads_the_first_four_bytes(tmp_path):
    assert check_file(_write(tmp_path / "elf", b"\x7fELF"), elf=True) is None
    assert check_file(_write(tmp_path / "elf2", b"\x7fELF" + bytes(60)), min_size=64, elf=True) is None
    assert check_file(_write(tmp_path / "elf3", b"\x7fEL"), elf=True).reason == "not an ELF file"
    assert check_file(_write(tmp_path / "not", b"\x7fELG"), elf=True).reason == "not an ELF file"
    assert check_file(_write(tmp_path / "short", b"\x7fELF"), min_size=5, elf=True).reason == "too short (4 bytes)"
    assert check_file(str(tmp_path), elf=True).reason == "not a regular file (a directory)"


def test_nothing_is_left_open(tmp_path):
    good = _write(tmp_path / "good", b"hello")
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with map_file(good):
            pass
        read_head(good, 2), read_file(good, 10), check_file(good), check_file(good, elf=True)
        for call in (map_file, check_file, lambda p: read_head(p, 1), lambda p: read_file(p, 9)):
            try:
                call(fifo)
            except FileUnusable:
                pass
            try:
                call(good + "/x")
            except FileUnusable:
                pass
        with pytest.raises(FileUnusable):
            read_file(good, 2)
    assert len(os.listdir("/proc/self/fd")) == before


# What a failing disk and a file written to while read do, made to happen on purpose: ``os.pread``/``os.read``
# (as mapfile calls them, through the ``os`` module) are wrapped for the one test.  The wrapper stands for the
# kernel (an EIO from a failing disk; a writer appending between the checks and the reading, which it really
# does here, to the real file); the code under test runs as it is.


def _eio(*args, **kw):
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_a_read_error_after_the_checks_names_the_path_and_the_error(tmp_path, monkeypatch):
    import tfnative.core.binary.mapfile as module

    path = _write(tmp_path / "disk", b"\x7fELF" + bytes(60))
    eio = os.strerror(errno.EIO)[:1].lower() + os.strerror(errno.EIO)[1:]  # "input/output error"
    monkeypatch.setattr(module.os, "pread", _eio)
    monkeypatch.setattr(module.os, "read", _eio)
    before = len(os.listdir("/proc/self/fd"))
    for call in (lambda: read_head(path, 4), lambda: read_file(path, 100)):
        with pytest.raises(FileUnusable) as e:
            call()
        assert (e.value.path, e.value.reason, str(e.value)) == (path, eio, "%s: %s" % (path, eio))
        assert not e.value.missing
    bad = check_file(path, elf=True)
    assert bad is not None and (bad.path, bad.reason, str(bad)) == (path, eio, "%s: %s" % (path, eio))
    assert not bad.missing
    assert check_file(path) is None  # without the ELF check nothing is read
    monkeypatch.undo()
    assert len(os.listdir("/proc/self/fd")) == before
    assert read_head(path, 4) == b"\x7fELF" and check_file(path, elf=True) is None


def _growing(monkeypatch, path: str, extra: bytes, asked: list) -> None:
    """At the first read of ``path``'s descriptor (after its checks), ``extra`` is appended to the file."""
    import tfnative.core.binary.mapfile as module

    real = os.read

    def read(fd, n):
        asked.append(n)
        if len(asked) == 1:
            with open(path, "ab") as f:
                f.write(extra)
        return real(fd, n)

    monkeypatch.setattr(module.os, "read", read)


@pytest.mark.parametrize("grown, ok, reads", [(0, True, [12, 2]), (1, True, [12, 1]), (2, False, [12]),
                                              (5, False, [12]), (3 << 20, False, [12])])
def test_a_file_that_grows_while_read_is_read_to_its_bound_only(tmp_path, monkeypatch, grown, ok, reads):
    # 10 bytes when checked, then ``grown`` more: up to the bound (11) it is read whole, past it it is refused
    path = _write(tmp_path / "log", b"0123456789")
    asked: list = []
    _growing(monkeypatch, path, b"x" * grown, asked)
    if ok:
        assert read_file(path, 11) == b"0123456789" + b"x" * grown
    else:
        assert _reason(read_file, path, 11) == "too large (over 11 bytes)"
    # each read asks for what is left up to one byte past the bound, and no read follows that byte: what is
    # held stays bounded however far the file grows
    assert asked == reads


def test_a_large_file_that_grows_is_read_a_mebibyte_at_a_time(tmp_path, monkeypatch):
    data = os.urandom((2 << 20) + 7)
    path = _write(tmp_path / "big", data)
    bound = len(data) + 100
    asked: list = []
    _growing(monkeypatch, path, b"y" * 50, asked)  # grows, stays within its bound
    assert read_file(path, bound) == data + b"y" * 50
    assert asked == [1 << 20, 1 << 20, bound + 1 - (2 << 20), bound + 1 - len(data) - 50]
    monkeypatch.undo()
    asked = []
    _growing(monkeypatch, path, b"z" * (1 << 20), asked)  # grows past it: refused after one read past the bound
    assert _reason(read_file, path, bound) == "too large (over %d bytes)" % bound
    assert asked[:3] == [1 << 20, 1 << 20, bound + 1 - (2 << 20)] and len(asked) == 3
