"""The progress line: on a terminal (a real pty) after a second, erased at the end; never on a pipe or a file."""

import io
import os
import pty
import time

from tfnative.progress import progress


def _read_all(fd):
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out.decode()


def _on_a_terminal(what, seconds, detail=None):
    """What ``progress(what)`` writes on a real pty around ``seconds`` of work."""
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    with os.fdopen(slave, "w") as tty:
        with progress(what, tty) as shown:
            if detail:
                shown.update(detail)
            time.sleep(seconds)
        text = _read_all(master)
    os.close(master)
    return text


def test_a_terminal_sees_long_work_then_the_line_is_erased():
    text = _on_a_terminal("reading symbols", 1.6, "3 of 9 libraries")
    assert "\rtfnative: reading symbols... 3 of 9 libraries, 1 s" in text
    assert text.endswith("\r\x1b[K")


def test_short_work_shows_nothing():
    assert _on_a_terminal("quick", 0.2) == ""


def test_a_pipe_or_a_file_never_gets_progress():
    r, w = os.pipe()
    os.set_blocking(r, False)
    with os.fdopen(w, "w") as pipe:
        with progress("slow", pipe):
            time.sleep(1.3)
    assert _read_all(r) == ""
    os.close(r)
    buf = io.StringIO()
    with progress("slow", buf):
        time.sleep(1.2)
    assert buf.getvalue() == ""
