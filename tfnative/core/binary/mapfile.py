"""The one way tfnative opens a file to read it whole: a library, an executable, a core, a debug file.

``map_file(path)`` (and ``map_fd`` for a file already open) checks before it maps:

- the open itself never blocks (``O_NONBLOCK``: a FIFO named where a library was expected) and its errors
  (missing, permission, a symbolic link loop) are one reason;
- a regular file only: a directory, a FIFO, a device, a socket is not read;
- not a file of ``/proc`` or ``/sys`` (``/proc/self/mem``, ``/proc/kcore``): their sizes say nothing of what
  reading them gives;
- not empty, not shorter than the caller needs, not larger than ``MAX_SIZE`` (a sparse 100 GB file);

then maps it read-only.  Each refusal is ``FileUnusable`` (an ``OSError``) whose ``reason`` reads as a phrase
("empty", "not a regular file (a directory)"), so that a caller can skip the file and say why, or turn it
into the user's one line.  ``read_head`` reads a file's first bytes under the same checks, ``read_file`` a
small file whole (a source file a frame names).
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
from typing import List, Optional, Set

from ...files import file_kind

MAX_SIZE = 1 << 36  # 64 GiB: larger than any library or core tfnative reads whole, smaller than a sparse monster
_OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
_PSEUDO: Optional[Set[int]] = None


class FileUnusable(OSError):
    """A file that cannot be read whole: ``str()`` is ``PATH: REASON``, ``reason`` the phrase alone."""

    def __init__(self, path: str, reason: str, missing: bool = False) -> None:
        super().__init__("%s: %s" % (path, reason))
        self.path = path
        self.reason = reason
        self.missing = missing  # there is no such file (ENOENT, ENOTDIR): not a file that is unfit


def _pseudo_devices() -> Set[int]:
    """The devices of /proc and /sys (pseudo-files: their sizes are not their contents)."""
    global _PSEUDO
    if _PSEUDO is None:
        devs = set()
        for d in ("/proc", "/sys"):
            try:
                devs.add(os.stat(d).st_dev)
            except OSError:
                pass
        _PSEUDO = devs
    return _PSEUDO


def _reason_of(exc: OSError) -> str:
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]


def open_fd(path: str) -> int:
    """A descriptor for reading ``path``, opened without blocking; ``FileUnusable`` when it cannot be opened."""
    try:
        return os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise FileUnusable(path, _reason_of(exc), exc.errno in (errno.ENOENT, errno.ENOTDIR)) from None
    except ValueError:  # a NUL in the path
        raise FileUnusable(path, "not a valid path") from None


def check_fd(fd: int, path: str, min_size: int = 1, max_size: Optional[int] = MAX_SIZE) -> os.stat_result:
    """The checks of the module docstring on an open descriptor (``path`` names it); its ``fstat``.
    ``max_size`` None: no upper bound (a core: a large job's is larger than any library)."""
    try:
        st = os.fstat(fd)
    except OSError as exc:
        raise FileUnusable(path, _reason_of(exc)) from None
    if not stat.S_ISREG(st.st_mode):
        raise FileUnusable(path, "not a regular file (%s)" % file_kind(st.st_mode))
    if st.st_dev in _pseudo_devices():
        raise FileUnusable(path, "a file of /proc or /sys, not a file on disk")
    if st.st_size == 0:
        raise FileUnusable(path, "empty")
    if st.st_size < min_size:
        raise FileUnusable(path, "too short (%d bytes)" % st.st_size)
    if max_size is not None and st.st_size > max_size:
        raise FileUnusable(path, "too large (%d bytes)" % st.st_size)
    return st


def map_fd(fd: int, path: str, min_size: int = 1, max_size: Optional[int] = MAX_SIZE) -> mmap.mmap:
    """``fd`` checked and mapped read-only (the caller keeps and closes ``fd``)."""
    check_fd(fd, path, min_size, max_size)
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, OverflowError) as exc:
        reason = _reason_of(exc) if isinstance(exc, OSError) else str(exc)
        raise FileUnusable(path, "cannot be mapped (%s)" % reason) from None


def map_file(path: str, min_size: int = 1) -> mmap.mmap:
    """``path`` checked and mapped read-only: ``FileUnusable`` (an ``OSError``) says why it cannot be."""
    fd = open_fd(path)
    try:
        return map_fd(fd, path, min_size)
    finally:
        os.close(fd)


def read_head(path: str, size: int) -> bytes:
    """Up to ``size`` first bytes of ``path``, under the same checks (``FileUnusable`` when it fails them)."""
    fd = open_fd(path)
    try:
        check_fd(fd, path)
        try:
            return os.pread(fd, size, 0)
        except OSError as exc:
            raise FileUnusable(path, _reason_of(exc)) from None
    finally:
        os.close(fd)


def read_file(path: str, max_size: int) -> bytes:
    """The whole of ``path``, under the same checks and no larger than ``max_size`` (``FileUnusable`` otherwise):
    a source file a frame names, which may be anything (a FIFO, ``/dev/zero``, a sparse 100 GB file)."""
    fd = open_fd(path)
    try:
        st = check_fd(fd, path)
        if st.st_size > max_size:
            raise FileUnusable(path, "too large (%d bytes)" % st.st_size)
        chunks: List[bytes] = []
        got = 0
        while got <= max_size:
            try:
                chunk = os.read(fd, min(1 << 20, max_size + 1 - got))
            except OSError as exc:
                raise FileUnusable(path, _reason_of(exc)) from None
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > max_size:  # it grew while read
            raise FileUnusable(path, "too large (over %d bytes)" % max_size)
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_file(path: str, min_size: int = 1, elf: bool = False) -> Optional[FileUnusable]:
    """Why ``path`` cannot be read whole (``elf``: as an ELF file), None when it can; nothing is mapped."""
    try:
        fd = open_fd(path)
    except FileUnusable as exc:
        return exc
    try:
        check_fd(fd, path, min_size)
        if elf and os.pread(fd, 4, 0) != b"\x7fELF":
            return FileUnusable(path, "not an ELF file")
    except FileUnusable as exc:
        return exc
    except OSError as exc:
        return FileUnusable(path, _reason_of(exc))
    finally:
        os.close(fd)
    return None
