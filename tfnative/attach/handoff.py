"""The hand-off of ``attach --interactive``: the stopped target goes to a gdb on the user's terminal.

At the first hit (or fatal signal) the loop parks the target stopped and
detaches (``park``); ``interactive_gdb`` then runs gdb on the terminal,
attached to it, with ``tf-bt`` loaded.  When that gdb quits, the target runs on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from ..core import procfs
from ..gdb.breakpoints import CXA_THROW, throw_condition
from ..gdb.control import TF_BT_SCRIPT, substitutions
from ..gdb.mi import Gdb, end_with_parent, find_gdb
from ..sources.ptrace import ensure_not_stopped
from ..toolchain import bazelpaths
from .options import AttachOptions


def park(gdb: Gdb, pid: int) -> None:
    """Detach, leaving the target stopped for the next gdb.

    A SIGSTOP sent with kill() is swallowed by gdb's own stop/detach dance;
    ``queue-signal`` makes gdb hand SIGSTOP to the thread as it detaches it.
    """
    gdb.console_command("handle SIGSTOP nostop noprint pass")
    gdb.console_command("queue-signal SIGSTOP")
    gdb.command("-target-detach", timeout=30)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        state = procfs.state(pid)
        if state is None or state == "T":
            return
        time.sleep(0.01)


def interactive_gdb(opts: AttachOptions, pid: int) -> None:
    """Run gdb on the terminal, attached to the parked target, with tf-bt loaded.

    gdb shares our terminal and process group, so Ctrl-C reaches it as in any
    ``gdb -p``; tfnative ignores SIGINT meanwhile.  The user's own gdbinit is
    read.  When gdb quits it detaches and the script runs on.
    """
    exe = find_gdb(opts.gdb.gdb_path)
    argv = [exe, "-q",
            "-iex", "set debuginfod enabled %s" % ("on" if opts.gdb.debuginfod else "off"),
            "-ex", "source %s" % TF_BT_SCRIPT,
            "-ex", "set breakpoint pending on",
            # The SIGSTOP that parked the script is still pending: drop it silently.
            "-ex", "handle SIGSTOP nostop noprint nopass"]
    for d in opts.source_dirs:
        argv += ["-ex", "directory %s" % os.path.abspath(d)]
    for old, new in substitutions(opts.source_dirs, sys.stderr):  # the same guard as the MI session's
        argv += ["-ex", "set substitute-path %s %s" % (old, new)]
    for loc in opts.breaks:
        argv += ["-ex", "break %s" % loc]
    if opts.break_throw is not None:
        argv += ["-ex", "break %s if %s" % (CXA_THROW, throw_condition(opts.break_throw or None))]
    argv += ["-ex", "tf-bt", "-p", str(pid)]
    old_sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        subprocess.call(argv, preexec_fn=_default_sigint, cwd=bazelpaths.gdb_cwd(opts.source_dirs))
    finally:
        signal.signal(signal.SIGINT, old_sigint)
    ensure_not_stopped(pid)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    end_with_parent()
