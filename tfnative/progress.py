"""A progress line on stderr for work that takes more than a second, only where stderr is a terminal.

``with progress("reading symbols through gdb"):`` shows nothing for work done within ``AFTER_S``;
after that, one line rewritten in place (``tfnative: reading symbols through gdb... 3 s``) until the
work ends, when the line is erased.  Where stderr is a file or a pipe, nothing is written: a log keeps
only what tfnative says, not its progress.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Optional, TextIO, Type

AFTER_S = 1.0  # work shorter than this shows no progress at all
EVERY_S = 0.25


class progress:  # noqa: N801 - used as a context manager, like open()
    """The progress of one piece of work (see the module's docstring); ``update(detail)`` adds what is done
    so far (``"120 of 512 MB"``)."""

    def __init__(self, what: str, stream: Optional[TextIO] = None) -> None:
        self.what = what
        self.detail = ""
        self.stream = stream if stream is not None else sys.stderr
        self.shown = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def __enter__(self) -> progress:
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        if tty:
            self._thread = threading.Thread(target=self._run, name="tfnative-progress", daemon=True)
            self._thread.start()
        return self

    def update(self, detail: str) -> None:
        self.detail = detail

    def _run(self) -> None:
        started = time.monotonic()
        if self._stop.wait(AFTER_S):
            return
        while not self._stop.is_set():
            with self._lock:
                self.stream.write("\rtfnative: %s... %s%d s\x1b[K" % (
                    self.what, self.detail + ", " if self.detail else "", time.monotonic() - started))
                self.stream.flush()
                self.shown = True
            self._stop.wait(EVERY_S)

    def __exit__(self, kind: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self.shown:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
