"""Drive gdb over GDB/MI: tokens, matched result records, asynchronous events.

pygdbmi parses the MI records; we do not use its ``write()``, which waits for a
quiet period after every command and cannot tell which reply answers which
command.  Instead every command carries a token and ``command()`` waits for the
result record with that token; ``*stopped`` and the other asynchronous records
are queued for ``wait_stopped()``.

gdb runs in its own session (a Ctrl-C on the terminal is the target's and
ours, never gdb's) and dies with us (``PR_SET_PDEATHSIG``), or, for a process
it attached to, outlives us just long enough to detach from it.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Set, TextIO

from ..errors import GdbDied, GdbError, TfnativeError, shown, start_thread
from ..files import open_log

PR_SET_PDEATHSIG = 1
WATCH_S = 0.05  # how often ``Gdb.watch`` is called while an answer is waited for
RESUME_FAILED = "tfnative-resume-failed"  # the event queued when gdb fails a resume it answered ^running to
_libc = None


def prctl(option: int, arg: int) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return int(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0))


def end_with_parent() -> None:  # runs in the child between fork and exec
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def mi_quote(text: str) -> str:
    """Quote a string as an MI c-string: every user string goes through here."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 32:
            out.append("\\%03o" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_parse_response: Optional[Callable[[str], Dict[str, Any]]] = None


def parse_line(line: str) -> Dict[str, Any]:
    """One MI line as pygdbmi parses it; a line it cannot parse is console text."""
    global _parse_response
    if _parse_response is None:  # loaded with gdb's first line: `stack` without gdb pays none (nor logging)
        from pygdbmi.gdbmiparser import parse_response

        _parse_response = parse_response
    try:
        return _parse_response(line)
    except Exception:
        return {"type": "output", "payload": line, "token": None}


def result_payload(rec: Dict[str, Any]) -> Dict[str, Any]:
    """A result record's payload; ``^error`` raises ``GdbError`` with gdb's message."""
    if rec.get("message") == "error":
        raise GdbError((rec.get("payload") or {}).get("msg", "unknown gdb error"))
    return rec.get("payload") or {}


def find_gdb(path: Optional[str] = None) -> str:
    exe = shutil.which(path or "gdb")
    if exe is None:
        raise TfnativeError(
            "gdb not found%s: install it (Debian/Ubuntu: 'sudo apt-get install gdb'; "
            "Fedora: 'sudo dnf install gdb') or pass --gdb PATH" % (" at %r" % path if path else "")
        )
    return exe


class Gdb:
    """One gdb process in MI mode."""

    def __init__(self, gdb_path: str, early: List[str], debug_log: Optional[str] = None,
                 cwd: Optional[str] = None, die_with_parent: bool = True) -> None:
        """``die_with_parent`` False: gdb outlives us and, reading the end of its input, detaches and quits."""
        argv = [gdb_path, "--interpreter=mi3", "-nx", "-q"]
        for cmd in early:
            argv += ["-iex", cmd]
        self.argv = argv
        # The log first: a log that cannot be written is one error line before gdb starts (``files.open_log``).
        self._log: Optional[TextIO] = open_log(debug_log) if debug_log is not None else None
        self.log_path = debug_log
        self.log_error: Optional[str] = None  # why the log stopped, where it could not be written any more
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=end_with_parent if die_with_parent else None,
                close_fds=True,
                cwd=cwd,
            )
        except BaseException:
            if self._log is not None:
                self._log.close()
            raise
        self._token = 0
        self._lock = threading.Condition()
        self._results: Dict[int, Dict[str, Any]] = {}
        self._running: Set[int] = set()  # the command answered ``^running`` last (a late ``^error`` may follow)
        self._events: Deque[Dict[str, Any]] = collections.deque()
        self.console: Deque[str] = collections.deque(maxlen=400)
        self.said = 0  # how many lines ``console`` ever had (``said_since``)
        self.dead = False
        # Called every WATCH_S while a command's answer or an event is waited for; it raises to end the wait
        # (``control.watch_target``: the target exited, and gdb may never answer).
        self.watch: Optional[Callable[[], None]] = None
        self._reader = threading.Thread(target=self._read_loop, name="gdb-mi-reader", daemon=True)
        start_thread(self._reader)
        self._stderr = threading.Thread(target=self._drain_stderr, daemon=True)
        start_thread(self._stderr)

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- reading ---------------------------------------------------------
    def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line or line == "(gdb) ":
                continue
            self._write_log("%.3f <- %s\n" % (time.monotonic(), line[:2000]))
            self._take(line)
        with self._lock:
            self.dead = True
            self._lock.notify_all()

    def _take(self, line: str) -> None:
        """One line gdb wrote: a result for ``command``, console text, or an event for ``next_event``."""
        rec = parse_line(line)
        with self._lock:
            if rec.get("type") == "result" and rec.get("token") is not None:
                token = int(rec["token"])
                if token in self._results or token in self._running:
                    # A second record for one command: gdb answered ``-exec-continue`` with ``^running``,
                    # then failed to resume a thread of a process that is dying (``^error,msg="Couldn't get
                    # registers: No such process."``: the program's end follows), or could not put a
                    # breakpoint in (``Cannot insert breakpoint N`` / ``Cannot access memory at address 0x0``,
                    # then ``^error,msg="Command aborted."``: the target stays stopped and no ``*stopped``
                    # follows).  The first is the answer; the error is queued as a ``RESUME_FAILED`` event
                    # with gdb's last lines, for whoever waits for the target.
                    msg = (rec.get("payload") or {}).get("msg", rec.get("message"))
                    if rec.get("message") == "error" and token in self._running:
                        self._events.append({"type": "notify", "message": RESUME_FAILED,
                                             "payload": {"msg": msg, "lines": list(self.console)[-8:]}})
                    self._running.discard(token)
                    self._say("gdb, after answering command %d: %s\n" % (token, msg))
                else:
                    self._results[token] = rec
                    if rec.get("message") == "running":
                        self._running = {token}  # only the latest resume can still fail
            elif rec.get("type") in ("console", "log", "output", "target"):
                if isinstance(rec.get("payload"), str):
                    self._say(rec["payload"])
            elif rec.get("type") == "notify":
                self._events.append(rec)
            self._lock.notify_all()

    def _say(self, text: str) -> None:
        """One line of gdb's console, log or stderr text (the lock held)."""
        self.console.append(text)
        self.said += 1

    def said_since(self, mark: int) -> List[str]:
        """gdb's console and log lines since ``said`` was ``mark`` (the last 400 at most): what gdb said
        about the commands sent since then, while the target was stopped."""
        with self._lock:
            n = min(self.said - mark, len(self.console))
            return list(self.console)[len(self.console) - n:] if n > 0 else []

    def _write_log(self, text: str) -> None:
        """One line to ``--gdb-log``; a log that can no longer be written (a disk that filled up) stops, and
        ``log_error`` says why (a warning when gdb is closed): the session goes on without it."""
        log = self._log
        if log is None:
            return
        try:
            log.write(text)
            log.flush()
        except (OSError, ValueError) as exc:  # ValueError: closed meanwhile by ``close``
            self._log = None
            self.log_error = getattr(exc, "strerror", None) or str(exc)
            with contextlib.suppress(OSError, ValueError):
                log.close()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            text = raw.decode("utf-8", "replace")
            with self._lock:
                self._say(text)

    # -- commands --------------------------------------------------------
    def command(self, cmd: str, timeout: float = 60.0) -> Dict[str, Any]:
        """Send one MI command and return its result record's payload."""
        with self._lock:
            if self.dead:
                raise GdbDied("gdb exited unexpectedly")
            self._token += 1
            token = self._token
        line = "%d%s\n" % (token, cmd)
        self._write_log("%.3f -> %s" % (time.monotonic(), line))
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise GdbDied("gdb exited unexpectedly")
        deadline = time.monotonic() + timeout
        with self._lock:
            while token not in self._results:
                if self.dead:
                    raise GdbDied("gdb exited unexpectedly (while running %s)" % cmd.split()[0])
                left = deadline - time.monotonic()
                if left <= 0:
                    raise GdbError("gdb did not answer %s within %.0f s" % (cmd.split()[0], timeout))
                self._lock.wait(min(left, 0.5 if self.watch is None else WATCH_S))
                if self.watch is not None and token not in self._results:
                    self.watch()
            rec = self._results.pop(token)
        return result_payload(rec)

    def console_command(self, text: str, timeout: float = 60.0) -> Dict[str, Any]:
        return self.command("-interpreter-exec console %s" % mi_quote(text), timeout)

    def post(self, message: str, payload: Optional[Dict[str, Any]] = None) -> None:
        """Queue an event of our own (``{"message": message, "payload": payload}``) after gdb's; safe from a
        signal handler and from another thread."""
        with self._lock:
            self._events.append({"type": "notify", "message": message, "payload": payload or {}})
            self._lock.notify_all()

    def next_event(self, timeout: Optional[float]) -> Optional[Dict[str, Any]]:
        """The next asynchronous record (``*stopped``, ``=breakpoint-modified``...), or None."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                if self._events:
                    return self._events.popleft()
                if self.dead:
                    raise GdbDied("gdb exited unexpectedly")
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self._lock.wait(min(left, 0.25 if self.watch is None else WATCH_S))
                else:
                    self._lock.wait(0.25 if self.watch is None else WATCH_S)
                if self.watch is not None and not self._events:
                    self.watch()

    def wait_event(self, message: str, timeout: Optional[float]) -> Optional[Dict[str, Any]]:
        """Wait for the next asynchronous record named ``message``, dropping others."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            rec = self.next_event(left)
            if rec is None:
                return None
            if rec.get("message") == message:
                return rec.get("payload") or {}

    # -- ending ----------------------------------------------------------
    def close(self, timeout: float = 5.0) -> None:
        """Ask gdb to exit; kill it if it does not."""
        if self.proc.poll() is None:
            try:
                if not self.dead:
                    assert self.proc.stdin is not None
                    self.proc.stdin.write(b"-gdb-exit\n")
                    self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if f:
                    f.close()
            except OSError:
                pass
        log, self._log = self._log, None
        if log is not None:
            with contextlib.suppress(OSError):
                log.close()
        if self.log_error is not None and self.log_path is not None:
            sys.stderr.write("tfnative: warning: gdb's log %s stopped: %s\n" % (shown(self.log_path), self.log_error))
            self.log_error = None

    def kill(self) -> None:
        """SIGKILL gdb (its whole session): the kernel detaches what it traced."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        with self._lock:
            self.dead = True
            self._lock.notify_all()
