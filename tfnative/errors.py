"""The exception types other layers act on, and how our own signals become one.

(A reader's own failure, caught by the layer that calls it, is defined beside the reader in ``core/``:
``ElfError`` in ``core/binary/elf.py``, ``CfiError``, ``Unreadable``, ``UnsupportedLayout``.)

Three families, told apart by type (never by the order of ``except`` clauses):

- ``TfnativeError`` reaches the user as one line (``tfnative: <message>``) and an exit code.
  ``GdbError``, ``GdbDied``, ``CoreError``, ``InputError`` and ``TargetGone`` are kinds of it.
- ``Unsupported`` means "the gdb-free path cannot take this snapshot; gdb can": the snapshot
  policy (``snapshot/policy.py``) answers it by taking the stack through gdb.  ``HasDebugInfo``
  is the one case where gdb gives more (source lines, inlined frames) rather than anything at all.
- ``PtraceRefused`` means the kernel refused to let us read or trace the process: gdb would be
  refused the same way, so it is no reason to fall back (the caller says why and how to fix it).

``Interrupted`` is our own SIGINT/SIGTERM/SIGHUP while we hold a process (``SignalGuard``), so
that every mode lets go of its target before it exits.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any, Callable, Dict, Optional, Union


class TfnativeError(Exception):
    """A problem the user can act on; the CLI prints ``tfnative: <message>`` and exits."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class GdbError(TfnativeError):
    """gdb answered ``^error``."""


class GdbDied(TfnativeError):
    """gdb exited or crashed under us."""


class TargetGone(TfnativeError):
    """The process exited while tfnative read it (held it, or waited for gdb to attach): it was let go."""

    def __init__(self, pid: int) -> None:
        super().__init__("process %d exited while it was being read" % pid)
        self.pid = pid


class CoreError(TfnativeError):
    """A core file that cannot be read (missing, not an ELF core, cut short, cannot be decompressed)."""


class InputError(TfnativeError):
    """An input file the user named cannot be read (``files.open_input``): ``path`` and ``reason`` apart, so that
    a command can say it in its own words (``core``: ``PATH: no such file``)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__("cannot read %s: %s" % (path, reason))
        self.path, self.reason = path, reason


class Unsupported(Exception):
    """The gdb-free path cannot take this snapshot: the caller falls back to gdb."""


class HasDebugInfo(Unsupported):
    """A library on a stack has its own DWARF: gdb gives its source lines and inlined frames."""


class PtraceRefused(Exception):
    """ptrace (or ``/proc/PID/mem``) was refused: permissions, Yama, another tracer.  gdb would be refused too."""


class Interrupted(Exception):
    """Our own SIGINT, SIGTERM or SIGHUP arrived while we held a process (raised by ``SignalGuard``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_Handler = Union[Callable[[int, Optional[FrameType]], Any], int, None]


class SignalGuard:
    """Turn SIGINT/SIGTERM/SIGHUP into an ``Interrupted`` exception in the main thread (the first one only)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> SignalGuard:
        self.old: Dict[signal.Signals, _Handler] = {s: signal.getsignal(s) for s in self.SIGNALS}
        self.count = 0

        def handler(signum: int, frame: Optional[FrameType]) -> None:
            self.count += 1
            if self.count == 1:
                raise Interrupted(signum)

        for s in self.SIGNALS:
            signal.signal(s, handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self.old.items():
            signal.signal(s, h)


def shown(text: str) -> str:
    """``text`` (a path, a user's string) as an error line shows it: as it is, unless a control character in it
    would break the line (a newline in a file name; any character Python's ``repr`` would escape), then each
    such character escaped as ``repr`` writes it (``\\n``, ``\\t``, ``\\x1b``, ``\\u2028``) and a backslash
    doubled, so that the line stays one and says what was there.  ``cli/util.run_command`` shows every error
    message through it."""
    if text.isprintable():
        return text
    out = []
    for c in text:
        if c == "\\":
            out.append("\\\\")
        elif not c.isprintable():
            out.append(repr(c)[1:-1])
        else:
            out.append(c)
    return "".join(out)


# The signals whose handlers raise (``SignalGuard``): blocked while a thread starts.
_RAISING = SignalGuard.SIGNALS


def start_thread(thread: threading.Thread) -> None:
    """``thread.start()``, with no signal handler raising inside it.

    An exception a handler raises while ``Thread.start`` waits for the new thread (Ctrl-C, a job scheduler's
    SIGTERM: ``SignalGuard``) makes ``start`` drop the thread from ``threading``'s books while the thread still
    starts, which then prints a traceback of its own (``KeyError`` in ``_bootstrap_inner``).  The signals are
    held for that moment and delivered, to the main thread, right after."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _RAISING)
    except (OSError, ValueError):  # no signal masks here: start it as it is
        thread.start()
        return
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
