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
  - a regular file we may not write (read-only, another user's) is refused,
    as a shell's ``>`` would refuse it, never replaced behind its mode;
  - a regular file (or a new one) is replaced atomically: readers see the old
    file or the whole new one; the new file gets the mode ``open()`` would
    give it (an existing file keeps its mode; a new one gets 0666 less the
    umask);
  - nothing else is created, removed or renamed: a missing directory is an
    error, and the temporary file beside the target is removed whatever
    happens;
  - a FIFO is waited for until a reader opens it, ``FIFO_WAIT_S`` at most;
  - every failure (an empty name, a directory, a missing directory, EACCES,
    EROFS, a full disk or ``/dev/full``, a file that refuses writes like
    ``/proc/version``), when opening, writing or closing, is one
    ``TfnativeError``: ``cannot write PATH: why`` (the path shown on one line:
    ``errors.shown``).

gdb's log (``--gdb-log FILE``) is appended to, by the same rules for links,
FIFOs and errors (``open_log``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import time
from typing import BinaryIO, Iterable, Iterator, List, NoReturn, Optional, TextIO, Tuple

from .errors import InputError, TfnativeError, shown

STDOUT = "-"
_MAX_LINKS = 40  # the kernel's own limit on a chain of symbolic links (ELOOP)
FIFO_WAIT_S = 30.0  # how long an output FIFO may wait for its reader


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
    raise TfnativeError("cannot write %s: too many levels of symbolic links" % shown(path))


def output_error(path: str, exc: OSError) -> TfnativeError:
    """``cannot write PATH: why`` for an ``OSError`` met writing the output ``path``."""
    where = "standard output" if is_stdout(path) else shown(path)
    return TfnativeError("cannot write %s: %s" % (where, exc.strerror or exc))


def _fail(path: str, exc: OSError) -> NoReturn:
    raise output_error(path, exc) from None


def check_output_name(path: str) -> None:
    """An output's name must name something: an empty one is an error (not the current directory, not stdout)."""
    if not path:
        raise TfnativeError("cannot write '': an output needs a file name (or - for standard output)")


def check_output(path: str) -> None:
    """Whether ``path`` can be written, asked before the work that makes the output (a session, a snapshot):
    the errors ``open_output`` would give at the end for an empty name, a directory, a missing directory, a
    read-only file or directory, said at once.  Nothing is opened or created: what only a write can tell
    (``/dev/full``, a full disk) is still said when writing."""
    check_output_name(path)
    if is_stdout(path):
        return
    final, magic = _resolve(path)
    try:
        st = os.stat(final)
    except FileNotFoundError:
        directory = os.path.dirname(final) or "."
        if not os.path.isdir(directory):
            raise TfnativeError("cannot write %s: no such directory: %s" % (shown(path), shown(directory)))
        if not os.access(directory, os.W_OK | os.X_OK):
            _fail(path, OSError(errno.EACCES, os.strerror(errno.EACCES)))
        return
    except OSError as exc:
        _fail(path, exc)
    if stat.S_ISDIR(st.st_mode):
        _fail(path, OSError(errno.EISDIR, os.strerror(errno.EISDIR)))
    if not magic and not os.access(final, os.W_OK):
        _fail(path, OSError(errno.EACCES, os.strerror(errno.EACCES)))


def _is_fifo(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def _open_fd(path: str, flags: int) -> int:
    """``os.open`` for writing, but a FIFO with no reader is waited for ``FIFO_WAIT_S`` at most, not forever."""
    deadline = time.monotonic() + FIFO_WAIT_S
    while True:
        try:
            fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            if exc.errno != errno.ENXIO or not _is_fifo(path):  # ENXIO of a socket (/dev/stdout): at once
                _fail(path, exc)
            if time.monotonic() > deadline:
                raise TfnativeError("cannot write %s: no process opened the FIFO for reading within %.0f s"
                                    % (shown(path), FIFO_WAIT_S)) from None
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)  # writes wait for a slow reader, as a shell's '>' would
        return fd


def open_log(path: str) -> TextIO:
    """gdb's log (``--gdb-log FILE``), opened to append; ``cannot write PATH: why`` where it cannot be.

    A directory, a missing directory, EACCES, EROFS, a FIFO nobody reads: all
    refused here, before gdb starts.  A full disk (``/dev/full``) is found by
    the first line, written here at once.
    """
    check_output_name(path)
    fd = _open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
        f = os.fdopen(fd, "a", encoding="utf-8", errors="replace")
    except OSError as exc:
        os.close(fd)
        _fail(path, exc)
    try:
        f.write("%.3f -- tfnative: gdb's MI conversation\n" % time.monotonic())
        f.flush()
    except OSError as exc:
        with contextlib.suppress(OSError):
            f.close()
        _fail(path, exc)
    return f


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
    check_output_name(path)
    if is_stdout(path):
        try:
            sys.stdout.flush()
            yield sys.stdout.buffer
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise  # the reader is gone: run_command ends quietly
        except OSError as exc:
            _fail(path, exc)
        return
    final, magic = _resolve(path)
    try:
        st: Optional[os.stat_result] = os.stat(final)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        _fail(path, exc)
    if magic or (st is not None and not stat.S_ISREG(st.st_mode)):
        if st is not None and stat.S_ISDIR(st.st_mode):
            _fail(path, OSError(errno.EISDIR, os.strerror(errno.EISDIR)))
        with _open_special(path) as stream:
            yield stream
        return
    if st is not None and not os.access(final, os.W_OK):  # a read-only file: refused, as a shell's '>' would
        _fail(path, OSError(errno.EACCES, os.strerror(errno.EACCES)))
    if st is None and not os.path.isdir(os.path.dirname(final) or "."):
        raise TfnativeError("cannot write %s: no such directory: %s" % (shown(path), shown(os.path.dirname(final))))
    with _replace(path, final, st) as stream:
        yield stream


@contextlib.contextmanager
def _open_special(path: str) -> Iterator[BinaryIO]:
    """Open a FIFO, device or magic link for writing, as a shell's ``>`` would; write our own stream in place.

    An ``OSError`` writing or closing it (``/dev/full``: ENOSPC; ``/proc/version``: EIO) is ``cannot write
    PATH``; a reader that went away (EPIPE) stays a ``BrokenPipeError``, for ``run_command``."""
    fd = _open_fd(path, os.O_WRONLY | os.O_CREAT)
    try:
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
        except OSError:
            os.close(fd)
            raise
        with os.fdopen(fd, "wb") as f:
            yield f
    except BrokenPipeError:
        raise
    except OSError as exc:
        _fail(path, exc)


@contextlib.contextmanager
def _replace(path: str, final: str, st: Optional[os.stat_result]) -> Iterator[BinaryIO]:
    """Write ``final`` through a temporary file beside it and rename it into place."""
    directory = os.path.dirname(final) or "."
    try:
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(final) + ".", suffix=".tfnative-tmp", dir=directory)
    except OSError as exc:
        _fail(path, exc)
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
            _fail(path, exc)
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


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is (``os.stat``'s mode), in a message's words: the one phrase
    for each kind, for inputs a user names (``open_input``) and files a core names (``core.binary.mapfile``)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a pipe or FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


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
                             % file_kind(mode))
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise InputError(name, exc.strerror or str(exc)) from None
        raise
    return Input(name, fd, not regular, timeout)
