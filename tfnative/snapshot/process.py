"""One live process's snapshot: ``tfnative stack --pid PID`` (and each process of a many-process stack).

Checks the pid (``check_pid``), takes its stacks by the one policy (``policy.py``:
the pipeline, else gdb; from the ``attach`` session that holds it, where one does; from the registers
of a process the crash catcher holds, ``take_held``),
samples them over time where asked: the capture, with the facts of the process its document carries
(``ProcessCapture``; the event and its verdict are analysis's: ``analysis/event.snapshot_document``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, TextIO

from ..core import procfs, ranks
from ..core.model import Capture, Document
from ..core.record import Record
from ..core.threads import Threads
from ..errors import PtraceRefused, TargetGone, TfnativeError, Unsupported
from ..sources import ptrace, sessionsock
from ..sources.base import ThreadRegs
from ..sources.permissions import ptrace_refused_message, tracer_name
from . import pipeline, samples
from .options import StackOptions
from .policy import take_alone, take_stacks, why, widened


def argv_of(pid: int) -> List[str]:
    """The command line of ``pid``; of a live thread when the leader is a zombie (it called pthread_exit)."""
    state = procfs.state(pid)
    if state is None:
        raise TfnativeError("process %d exited" % pid)
    argv = procfs.cmdline(pid)
    if argv or state != "Z":
        return argv
    try:
        tids = procfs.tids(pid)
    except ProcessLookupError:
        return []
    return next((argv for argv in (procfs.cmdline(pid, tid) for tid in tids) if argv), [])


def raise_if_exited(pid: int) -> None:
    """Raise "process N exited" when ``pid`` has exited (a failure then is not the kernel's or gdb's)."""
    if procfs.exited(pid):
        raise TfnativeError("process %d exited" % pid)


def live_task(pid: int) -> int:
    """``pid``, or a live thread of it when its leader has exited (``/proc/PID/mem``, maps are gone then)."""
    if procfs.state(pid) != "Z":
        return pid
    try:
        return next((tid for tid in sorted(procfs.tids(pid)) if procfs.state(pid, tid) not in (None, "Z")), pid)
    except ProcessLookupError:
        return pid


def by_pid(result: Capture, pid: int, task: int) -> Capture:
    """A capture read through ``task`` (``live_task``) said of ``pid``, with the warning where they differ."""
    if task != pid:
        result.pid = pid
        result.warnings.append("the main thread %d has exited (pthread_exit): the live threads are shown" % pid)
    return result


def check_pid(pid: int) -> str:
    """``pid``'s scheduler state (``procfs.state``), once it is known to be readable by us; TfnativeError says
    why not.  Read from ``/proc`` alone: the one-pid path loads nothing it does not use."""
    state = procfs.state(pid)
    if state is None:
        if os.path.isdir("/proc/%d" % pid):
            raise TfnativeError("process %d is not yours: %s" % (pid, ptrace_refused_message(pid)))
        raise TfnativeError("no process with pid %d" % pid)
    if state == "Z" and procfs.exited(pid):  # not a leader gone by pthread_exit, whose threads live
        raise TfnativeError("process %d is a zombie: it has exited" % pid)
    if pid == os.getpid():
        raise TfnativeError("tfnative cannot inspect itself")
    if procfs.kernel_thread(pid):
        raise TfnativeError("process %d (%s) is a kernel thread: it has no user memory, no stack to read"
                            % (pid, procfs.comm(pid)))
    try:
        fields = procfs.status(pid)
        real, effective = (int(u) for u in fields["Uid"].split()[:2])
        if os.geteuid() != 0 and os.geteuid() not in (real, effective):
            raise TfnativeError("process %d belongs to another user: run tfnative as that user or root" % pid)
        tracer = procfs.tracer(pid)
        if tracer and not sessionsock.serves(pid):
            raise TfnativeError("process %d is already being traced by PID %d (%s): a debugger, or another "
                                "tfnative, holds it; run again once it has let go" % (pid, tracer, tracer_name(tracer)))
    except (OSError, ValueError, KeyError):
        pass
    return state


@dataclass(repr=False, eq=False)
class ProcessCapture(Record):
    """One live process as ``stack`` takes it: its document's facts of the process (argv, ``host``,
    ``scheduler``, ``task``; no event yet), its capture, and its cluster (``ranks.cluster_of``) where one is
    known.  ``analysis/event.snapshot_document`` makes the document users read of it."""

    doc: Document
    capture: Capture
    cluster: Optional[Dict[str, Any]]


def capture_process(pid: int, opts: StackOptions, err: TextIO,
                    sleep: Callable[[float], None] = time.sleep) -> ProcessCapture:
    """The snapshot of ``pid`` (the last of ``--samples``) and the facts of the process its document carries.

    Raises TfnativeError when ``pid`` cannot be read (gone, not ours), ``Interrupted`` on a signal
    (or from ``sleep``, which waits between samples).  Safe to call from several threads at once, each
    for another pid (``many.snapshot_all``).
    """
    was_stopped = check_pid(pid) == "T"  # stopped by job control: it stays stopped
    doc = Document(argv=argv_of(pid), pid=pid)
    env = procfs.environ(pid)
    doc.host = os.uname().nodename  # gethostname(), without loading socket
    doc.scheduler = ranks.scheduler_of(env)

    def one() -> Capture:
        if opts.nonblocking:
            return take_nonblocking(pid, opts)
        return take_once(pid, opts, was_stopped, err)

    def say(i: int) -> None:
        err.write("tfnative: sample %d of %d\n" % (i, opts.samples))
        err.flush()

    if opts.samples > 1:
        result = samples.take(opts.samples, opts.interval, one, sleep=sleep, on_sample=say)
    else:
        result = one()
    doc.task = ranks.task_of(env, result.tf_config)  # result's: set by the program itself in its os.environ
    return ProcessCapture(doc, result, ranks.cluster_of(env, result.tf_config))


def take_nonblocking(pid: int, opts: StackOptions) -> Capture:
    """``stack --no-pause``: never stops the process, so never through gdb (``pipeline.take_nonblocking``)."""
    try:
        task = live_task(pid)
        result = widened(lambda which: pipeline.take_nonblocking(task, which, opts.variables), opts.which)
        result.pid = pid
        return result
    except Unsupported as exc:
        raise_if_exited(pid)
        raise TfnativeError("--no-pause: cannot read process %d without stopping it: %s" % (pid, exc))


def take_once(pid: int, opts: StackOptions, was_stopped: bool, err: TextIO) -> Capture:
    """One snapshot of ``pid`` by the policy: the pipeline, else (or with ``--with-gdb``) through gdb; from the
    ``attach`` session that holds it, where one does (``sessionsock.py``)."""
    if sessionsock.serves(pid):
        err.write("tfnative: process %d is held by a tfnative attach session: the snapshot comes from it\n" % pid)
        return sessionsock.ask(pid, opts.which, opts.variables)
    task = live_task(pid)  # the process's files, read through a live thread

    def fast(which: Threads) -> Capture:
        try:
            result = pipeline.take(task, which, opts.variables)
        except TargetGone:
            raise TargetGone(pid) from None  # by the pid asked for (``task`` may be a thread of it)
        finally:
            if not was_stopped:
                ptrace.ensure_not_stopped(pid, states=("t",))  # a SIGSTOP it got while held is not ours
        return by_pid(result, pid, task)

    def through_gdb(which: Threads) -> Capture:
        from . import withgdb  # gdb's machinery, loaded only where the policy needs it

        raise_if_exited(pid)
        try:
            return withgdb.stack_of_pid(pid, which, opts.gdb, was_stopped, err, opts.variables)
        except TargetGone:
            raise
        except TfnativeError:
            if procfs.exited(pid):  # gdb's failure is the process's end
                raise TargetGone(pid) from None
            raise

    def fallback(exc: BaseException) -> None:
        raise_if_exited(pid)  # gone meanwhile (stack on many processes): say so, not "through gdb"
        err.write("tfnative: taking the snapshot through gdb: %s\n" % why(exc))

    def refused(exc: PtraceRefused) -> Exception:  # gdb's attach would be refused the same way, only slower
        return TfnativeError(ptrace_refused_message(pid, str(exc)))

    return take_stacks(opts.which, fast, through_gdb, fallback, with_gdb=opts.with_gdb, widen=True,
                       refused=refused)


def take_held(pid: int, threads: List[ThreadRegs], which: Threads, selected: Optional[int] = None,
              failed: Optional[Callable[[BaseException], TfnativeError]] = None) -> Capture:
    """The stacks of ``pid`` while a tracer of ours holds it (``tfnative watch``'s crash catcher: ``threads``, the
    registers it read), by the policy: the pipeline (``of_stopped``), read through a live thread where the leader
    has exited, as ``stack`` does; nothing takes over (gdb cannot attach), so a library with its own DWARF is
    named from its symbol table (a warning says so) and ``SELECTED`` (``selected``, the thread that stopped) is
    not widened.  A failure is ``failed(exc)`` (by default: "cannot read the stacks of process N")."""
    task = live_task(pid)

    def fast(which: Threads) -> Capture:
        return by_pid(pipeline.of_stopped(task, threads, which, selected, dwarf_aside=False), pid, task)

    def cannot(exc: BaseException) -> TfnativeError:
        return TfnativeError("cannot read the stacks of process %d: %s" % (pid, exc))

    return take_alone(which, fast, failed or cannot, widen=selected is None)
