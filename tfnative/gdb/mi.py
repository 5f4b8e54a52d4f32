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
import ctypes
import os
import shutil
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional

from ..errors import GdbDied, GdbError, TfnativeError

PR_SET_PDEATHSIG = 1
WATCH_S = 0.05  # how often ``Gdb.watch`` is called while an answer is waited for
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
        self._token = 0
        self._lock = threading.Condition()
        self._results: Dict[int, Dict[str, Any]] = {}
        self._events: Deque[Dict[str, Any]] = collections.deque()
        self.console: Deque[str] = collections.deque(maxlen=400)
        self.dead = False
        # Called every WATCH_S while a command's answer or an event is waited for; it raises to end the wait
        # (``control.watch_target``: the target exited, and gdb may never answer).
        self.watch: Optional[Callable[[], None]] = None
        self._log = open(debug_log, "a") if debug_log else None
        self._reader = threading.Thread(target=self._read_loop, name="gdb-mi-reader", daemon=True)
        self._reader.start()
        self._stderr = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr.start()

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
            if self._log:
                self._log.write("%.3f <- %s\n" % (time.monotonic(), line[:2000]))
                self._log.flush()
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
                if token in self._results:
                    # A second record for one command: gdb answered ``-exec-continue`` with ``^running``,
                    # then failed to resume a thread of a process that is dying (``^error,msg="Couldn't get
                    # registers: No such process."``).  The first is the answer; the program's end follows.
                    self.console.append("gdb, after answering command %d: %s\n" % (
                        token, (rec.get("payload") or {}).get("msg", rec.get("message"))))
                else:
                    self._results[token] = rec
            elif rec.get("type") in ("console", "log", "output", "target"):
                if isinstance(rec.get("payload"), str):
                    self.console.append(rec["payload"])
            elif rec.get("type") == "notify":
                self._events.append(rec)
            self._lock.notify_all()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.console.append(raw.decode("utf-8", "replace"))

    # -- commands --------------------------------------------------------
    def command(self, cmd: str, timeout: float = 60.0) -> Dict[str, Any]:
        """Send one MI command and return its result record's payload."""
        with self._lock:
            if self.dead:
                raise GdbDied("gdb exited unexpectedly")
            self._token += 1
            token = self._token
        line = "%d%s\n" % (token, cmd)
        if self._log:
            self._log.write("%.3f -> %s" % (time.monotonic(), line))
            self._log.flush()
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
        if self._log:
            self._log.close()
            self._log = None

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
