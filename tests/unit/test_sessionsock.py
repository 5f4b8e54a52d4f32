"""The attach session's socket on its own (real abstract Unix sockets, no gdb): one request, one answer.

``stack``'s side (``ask``, ``serves``) believes only the process whose gdb traces the target: a listener
on the address of a process nobody traces is not asked.  The real exchange with a session is in
``tests/integration/test_session_socket.py``.
"""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest

from tfnative.core.threads import Threads
from tfnative.errors import TfnativeError
from tfnative.sources import sessionsock

PID = os.getpid()  # a process nobody traces


def raw_ask(request: dict) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(sessionsock.address(PID))
        sock.sendall((json.dumps(request) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def test_request_answered_through_the_loop():
    asked = []

    def post(request):
        asked.append((request["which"], request["locals"]))
        threading.Thread(target=request["reply"], args=({"threads": [], "pid": PID},)).start()

    server = sessionsock.Server(PID, post)
    try:
        assert json.loads(raw_ask({"which": "all", "locals": True})) == {"threads": [], "pid": PID}
        assert json.loads(raw_ask({"which": "bogus"}))["pid"] == PID
        assert asked == [(Threads.ALL, True), (Threads.PYTHON, False)]  # anything but "all" is "python"
    finally:
        server.close()
    with pytest.raises(ConnectionRefusedError):  # gone with the session: no file, nothing to remove
        raw_ask({"which": "python"})


def test_a_listener_for_an_untraced_process_is_not_believed():
    server = sessionsock.Server(PID, lambda request: request["reply"]({"pid": 1}))
    try:
        assert not sessionsock.serves(PID)
        with pytest.raises(TfnativeError, match="no tfnative attach session answers"):
            sessionsock.ask(PID, Threads.PYTHON, False)
    finally:
        server.close()


def test_a_session_that_ends_before_answering_closes_the_connection():
    server = sessionsock.Server(PID, lambda request: threading.Timer(0.2, server.close).start())
    assert raw_ask({"which": "python"}) == b""


def test_one_session_per_target():
    server = sessionsock.Server(PID, lambda request: None)
    try:
        with pytest.raises(OSError):
            sessionsock.Server(PID, lambda request: None)
    finally:
        server.close()
