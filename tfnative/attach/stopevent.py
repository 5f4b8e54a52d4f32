"""The event at one stop of an ``attach`` session: the stopped target's mixed stacks as a schema EVENT.

The loop (``attach/session.py``) calls ``make`` from its stop handlers; the
stacks come from tfnative's own unwinder (``snapshot/pipeline.py``) with the
registers gdb gives, or from gdb's capture where that path steps aside, and
``analysis.event.analyze`` turns them into the event (``model.Event``) the printer
and the JSON document share.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from ..analysis.event import analyze, in_flight_functions
from ..core.model import Capture, Event, EventKind, NativeFrame, Op
from ..core.tensorflow import executors, tflog
from ..core.threads import Threads
from ..errors import GdbError, PtraceRefused, Unsupported
from ..gdb import ops as tfops
from ..gdb.breakpoints import Breakpoints
from ..gdb.control import CAPTURE_TIMEOUT
from ..gdb.mi import Gdb
from ..gdb.symbols import SymbolLoader
from ..snapshot import pipeline, withgdb
from ..snapshot.policy import take_stacks, why
from ..sources import procmem


def make(gdb: Gdb, all_threads: bool, native_all: bool, loader: Optional[SymbolLoader], kind: EventKind,
         hang: bool = False, variables: bool = False, **extra: Any) -> Event:
    """An EVENT of ``kind`` for the stopped target: the thread that stopped (``all_threads``: every thread).

    An executor thread that stopped comes with the Python thread that called
    its tf.function, when only one is in flight.  ``extra`` goes into the
    event as is (``location``, ``signal``...); ``hang``: with its hang verdict (``analysis.event.analyze``);
    ``variables`` (``--locals``): the frames' arguments and locals.
    """
    return event_at(lambda which: stacks(gdb, loader, which, variables and which is not Threads.PYTHON), all_threads,
                    native_all, kind, hang=hang, **extra)


def event_at(take: Callable[[Threads], Capture], all_threads: bool, native_all: bool, kind: EventKind,
             hang: bool = False, **extra: Any) -> Event:
    """``make``'s event from the stacks ``take(which)`` gives of a stopped process (gdb's stop; the threads
    ``tfnative watch``'s crash catcher holds, ``watch/crash.py``), each capture with its ``stack_pointers``."""
    result = take(Threads.ALL if all_threads else Threads.SELECTED)
    in_flight = None
    if not all_threads and any(map(executors.runs_tf_work, result.threads)):
        # A thread running TensorFlow's work for Python stopped (an executor, a kernel, a tf.data runner):
        # which Python threads wait for it?  The caller of the tf.function it runs, when only one is in
        # flight, else the threads waiting inside TensorFlow (a tf.data iterator, Session.run) come with the
        # event: the user's line is there.
        python = take(Threads.PYTHON)
        in_flight = in_flight_functions(python)
        if len({fn.name for _, fn in in_flight}) == 1:
            waiting = {tid for tid, _ in in_flight}
        else:
            waiting = {t.tid for t in python.threads if executors.tf_wait(t)}
        result.threads = result.threads + [t for t in python.threads if t.tid in waiting]
        result.libraries = {**python.libraries, **result.libraries}
    event = analyze(kind, result, native_all=native_all, hang=hang, in_flight=in_flight, **extra)
    sp = result.stack_pointers.get(event.thread) if event.thread is not None else None
    if extra.get("signal") == "SIGABRT" and sp and result.pid:
        _add_fatal_log(event, result.pid, sp)
    return event


def _add_fatal_log(event: Event, pid: int, sp: int) -> None:
    """TensorFlow's own fatal log line (``Check failed: ...``) at an abort, from the process's memory."""
    try:
        memory = procmem.Memory(pid)
    except OSError:
        return
    try:
        line = tflog.fatal_line(memory.read, sp)
    finally:
        memory.close()
    if line:
        event.log = line


def stacks(gdb: Gdb, loader: Optional[SymbolLoader], which: Threads, variables: bool = False) -> Capture:
    """Mixed stacks of the stopped target (``which``: ``Threads``), by the one policy
    (``snapshot/policy.py``).

    gdb gives the registers and tfnative unwinds from CFI (``snapshot/pipeline.py``):
    nothing waits for gdb to read symbols.  Where that path steps aside (a
    library with its own DWARF, code without CFI) or ``--full-symbols`` asks
    for gdb, gdb reads the new libraries' symbols and captures.
    """
    def fast(which: Threads) -> Capture:
        try:
            every = "" if which is Threads.SELECTED else " --all-threads"
            regs = json.loads(gdb.command("-tfnative-registers" + every, timeout=CAPTURE_TIMEOUT)["json"])
        except GdbError as exc:
            raise Unsupported("gdb gave no registers: %s" % exc) from None
        threads = [(t["tid"], t["name"], t["regs"]) for t in regs["threads"]]
        result = pipeline.of_stopped(regs["pid"], threads, which, regs.get("selected_tid"), variables)
        result.stack_pointers = {t["tid"]: t["regs"].get("rsp") for t in regs["threads"]}
        return result

    def fallback(exc: BaseException) -> None:
        if loader is not None and not isinstance(exc, (Unsupported, PtraceRefused)):
            loader.err.write("tfnative: warning: capturing through gdb: %s\n" % why(exc))

    return take_stacks(which, fast, lambda which: withgdb.stacks_at_stop(gdb, loader, which, variables), fallback,
                       with_gdb=loader is None or loader.full)


def name_op_hit(event: Event, bps: Breakpoints) -> None:
    """A ``--break-op`` hit: the op is the one on the stopped kernel frame; count it under its type."""
    frames = event.threads[0].frames if event.threads else []
    op = next((f.op for f in frames if isinstance(f, NativeFrame) and f.op), None)
    if op is None:
        return
    event.op = Op(type=op.type, name=op.name)
    where = tfops.op_location(str(op.type))
    if where != event.location:
        bps.recount(event.location or "", where)
        event.location = where
