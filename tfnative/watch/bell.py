"""What wakes the crash catcher's tracer thread from its sleep in ``waitid`` (``watch/tracer.py``): ``Bell``."""

from __future__ import annotations

import os
import shutil
import signal
import time
from typing import Optional

from ..sources import ptrace

__all__ = ["Bell"]


class Bell:
    """What wakes the tracer thread from its sleep in ``waitid``: a child of that thread (so that only it waits
    for it, ``WNOTHREAD``), ``cat`` reading a pipe only we write to.  A caller rings it with SIGSTOP; the tracer
    thread sees it stop, takes the stop and sends SIGCONT (``answer``) before it serves the requests, so that a
    later ring stops it again.  It ends with the tracer thread (``stop``), or with this process: the pipe's end
    is then its end of input."""

    def __init__(self, pid: int, pipe: int) -> None:
        self.pid = pid
        self.pipe = pipe

    @classmethod
    def start(cls) -> Optional[Bell]:
        cat = shutil.which("cat")
        if cat is None:
            return None
        read, write = os.pipe()
        try:
            pid = os.posix_spawn(cat, [cat], {}, file_actions=[(os.POSIX_SPAWN_DUP2, read, 0),
                                                               (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)],
                                 setpgroup=0, setsigmask=(), resetids=False)
        except OSError:
            os.close(write)
            return None
        finally:
            os.close(read)
        return cls(pid, write)

    def ring(self) -> None:
        try:
            os.kill(self.pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass

    def answer(self) -> None:
        try:
            ptrace.take_stop(self.pid)
        except ChildProcessError:
            return
        os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        """End it and reap it (on the tracer thread: its parent)."""
        if self.pipe >= 0:
            os.close(self.pipe)
            self.pipe = -1
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                if ptrace.take(self.pid) is not None:
                    return
            except ChildProcessError:
                return
            time.sleep(0.001)

