"""A running ``attach`` session answers ``tfnative stack --pid`` for the process it holds.

gdb traces the target of an ``attach`` session, so ``stack`` cannot hold it
itself.  The session listens on a Unix socket in Linux's abstract namespace
(``@tfnative-attach-UID-PID``: no file, so nothing is left behind even when
the session is killed with SIGKILL); ``stack`` finds it by the target's pid,
sends one request line (``{"which": "python"|"all", "locals": bool}``) and
reads one reply line: the snapshot, taken by the session the way its own
events are taken, or ``{"error": str}``.  Both ends check each other with
``SO_PEERCRED``: the session answers only its own user (or root), and
``stack`` believes only the process whose gdb traces the target (the parent
of the target's tracer), of its own user or root.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple, Union

from ..core import procfs
from ..core.model import Capture
from ..core.threads import Threads
from ..errors import TfnativeError, start_thread

if TYPE_CHECKING:  # socket loads where a session is there to talk to; `stack` of any other process never needs it
    import socket

REQUEST_LIMIT = 4096  # bytes of one request line
ANSWER_TIMEOUT = 120.0  # seconds a session may take to answer (it may be inside another stop's report)

# Request = (which, locals, reply): the session calls ``reply(result or {"error": ...})`` exactly once.
Request = Dict[str, Any]


def address(pid: int) -> str:
    """The abstract socket the session holding ``pid`` listens on."""
    return "\0tfnative-attach-%d-%d" % (os.geteuid(), pid)


def _peer(sock: socket.socket) -> Tuple[int, int]:
    """(pid, uid) of the other end."""
    import socket

    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                          struct.calcsize("3i")))
    return pid, uid


def _holder(pid: int) -> Optional[int]:
    """The process that runs the debugger tracing ``pid``: the parent of its tracer (None: not traced)."""
    try:
        tracer = procfs.tracer(pid)
        return int(procfs.status(tracer).get("PPid", "0")) if tracer else None
    except (OSError, ValueError):
        return None


def _connect(pid: int, timeout: float) -> Optional[socket.socket]:
    """A connection to the session that holds ``pid``, checked; None where there is none."""
    holder = _holder(pid)
    if holder is None:
        return None
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(address(pid))
        peer_pid, peer_uid = _peer(sock)
    except OSError:
        sock.close()
        return None
    if peer_pid != holder or peer_uid not in (os.geteuid(), 0):
        sock.close()
        return None
    return sock


def serves(pid: int) -> bool:
    """Whether a ``tfnative attach`` session of this user holds ``pid`` and listens."""
    sock = _connect(pid, 5.0)
    if sock is None:
        return False
    sock.close()
    return True


def ask(pid: int, which: Threads, variables: bool, timeout: float = ANSWER_TIMEOUT) -> Capture:
    """The session's snapshot of ``pid`` (a capture, as ``snapshot.take`` gives one)."""
    sock = _connect(pid, timeout)
    if sock is None:
        raise TfnativeError("process %d: no tfnative attach session answers for it" % pid)
    with sock:
        try:
            sock.sendall((json.dumps({"which": which.value, "locals": variables}) + "\n").encode())
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            raise TfnativeError("process %d is held by a tfnative attach session that did not answer in %d s"
                                % (pid, timeout)) from None
        except OSError as exc:
            raise TfnativeError("process %d is held by a tfnative attach session that does not answer (%s)"
                                % (pid, exc.strerror or exc)) from None
    if not data:
        raise TfnativeError("process %d: its tfnative attach session ended before it answered" % pid)
    try:
        reply = json.loads(data)
        if "error" in reply:
            raise TfnativeError("process %d: its tfnative attach session could not take the snapshot: %s"
                                % (pid, reply["error"]))
        return Capture.from_json(reply)
    except (ValueError, TypeError) as exc:
        raise TfnativeError("process %d: its tfnative attach session answered no snapshot (%s)" % (pid, exc)) from None


class Server:
    """The session's listener: each request goes to ``post(request)``, which the session's loop answers."""

    def __init__(self, pid: int, post: Callable[[Request], None]) -> None:
        import socket

        self.post = post
        self._closed = threading.Event()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(address(pid))
        except OSError:
            sock.close()
            raise
        sock.listen(4)
        sock.settimeout(0.5)
        self.sock: Optional[socket.socket] = sock
        self.thread = threading.Thread(target=self._serve, args=(sock,), name="tfnative-session-socket",
                                       daemon=True)
        start_thread(self.thread)  # errors.start_thread: no Interrupted inside Thread.start

    def _serve(self, sock: socket.socket) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            start_thread(threading.Thread(target=self._answer, args=(conn,), daemon=True))

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                _pid, uid = _peer(conn)
                if uid not in (os.geteuid(), 0):
                    return
                conn.settimeout(5.0)
                line = b""
                while b"\n" not in line and len(line) < REQUEST_LIMIT:
                    chunk = conn.recv(REQUEST_LIMIT)
                    if not chunk:
                        return
                    line += chunk
                request = json.loads(line.split(b"\n", 1)[0])
                which = Threads.ALL if request.get("which") == Threads.ALL.value else Threads.PYTHON
            except (OSError, ValueError, AttributeError):
                return
            done = threading.Event()
            answer: Dict[str, Any] = {}

            def reply(result: Union[Capture, Dict[str, Any]]) -> None:
                """The session's answer: its capture (sent as its JSON), or ``{"error": text}``."""
                answer.update(result.to_json() if isinstance(result, Capture) else result)
                done.set()

            self.post({"which": which, "locals": bool(request.get("locals")), "reply": reply})
            while not done.wait(0.5):
                if self._closed.is_set():
                    return
            try:
                conn.settimeout(ANSWER_TIMEOUT)
                conn.sendall((json.dumps(answer) + "\n").encode())
            except OSError:
                pass

    def close(self) -> None:
        """Stop answering (the abstract socket goes with its last descriptor)."""
        self._closed.set()
        if self.sock is not None:
            try:
                import socket

                self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() in _serve: the address is free at once
            except OSError:
                pass
            self.sock.close()
            self.sock = None
            if self.thread is not threading.current_thread():
                self.thread.join(2.0)
