"""The readings ``tfnative watch`` judges progress by, taken without stopping anything.

``sample(pid)``: each thread's counters from ``/proc`` (``core/procfs.py``): CPU time (``schedstat``'s
nanoseconds, else ``stat``'s ticks), context switches and state (``status``), and the system call it is
blocked in (``syscall``: number and first argument).  No ptrace, no read of the process's memory.

``stack_keys(pid)``: the stacks read the ``--no-pause`` way (``pipeline.take_nonblocking``, no ptrace either),
as one signature per thread (``samples.signature``); a thread whose stack changed while it was read gets a key
of its own (it ran).  Only taken where the counters alone cannot tell (``analysis/progress.py``'s re-waiters).

``runtime_span(pid)``: where the interpreter's runtime state (``_PyRuntime``, the GIL's condition variable in
it) lies in ``pid``: the symbol's address and size in the file that defines it, at that file's load bias.  Read
once per process by the watch; a thread waiting on a futex inside it waits for the GIL
(``analysis/progress.py``).

``exit_state(pid)``: whether the program has ended and the process waits to exit (its main thread in
``threading._shutdown``, or the interpreter finalizing), read the ``--no-pause`` way.

``cluster_rank(pid)``: whether ``pid`` is a task of a TensorFlow cluster (its ``TF_CONFIG``); ``facts(pid, ...)``:
what a hang report's culprit is judged by beyond the snapshot (``analysis/culprit.py``).

``file_mark(path)``: a progress file's size and modification time.
"""

from __future__ import annotations

import os
import signal
import struct
import time
from typing import Any, Callable, Dict, FrozenSet, Optional, Set, Tuple

from ..core import frameclass, procfs, ranks
from ..core.binary.datasyms import data_symbol_extent
from ..core.binary.elf import ElfError
from ..core.kstate import ProcessFacts, ProcessSample, ThreadSample
from ..core.model import Capture, PythonFrame
from ..core.threads import PythonThreads, Threads
from ..errors import PtraceRefused, TfnativeError, Unsupported
from ..sources import modules, ptrace
from ..sources.live import LiveSource
from . import pipeline
from .samples import signature
from .stackcopy import inner_to_host

_NS_PER_TICK = 1e9 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def thread_sample(pid: int, tid: int) -> Optional[ThreadSample]:
    """One thread's counters; None when the thread is gone."""
    cpu = procfs.run_ns(pid, tid)
    if cpu is None:
        ticks = procfs.cpu_ticks(pid, tid)
        if ticks is None:
            return None
        cpu = int(ticks * _NS_PER_TICK)
    try:
        fields = procfs.status(pid, tid)
    except OSError:
        return None
    try:
        switches: Optional[int] = int(fields.get("voluntary_ctxt_switches", "0")) + int(
            fields.get("nonvoluntary_ctxt_switches", "0"))
    except ValueError:
        switches = None
    letter = (fields.get("State") or "?")[:1]
    call = procfs.syscall(pid, tid)
    wait: Optional[Tuple[int, str]] = None
    if call and call[0].isdigit() and len(call) > 1:  # "NR ARG1 ...": blocked in that call
        wait = (int(call[0]), call[1])
    # ``syscall`` is read after ``status`` and says more: "running" where the thread is runnable (it woke in
    # between: "S" would read as a thread that woke and moved on), a call where it sleeps in one (it blocked
    # in between).  Measured on a GIL waiter (200 wake-ups a second) beside a CI run: 138 of 15,524 readings
    # "S" then "running", 30 "R" then a futex.
    if call == ["running"]:
        letter = "R"
    elif wait is not None and letter == "R":
        letter = "S"
    return ThreadSample(tid, cpu, switches, letter, wait)


def sample(pid: int, clock: Callable[[], float] = time.monotonic) -> Optional[ProcessSample]:
    """Every thread's counters of ``pid``; None when the process is gone (or has exited: a zombie)."""
    try:
        tids = procfs.tids(pid)
    except (ProcessLookupError, OSError):
        return None
    if procfs.exited(pid):
        return None
    out = ProcessSample(pid, clock())
    for tid in tids:
        one = thread_sample(pid, tid)
        if one is not None:
            out.threads[tid] = one
    return out


TORN = "torn"  # the key of a stack torn by its thread running while it was read: unlike any other


# What a read of a process that runs on may end in: the process refused or gone, or a structure torn by a thread
# that changed it while it was read (a bound reached, an index past a table that was being rewritten).  The watch
# takes any of them as "not readable so now" and reads again at the next interval; it never ends the watch.
_NOT_NOW = (TfnativeError, Unsupported, PtraceRefused, OSError, ValueError, IndexError, KeyError, struct.error)


def _no_pause(pid: int) -> Optional[Capture]:
    """``pid``'s Python threads read the ``--no-pause`` way, or None where they cannot be read so now."""
    try:
        return pipeline.take_nonblocking(pid, Threads.PYTHON)
    except _NOT_NOW:
        return None


def stopped_by(pid: int) -> Optional[str]:
    """The name of the signal that stopped ``pid`` (state ``T``, nobody tracing it: ``sources/ptrace``'s
    ``group_stop_signal``), else None."""
    try:
        sig = ptrace.group_stop_signal(pid)
    except (OSError, Unsupported):
        return None
    return signal.Signals(sig).name if sig else None


def stack_keys(pid: int) -> Optional[Dict[int, Tuple[Any, ...]]]:
    """tid -> its stack's signature, read without stopping ``pid``; None when it cannot be read so."""
    capture = _no_pause(pid)
    if capture is None:
        return None
    return {t.tid: signature(t) if t.consistent is not False else (TORN, time.monotonic())
            for t in capture.threads}


SHUTDOWN = "the main thread waits in threading._shutdown for the program's non-daemon threads"
FINALIZING = "the interpreter is shutting down (Py_FinalizeEx has begun)"


def exit_state(pid: int) -> Optional[str]:
    """``SHUTDOWN`` where the main thread of ``pid`` is in ``threading._shutdown`` (the main script has ended; the
    interpreter waits for the non-daemon threads), ``FINALIZING`` where the interpreter is being torn down, else
    None (or where it cannot be read without stopping the process, or two readings differ)."""
    try:
        first, second = _main_frames(pid), _main_frames(pid)
    except _NOT_NOW:
        return None
    if first is None or first != second:  # a torn reading, or the main thread moved between the two
        return None
    finalizing, frames = first
    if finalizing:
        return FINALIZING
    if any(function in ("_shutdown", "threading._shutdown") and (file or "").endswith("threading.py")
           for function, file, _line in frames):
        return SHUTDOWN
    return None


def _main_frames(pid: int) -> Optional[Tuple[bool, Tuple[Tuple[str, Optional[str], Optional[int]], ...]]]:
    """Whether the interpreter of ``pid`` is finalizing, and its main thread's Python frames (function, file,
    line; innermost first), read as it runs and without any thread's native stack: the exit check of a process
    of a thousand threads reads one thread's frames (``take_nonblocking`` copies every thread's stack: 45 MB
    more for the watcher at 1,000 threads).  None where it runs no interpreter or its main thread has no
    thread state."""
    source = LiveSource(pid)
    source.nonblocking = True
    try:
        _libs, reader = pipeline.code_and_reader(source, [])
        if reader is None:
            return None
        if reader.finalizing():
            return True, ()
        inner = source.namespace_tids()
        for state in PythonThreads(reader, Capture(), inner, names=False).states:
            if inner_to_host(state.native_id, inner) == pid:
                reader.read_frames(state)
                return False, tuple((f.function, f.file, f.line) for group in state.groups for f in group)
        return None
    finally:
        source.close()


def runtime_span(pid: int) -> Optional[Tuple[int, int]]:
    """``[start, end)`` of ``_PyRuntime`` in ``pid`` (the executable or libpython that defines it, at its load
    bias); None where no mapped interpreter defines it (not Python, not yet Python, the process gone)."""
    try:
        libs = modules.of_pid(pid)
    except (OSError, ValueError):
        return None
    for lib in libs:
        if not frameclass.may_hold_interpreter(lib.name):
            continue
        try:
            extent = modules.shared(lib.path, "pyruntime", lambda path: data_symbol_extent(path, "_PyRuntime"))
        except (OSError, ElfError, ValueError):
            continue
        if extent is not None:
            return extent[0] + lib.bias, extent[0] + lib.bias + extent[1]
    return None


def python_tids(pid: int) -> Optional[Set[int]]:
    """The threads of ``pid`` that run Python (their stacks read the ``--no-pause`` way); None where unreadable."""
    capture = _no_pause(pid)
    if capture is None:
        return None
    return {t.tid for t in capture.threads if any(isinstance(f, PythonFrame) for f in t.frames)
            or t.python_frames}


def cluster_rank(pid: int) -> bool:
    """Whether ``pid`` is a task of a TensorFlow cluster of several tasks (its ``TF_CONFIG``, read from
    ``/proc/PID/environ``)."""
    try:
        env = procfs.environ(pid)
    except OSError:
        return False
    cluster = ranks.tf_cluster(ranks.tf_config(env))
    return bool(cluster and len(cluster.get("tasks") or []) > 1)


def facts(pid: int, caught_stop: Optional[str], cpu_percent: Optional[float], main_call: Optional[str] = None,
          deep: bool = False) -> ProcessFacts:
    """What the watch knows of ``pid`` beyond a snapshot: its scheduler state read now, the signal of its group
    stop (``caught_stop``: the crash catcher's; where it answers none and the process is stopped, the process's
    own report of its stop to a seize, ``stopped_by``) and its CPU over the last interval, which the watch
    measured.  ``deep`` (a hang, before anything is held): also its task among its peers and their tasks
    (``ranks.cluster_of``), its Slurm node (``ranks.scheduler_of``, as its document names it), and where it is one of
    several tasks or is stopped, its main thread's Python frames (``main_frames``) and the call it was blocked in at
    the last reading (``main_call``)."""
    state = procfs.state(pid)
    if caught_stop is None and state == "T":
        caught_stop = stopped_by(pid)
    if not deep:
        return ProcessFacts(state=state, stopped_by=caught_stop, cpu_percent=cpu_percent)
    env = procfs.environ(pid)  # (empty where it cannot be read)
    cluster = ranks.cluster_of(env) or {}
    node = (ranks.scheduler_of(env) or {}).get("node")
    tasks = tuple(str(t) for t in cluster.get("tasks") or ())
    task = cluster.get("task") if len(tasks) > 1 else None
    frames = main_frames(pid) if task is not None or state == "T" or caught_stop is not None else None
    return ProcessFacts(state=state, stopped_by=caught_stop, cpu_percent=cpu_percent,
                        task=str(task) if task is not None else None, tasks=tasks if task is not None else (),
                        main_frames=frames, main_call=main_call, node=str(node) if node is not None else None)


def main_frames(pid: int) -> Optional[Tuple[Tuple[Optional[str], Optional[str], Optional[int]], ...]]:
    """The main thread's Python frames of ``pid`` (function, file, line; innermost first), read as it runs
    (``_main_frames``); None where they cannot be read so now, or the interpreter is finalizing."""
    try:
        read = _main_frames(pid)
    except _NOT_NOW:
        return None
    return read[1] if read is not None and not read[0] else None


def loads_tensorflow(pid: int) -> bool:
    """Whether ``pid`` has mapped TensorFlow's framework library (``libtensorflow_framework.so.N``)."""
    try:
        libs = modules.of_pid(pid)
    except (OSError, ValueError):
        return False
    return any(os.path.basename(lib.path).startswith("libtensorflow_framework") for lib in libs)


# The OS names TensorFlow gives the threads of its work pools (the inter-op pool's ``tf_Compute``, tf.data's
# ``tf_data_...``, ``tf_graph_runner``): their wake-ups are the job's.
WORK_PREFIX = "tf_"


class Roles:
    """Which threads of each process are the runtime's (``analysis/progress.judge``'s ``runtime_threads``): in
    a process that has loaded TensorFlow, every thread that runs no Python (``python_tids``) and whose OS name
    is not one TensorFlow gives its work pools (``WORK_PREFIX``).  Elsewhere: none (every thread's wake-ups
    count, as they always did).  The Python threads are read again where the process has threads not seen at
    the last read (at most every ``every`` seconds); a thread not read yet counts as before."""

    def __init__(self, every: float) -> None:
        self.every = every
        self._tf: Set[int] = set()  # processes seen to have loaded TensorFlow (it stays loaded)
        self._python: Dict[int, Set[int]] = {}
        self._known: Dict[int, Set[int]] = {}  # the threads the last read saw
        self._read_at: Dict[int, float] = {}

    def runtime(self, pid: int, tids: Set[int], now: float) -> FrozenSet[int]:
        if pid not in self._tf:
            if not loads_tensorflow(pid):
                return frozenset()
            self._tf.add(pid)
        known = self._known.get(pid)
        if (known is None or not tids <= known) and now >= self._read_at.get(pid, now - self.every) + self.every:
            python = python_tids(pid)
            self._read_at[pid] = now
            if python is not None:
                self._python[pid], self._known[pid] = python, set(tids)
        known, python = self._known.get(pid, set()), self._python.get(pid, set())
        return frozenset(tid for tid in tids if tid in known and tid not in python
                         and not procfs.comm(pid, tid).startswith(WORK_PREFIX))

    def forget(self, pid: int) -> None:
        self._tf.discard(pid)
        for table in (self._python, self._known):
            table.pop(pid, None)
        self._read_at.pop(pid, None)


class Runtimes:
    """``runtime_span`` of each process, read once per image: again after an ``exec`` (a launched job's first
    reading may come before its ``exec``; a shell that execs Python)."""

    def __init__(self) -> None:
        self._known: Dict[int, Tuple[Tuple[str, Optional[int]], Optional[Tuple[int, int]]]] = {}

    def span(self, pid: int) -> Optional[Tuple[int, int]]:
        try:
            image = (procfs.exe(pid), procfs.start_code(pid))
        except OSError:
            return None
        known = self._known.get(pid)
        if known is None or known[0] != image:
            known = self._known[pid] = (image, runtime_span(pid))
        return known[1]

    def forget(self, pid: int) -> None:
        self._known.pop(pid, None)


def file_mark(path: str) -> Optional[Tuple[int, int]]:
    """``(size, mtime in ns)`` of ``path``; None when it does not exist (yet)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns
