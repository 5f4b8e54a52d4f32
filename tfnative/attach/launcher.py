"""Start the user's script paused, exactly as ``EXE SCRIPT ARGS`` would run.

The child is a tiny trampoline that never touches the script's environment:

1. ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: if tfnative is killed (even with
   SIGKILL) the script goes with it instead of running on with gdb's
   breakpoint traps still in its code;
2. ``prctl(PR_SET_PTRACER, gdb_pid)``: under Yama ``ptrace_scope=1`` only an
   ancestor may attach, and gdb is our child, not the script's ancestor;
3. ``exec /bin/sh -c 'kill -STOP $$; exec "$0" "$@"' EXE SCRIPT ARGS``: the
   shell stops itself; gdb attaches to that small process (cheap to load),
   catches the ``exec`` of EXE and arms the breakpoints before the dynamic
   loader has run a single instruction of the script's process.

The script's process is therefore our direct child with our stdin, stdout,
stderr, cwd, environment and process group, and ``argv`` ``[EXE, SCRIPT, *ARGS]``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..core import procfs
from ..errors import TfnativeError

PR_SET_PTRACER = 0x59616D61

TRAMPOLINE = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0)
if os.getppid() != int(sys.argv[2]):
    os._exit(127)
libc.prctl(0x59616D61, ctypes.c_ulong(int(sys.argv[1])), 0, 0, 0)
os.execv("/bin/sh", ["sh", "-c", 'kill -STOP $$; exec "$0" "$@"'] + sys.argv[3:])
"""


@dataclass
class PythonInfo:
    exe: str
    version: Tuple[int, ...]


def probe_python(exe: str) -> PythonInfo:
    """Check that ``exe`` is a CPython 3.10..3.15 and return its version."""
    path = exe if os.sep in exe else (__import__("shutil").which(exe) or exe)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise TfnativeError("--python %s: no such executable" % exe)
    try:
        out = subprocess.run(
            [path, "-I", "-S", "-c",
             "import sys,platform;print(platform.python_implementation(),*sys.version_info[:3])"],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TfnativeError("--python %s is not a Python interpreter (%s)" % (exe, exc))
    parts = out.stdout.split()
    if out.returncode != 0 or len(parts) != 4 or not all(p.isdigit() for p in parts[1:]):
        raise TfnativeError("--python %s is not a Python interpreter" % exe)
    if parts[0] != "CPython":
        raise TfnativeError("--python %s is %s; tfnative reads CPython's frames only" % (exe, parts[0]))
    version = tuple(int(p) for p in parts[1:])
    if not (3, 10) <= version[:2] <= (3, 15):
        raise TfnativeError(
            "--python %s is Python %d.%d; tfnative supports CPython 3.10 to 3.15" % (exe, version[0], version[1])
        )
    return PythonInfo(path, version)


class PausedChild:
    """The script's process, stopped before its first instruction."""

    def __init__(self, python: str, target: Sequence[str], tracer_pid: int,
                 env: Optional[Dict[str, str]] = None) -> None:
        """``target``: what follows ``python`` on its command line (``SCRIPT ARGS`` or ``-m MODULE ARGS``)."""
        argv: List[str] = [sys.executable, "-I", "-S", "-c", TRAMPOLINE, str(tracer_pid), str(os.getpid()),
                           python, *target]
        self.proc = subprocess.Popen(argv, close_fds=False, env=env)
        self.pid = self.proc.pid
        self._status: Optional[int] = None

    def wait_paused(self, timeout: float = 30.0) -> None:
        """Wait until the trampoline shell has stopped itself."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise TfnativeError("could not start the script (launcher exited with %s)" % self.proc.returncode)
            if procfs.state(self.pid) in ("T", "t") and procfs.comm(self.pid) in ("sh", "dash", "bash"):
                return
            time.sleep(0.002)
        raise TfnativeError("the script's launcher did not pause within %.0f s" % timeout)

    def poll(self) -> Optional[int]:
        return self.proc.poll()

    def wait(self, timeout: Optional[float] = None) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def end_job_stop(self) -> None:
        """Clear the job-control stop of ``kill -STOP $$``, once the tracer holds the process.

        The kernel remembers a group stop (``SIGNAL_STOP_STOPPED``) until a
        SIGCONT, even after ptrace resumed the process.  Left set, it makes our
        process group one "with stopped jobs": if the group is orphaned later
        (the shell that started tfnative in the background exits), the kernel
        sends SIGHUP and SIGCONT to every member, and the script dies of a
        SIGHUP it would not have had without tfnative.  The SIGCONT sent here
        reaches the trampoline shell (the tracer passes it on; its default
        action is to do nothing) before it execs the script.
        """
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def resume_if_stopped(self) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def exit_status(returncode: int) -> int:
    """Shell convention: the exit code, or 128+N when signal N killed the process."""
    return 128 - returncode if returncode < 0 else returncode
