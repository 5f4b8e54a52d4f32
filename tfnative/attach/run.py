"""``tfnative attach``'s start: the target picked and checked (a script it launches, or ``--pid``), the document
begun, ``--break-op``'s pending op types, and the ``Session`` run over them (``attach/session.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import List, Optional, TextIO

from ..core import procfs
from ..core.model import Document
from ..errors import TfnativeError
from ..gdb import ops as tfops
from ..output import report
from ..snapshot.process import argv_of
from ..sources.modules import file_root
from .follow import Follower, FollowingTarget, ParentReport
from .launcher import probe_python
from .options import AttachOptions
from .session import Session
from .targets import LaunchedTarget, PidTarget, Target


def run_attach(opts: AttachOptions, err: TextIO, keep: Optional[List[Document]] = None) -> int:
    """``tfnative attach``: returns tfnative's exit status; ``keep`` receives the document.

    The status is the script's (128+N when signal N killed it); with
    ``--pid``, the process's when it ended while watched, 0 when tfnative
    let go of it after its hits, 128+N when our signal N interrupted us;
    ``--timeout`` gives 124.
    """
    printer = (ParentReport if opts.follow_children else report.Printer)(err, native_all=opts.native_all,
                                                                         full=opts.full)
    # first: where the kernel will not tell of new processes, --follow-children is refused before anything runs
    follower = Follower(opts, printer, err, Session) if opts.follow_children else None
    try:
        return _run_attach(opts, err, keep, printer, follower)
    finally:
        if follower is not None:
            follower.stop()


def _run_attach(opts: AttachOptions, err: TextIO, keep: Optional[List[Document]], printer: report.Printer,
                follower: Optional[Follower]) -> int:
    pid_target: Optional[PidTarget] = None
    if opts.pid is not None:
        pid_target = PidTarget(opts.pid)
        pid_target.check()
        python = pid_target.executable()
        try:
            argv = argv_of(opts.pid)
        except TfnativeError:
            argv = []
        doc = Document(argv=argv, pid=opts.pid, attached=True, has_exit=True)
    else:
        if opts.module is None and not os.path.isfile(opts.script or ""):
            raise TfnativeError("script not found: %s" % opts.script)
        info = probe_python(opts.python)
        doc = Document(argv=[info.exe, *opts.target_argv], has_exit=True)
        python = info.exe
    for d in opts.source_dirs:
        if not os.path.isdir(d):
            raise TfnativeError("--source-dir %s: no such directory" % d)
    origins_dir = tempfile.mkdtemp(prefix="tfnative-origins-") if opts.op_origins else None
    try:
        if origins_dir is not None:
            opts.switches.op_origins = os.path.join(origins_dir, "ops.jsonl")
        target: Target
        if pid_target is not None:
            target = pid_target
            env = procfs.environ(pid_target.pid)
        else:
            env = opts.switches.environment(dict(os.environ))
            target = LaunchedTarget(python, opts.target_argv, env)
        pending_ops, stock_dir = tfops.check_op_types(opts.break_ops, python, env,
                             tfops.loaded_tensorflow_dirs(pid_target.pid) if pid_target is not None else None)
        if follower is not None:
            target = FollowingTarget(target, follower)
        session = Session(opts, target, doc, printer, err)
        session.opbreaks.set_pending(pending_ops, stock_dir, err,
                                     _mapped_libraries(pid_target.pid) if pid_target is not None and pending_ops
                                     else ())
        return session.run(keep)
    finally:
        if origins_dir is not None:
            shutil.rmtree(origins_dir, ignore_errors=True)


def _mapped_libraries(pid: int) -> List[str]:
    """The files process ``pid`` has mapped executable, where this host reads them (``[]`` if unreadable)."""
    root = file_root(pid)
    try:
        rows = procfs.maps(pid)
    except OSError:
        return []
    return list(dict.fromkeys(root + r.path for r in rows if r.path and r.path.startswith("/") and "x" in r.perms))
