"""Files tfnative writes: the cache directory, cache entries, and the outputs a user names; and how it opens
the inputs a user names (``open_input``, at the end).

Two kinds of writes, with different rules:

* cache entries (``atomic_write``): tfnative's own files under ``cache_dir()``;
  written through a temporary file and ``os.replace``, so that concurrent
  writers and readers never see half an entry;
* outputs the user named (``open_output``/``write_output``: ``--json FILE``,
  ``report -o FILE``), which follow Unix habits:

  - ``-`` is standard output;
  - a symbolic link is written through to its target, never replaced;
  - anything that is not a regular file (a FIFO, a character device,
    ``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``) is opened and
    written like a shell's ``>`` would, never replaced; where it is one of
    tfnative's own standard streams, the stream is written at its position;
  - a regular file (or a new one) is replaced atomically: readers see the old
    file or the whole new one; the new file gets the mode ``open()`` would
    give it (an existing file keeps its mode; a new one gets 0666 less the
    umask);
  - nothing else is created, removed or renamed: a missing directory is an
    error, and the temporary file beside the target is removed whatever
    happens.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from typing import BinaryIO, Iterable, Iterator, List, Optional, Tuple

from .errors import InputError, TfnativeError

STDOUT = "-"
_MAX_LINKS = 40  # the kernel's own limit on a chain of symbolic links (ELOOP)


def cache_dir() -> str:
    """``$TFNATIVE_CACHE_DIR``, else ``$XDG_CACHE_HOME/tfnative``, else ``~/.cache/tfnative``."""
    d = os.environ.get("TFNATIVE_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "tfnative")
    return d


def atomic_write(path: str, chunks: Iterable[bytes]) -> None:
    """Write the cache entry ``path`` through a temporary file in the same directory and ``os.replace``.

    Readers see either the old file or the complete new one, never a partial
    one, however many processes write the same entry at the same time.  For
    tfnative's own cache only: outputs the user names go through ``open_output``.
    """
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    import tempfile  # loaded where a file is written: not on every command's start-up

    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def is_stdout(path: Optional[str]) -> bool:
    """Whether an output path means standard output (``-``)."""
    return path == STDOUT


def _resolve(path: str) -> Tuple[str, bool]:
    """Follow ``path``'s symbolic links: (final path, whether a link went through /proc or /dev/fd).

    Links into ``/proc`` (``/dev/stdout`` -> ``/proc/self/fd/1``) are the
    kernel's magic links: the file they name is an open file of a process, to
    be opened through the link, never replaced by path.
    """
    current = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        if current.startswith(("/proc/", "/dev/fd/")):
            return current, True
        try:
            target = os.readlink(current)
        except OSError:
            return current, False  # not a link (or missing): the path itself
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    raise TfnativeError("cannot write %s: too many levels of symbolic links" % path)


def _same_file(fd: int, other: int) -> bool:
    try:
        a, b = os.fstat(fd), os.fstat(other)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


@contextlib.contextmanager
def open_output(path: str) -> Iterator[BinaryIO]:
    """A binary stream for the output ``path``, by the rules in this module's docstring.

    For a regular file the new content replaces the old one only when the
    ``with`` block ends without an exception; otherwise the old file is left
    as it was.  Errors are ``TfnativeError`` naming the path.
    """
    if is_stdout(path):
        sys.stdout.flush()
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    final, magic = _resolve(path)
    try:
        st: Optional[os.stat_result] = os.stat(final)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise TfnativeError("cannot write %s: %s" % (path, exc.strerror))
    if magic or (st is not None and not stat.S_ISREG(st.st_mode)):
        with _open_special(path) as stream:
            yield stream
        return
    if st is None and not os.path.isdir(os.path.dirname(final) or "."):
        raise TfnativeError("cannot write %s: no such directory: %s" % (path, os.path.dirname(final)))
    with _replace(path, final, st) as stream:
        yield stream


@contextlib.contextmanager
def _open_special(path: str) -> Iterator[BinaryIO]:
    """Open a FIFO, device or magic link for writing, as a shell's ``>`` would; write our own stream in place."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise TfnativeError("cannot write %s: %s" % (path, exc.strerror))
    for stream in (sys.stdout, sys.stderr):
        if _same_file(fd, stream.fileno()):
            # /dev/stdout while stdout is redirected to a file: write at the stream's position, after
            # what tfnative printed there already, instead of truncating it.
            os.close(fd)
            stream.flush()
            yield stream.buffer
            stream.buffer.flush()
            return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.ftruncate(fd, 0)  # a regular file reached through /proc/PID/fd/N: as the shell's '>'
    except OSError as exc:
        os.close(fd)
        raise TfnativeError("cannot write %s: %s" % (path, exc.strerror))
    with os.fdopen(fd, "wb") as f:
        yield f


@contextlib.contextmanager
def _replace(path: str, final: str, st: Optional[os.stat_result]) -> Iterator[BinaryIO]:
    """Write ``final`` through a temporary file beside it and rename it into place."""
    directory = os.path.dirname(final) or "."
    try:
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(final) + ".", suffix=".tfnative-tmp", dir=directory)
    except OSError as exc:
        raise TfnativeError("cannot write %s: %s" % (path, exc.strerror))
    try:
        if st is not None:
            mode = stat.S_IMODE(st.st_mode)
            with contextlib.suppress(OSError):
                os.fchown(fd, st.st_uid, st.st_gid)  # root replacing another user's file keeps its owner
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise TfnativeError("cannot write %s: %s" % (path, exc.strerror or exc))
        raise


def write_output(path: str, data: bytes) -> None:
    """Write ``data`` to the output ``path`` (``-``: standard output), by the rules of ``open_output``."""
    with open_output(path) as f:
        f.write(data)


# -- inputs the user names -----------------------------------------------------------------------------------
# ``merge``'s documents, ``core``'s core and executable.  One rule for all of them: the open never waits (a FIFO
# no one writes to opens at once, with O_NONBLOCK), then fstat says what the file is:
#
# - a directory is an error;
# - a regular file (or a block device) is read as it is;
# - a pipe, FIFO, socket or character device (``merge -``, ``merge <(cmd)``, a terminal, /dev/zero) is a
#   stream: every read waits at most ``timeout`` seconds for something to come, so that a FIFO nobody writes to
#   is an error after that time, never a hang; where the command needs a file it can map or seek
#   (``seekable``: ``core``), a stream is an error at once.
#
# Nothing is read whole: ``Input.chunks`` gives the input in pieces of whole lines, each line bounded.

INPUT_TIMEOUT_S = 60.0  # how long a silent pipe or FIFO is waited for (merge --timeout)
_BLOCK = 1 << 20


def _kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a pipe or FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    return "not a regular file"


class Input:
    """An input ``open_input`` opened: ``name`` (how messages name it), ``stream`` (read with the idle bound)."""

    def __init__(self, name: str, fd: int, stream: bool, timeout: float) -> None:
        self.name, self.fd, self.stream, self.timeout = name, fd, stream, timeout

    def fileno(self) -> int:
        return self.fd

    def read(self, size: int = _BLOCK) -> bytes:
        """Up to ``size`` bytes (b"" at the end).  A stream that sends nothing for ``timeout`` seconds is an
        ``InputError``."""
        import select

        while True:
            if self.stream:
                poller = select.poll()
                poller.register(self.fd, select.POLLIN | select.POLLPRI)
                if not poller.poll(max(0.0, self.timeout) * 1000.0):
                    raise InputError(self.name, "nothing came for %g s (a pipe or FIFO no one writes to?)"
                                     % self.timeout)
            try:
                return os.read(self.fd, size)
            except BlockingIOError:
                continue  # a FIFO of our own (O_NONBLOCK) that poll woke for nothing: wait again
            except OSError as exc:
                raise InputError(self.name, exc.strerror or str(exc)) from None

    def chunks(self, max_line: int, too_long: str) -> Iterator[bytes]:
        """The input in pieces of whole lines (about 1 MiB each; the last one may lack its newline).  A line
        longer than ``max_line`` bytes (at least 1 MiB) is an ``InputError`` saying ``too_long``, as soon as that
        much is read."""
        pending: List[bytes] = []  # a line begun, not ended yet
        size = 0
        while True:
            block = self.read(_BLOCK)
            if not block:
                if pending:
                    yield b"".join(pending)
                return
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                pending.append(block)
                size += len(block)
                if size > max_line:
                    raise InputError(self.name, too_long)
                continue
            head = block[:cut]  # whole lines: those inside one block are shorter than the bound
            if pending:
                if size + head.find(b"\n") + 1 > max_line:
                    raise InputError(self.name, too_long)
                pending.append(head)
                head = b"".join(pending)
            yield head
            pending = [block[cut:]] if cut < len(block) else []
            size = len(block) - cut
            if size > max_line:
                raise InputError(self.name, too_long)

    def detach(self) -> int:
        """The file descriptor, no longer closed by this ``Input`` (``os.fdopen`` it)."""
        fd, self.fd = self.fd, -1
        return fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Input:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_input(path: str, seekable: bool = False, timeout: float = INPUT_TIMEOUT_S) -> Input:
    """Open the input ``path`` (``-``: standard input) by the rules above; ``InputError`` names what is wrong.

    ``seekable``: the caller needs a file it can map or seek in: a stream is an error.  The ``Input`` is a
    context manager and has a file descriptor (``fileno``) to map, or to ``os.fdopen``."""
    if path == STDOUT:
        name = "<stdin>"
        try:
            fd = os.dup(sys.stdin.fileno() if sys.stdin is not None else 0)
        except (OSError, ValueError) as exc:
            raise InputError("standard input", getattr(exc, "strerror", None) or str(exc)) from None
        own = False  # the description is shared with whoever gave us stdin: its flags are not ours to change
    else:
        name = path
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        except FileNotFoundError:
            raise InputError(path, "no such file") from None
        except PermissionError:
            raise InputError(path, "permission denied") from None
        except OSError as exc:
            raise InputError(path, exc.strerror or str(exc)) from None
        own = True
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(name, "is a directory")
        regular = stat.S_ISREG(mode) or stat.S_ISBLK(mode)
        if regular and own:
            os.set_blocking(fd, True)
        if not regular and seekable:
            raise InputError(name, "%s, not a file: give a file (decompressed or copied to disk)"
                             % _kind_of(mode))
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise InputError(name, exc.strerror or str(exc)) from None
        raise
    return Input(name, fd, not regular, timeout)
