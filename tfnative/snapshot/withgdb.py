"""Stacks taken through gdb: of a live pid (gdb starts, attaches, captures, detaches), of the target a gdb
holds at a stop, and what tfnative reads from memory beside gdb's frames.

The gdb half of the snapshot policy (``policy.py``); the core's gdb path is ``corefile/withgdb.py``.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, TextIO

from ..core import kstate, locks, procfs
from ..core.model import Capture, NativeFrame
from ..core.threads import Threads
from ..errors import GdbDied, GdbError, TargetGone, TfnativeError
from ..gdb import ops
from ..gdb.control import CAPTURE_TIMEOUT, attach, capture, detach, gdb_tail, start_gdb, watching
from ..gdb.mi import Gdb
from ..gdb.options import GdbOptions
from ..gdb.symbols import SymbolLoader
from ..progress import progress
from ..sources import modules, procmem, ptrace
from . import pipeline
from .policy import widened


def gdb_memory_facts(gdb: Gdb, result: Capture, letters: Optional[Dict[int, str]] = None) -> None:
    """What ``pipeline.stacks`` reads from memory beside the frames (each thread's C++ exception in flight, the
    lock it waits for), for a capture gdb took of a live process: the threads' registers from gdb, and each
    thread's stack pointer (``Capture.stack_pointers``, where TensorFlow's fatal log line is read from) and
    kernel state (``letters``: a live pid's scheduler letters, read before gdb stopped its threads; none at an
    ``attach`` stop, where tfnative's own capture gives none either), as tfnative's own capture has them."""
    if not result.pid:
        return
    try:
        regs = json.loads(gdb.command("-tfnative-registers --all-threads", timeout=CAPTURE_TIMEOUT)["json"])
        memory = procmem.Memory(result.pid)
    except (GdbError, KeyError, ValueError, OSError):
        return
    result.stack_pointers = {t["tid"]: t["regs"]["rsp"] for t in regs["threads"] if t["regs"].get("rsp")}
    if letters is not None:
        kstate.annotate(result.threads, letters, {t["tid"]: t["regs"] for t in regs["threads"]})
    try:
        try:
            pipeline.add_memory_facts(memory, modules.of_pid(result.pid),
                                      {t["tid"]: t["regs"] for t in regs["threads"]}, result)
        except (KeyError, OSError, MemoryError):
            pass
        _lock_objects(gdb, result, memory)
    except (OSError, MemoryError):
        pass
    finally:
        memory.close()


def _lock_objects(gdb: Gdb, result: Capture, memory: procmem.Memory) -> None:
    """The lock waits of a capture, completed from the lock objects gdb reads in the frames with DWARF (who
    holds the mutex a thread locks: ``locks.lock_objects_wait``).  Asked of gdb only where a thread's
    innermost frames lock a mutex (the walk reads every thread's frames)."""
    absl = [t.tid for t in result.threads if t.lock_wait is None and locks.absl_lock_frames(t.frames) is not None]
    if not absl and not any(t.lock_wait or locks.waits_in_mutex(t.frames) for t in result.threads):
        return
    try:
        found = json.loads(gdb.command(" ".join(["-tfnative-lock-objects"] + [str(tid) for tid in absl]),
                                       timeout=CAPTURE_TIMEOUT)["json"])
        objects = {int(t["tid"]): t for t in found["threads"]}
    except (GdbError, KeyError, ValueError, TypeError):
        return
    for t in result.threads:
        t.lock_wait = locks.lock_objects_wait(t.tid, objects, t.lock_wait, memory.read, t.frames)


def stack_of_pid(pid: int, which: Threads, gdb_opts: GdbOptions, was_stopped: bool, err: TextIO,
                 variables: bool = False) -> Capture:
    """``pid``'s stacks through a gdb of its own (started, attached, detached here); ``PYTHON`` widens to every
    thread where none runs Python.  The process runs on afterwards (stopped again if it was).  Every wait on
    gdb ends once the process exits (``TargetGone``, gdb killed: ``control.watching``)."""
    letters = kstate.states(pid)  # before gdb holds the threads, which makes every one "t"
    gdb = start_gdb(gdb_opts)
    attached = False
    try:
        with watching(gdb, pid):
            attach(gdb, pid)
            attached = True
            return _capture(gdb, pid, which, gdb_opts, err, variables, letters)
    except GdbDied:
        if procfs.exited(pid):
            raise TargetGone(pid) from None
        raise TfnativeError("gdb exited unexpectedly%s" % gdb_tail(gdb), exit_code=3)
    finally:
        if not gdb.dead and procfs.exited(pid):
            gdb.kill()  # Ctrl-C as the process exited: gdb may be waiting for it, and would not quit
        if attached:
            detach(gdb, running=False)
        gdb.close()
        if not was_stopped:
            ptrace.ensure_not_stopped(pid)


def _capture(gdb: Gdb, pid: int, which: Threads, gdb_opts: GdbOptions, err: TextIO, variables: bool,
             letters: Dict[int, str]) -> Capture:
    """The capture of ``stack_of_pid``, gdb attached."""
    loader = SymbolLoader(gdb, pid, [], gdb_opts.full_symbols, err)
    with progress("gdb reads the libraries' symbols"):
        skipped = loader.sync_for_snapshot()
    result = widened(lambda w: capture_which(gdb, w, variables), which)
    if _meets(result, skipped):
        # A frame in a library left without symbols (its return address was
        # not on the stack as read): read them all and look again.
        with progress("gdb reads every library's symbols"):
            loader.sync(full_list=True)
        result = widened(lambda w: capture_which(gdb, w, variables), which)
    loader.symbolize(result)
    ops.annotate(gdb, result)
    result.via = "gdb"
    gdb_memory_facts(gdb, result, letters)
    return result


def capture_which(gdb: Gdb, which: Threads, variables: bool = False) -> Capture:
    """gdb's capture of ``which`` threads of the target it holds stopped."""
    return capture(gdb, which is Threads.ALL, python_only=which is Threads.PYTHON, variables=variables)


def stacks_at_stop(gdb: Gdb, loader: Optional[SymbolLoader], which: Threads, variables: bool = False) -> Capture:
    """The stopped target's stacks through gdb: the new libraries' symbols read first, ops named, memory facts."""
    if loader is not None:
        with progress("gdb reads the new libraries' symbols"):
            loader.sync(full_list=True)
    result = capture_which(gdb, which, variables)
    if loader is not None:
        loader.symbolize(result)
    ops.annotate(gdb, result)
    result.via = "gdb"
    gdb_memory_facts(gdb, result)
    return result


def _meets(result: Capture, paths: List[str]) -> bool:
    """Whether a frame of the capture is in one of the libraries ``paths``."""
    names = {os.path.basename(p) for p in paths}
    return any(isinstance(f, NativeFrame) and f.library in names for t in result.threads for f in t.frames)
