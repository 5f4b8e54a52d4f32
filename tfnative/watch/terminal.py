"""A watch that writes its reports to files outlives its terminal (``--out DIR``, ``--json FILE``).

A watchdog started from a shell whose session ends (an ``ssh`` that drops, a closed terminal window, a pipe
whose reader has exited: ``tfnative watch --out rep job.py | head``) must not end with it: the job runs on, and
its hang report is what the files are for.  So, where the watch writes files:

* its standard output and error are ``Outliving`` streams: a write that fails (``EPIPE``: the reader has gone;
  ``EIO``: the terminal has hung up) is said once on standard error, where that still works, and the stream's
  file descriptor is pointed at ``/dev/null`` (the watcher's own, not the job's), so that nothing written later,
  nor the interpreter's last flush, fails again;
* SIGHUP is passed on to a launched job as before (``job.forward``: the job's outcome is its own), but does not
  end the watch (``loop.Watch.run``), which says so once.

Without files to write, both end the watch as they always did.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional, TextIO, Tuple, cast


class Outliving:
    """``stream`` (on file descriptor ``fd``), silenced for good once a write to it fails (see the module);
    ``lost(what)`` is called once then, with what happened (``standard output: Broken pipe``)."""

    def __init__(self, stream: TextIO, name: str, lost: Optional[Callable[[str], None]] = None) -> None:
        self.stream, self.name, self.lost = stream, name, lost
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.stream.write(text)
            except OSError as exc:
                self._lose(exc)
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except OSError as exc:
                self._lose(exc)

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...: the stream's
        return getattr(self.stream, name)

    def _lose(self, exc: OSError) -> None:
        self.gone = True
        try:
            fd = self.stream.fileno()
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, fd)
            finally:
                os.close(null)
            self.stream.flush()  # what the failed write left in the buffer: to /dev/null now
        except (OSError, ValueError):
            pass
        if self.lost is not None:
            self.lost("%s: %s" % (self.name, exc.strerror or exc))


def outliving(out: TextIO, err: TextIO, where: str) -> Tuple[TextIO, TextIO]:
    """``out`` and ``err`` as ``Outliving`` streams; a lost standard output is said on ``err`` (once), with
    ``where`` the reports still go."""
    err_stream = Outliving(err, "standard error")

    def said(what: str) -> None:
        err_stream.write("tfnative: watch: %s: the watch goes on, its reports written to %s\n" % (what, where))
        err_stream.flush()

    return cast(TextIO, Outliving(out, "standard output", said)), cast(TextIO, err_stream)
