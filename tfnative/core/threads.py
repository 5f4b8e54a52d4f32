"""One capture's threads: which Python thread state each OS thread runs, and its mixed stack.

Shared by gdb's capture (``capture.py``) and tfnative's own unwinder
(``tfnative/snapshot/pipeline.py``): they differ in where native frames come from,
not in how a thread's Python frames are found, merged and ordered.
"""

import enum
import os
from typing import Callable, Dict, List, Optional

from .model import Capture, NativeFrame, Thread
from .python.autograph import annotate
from .python.gil import gil_state_from_native, in_collection, interpreter_object
from .python.mixed import EVAL_FUNCTION, is_eval_frame, merge
from .python.pyframes import PythonReader, ThreadPy
from .tensorflow.executors import POOL_THREAD_NAMES, is_pool_worker, runs_kernel

# The name gdb gives the frame of a signal trampoline (glibc's ``__restore_rt``).
SIGNAL_FRAME = "<signal handler called>"
MAX_NS_THREADS = 1 << 16


class Threads(enum.Enum):
    """Which threads a capture shows, chosen once where the user asks (``stack``/``core`` ``-a``, an ``attach``
    stop, a session request) and handed down as it is; ``value`` is its name on a wire (gdb's commands, the
    session socket)."""

    PYTHON = "python"  # threads that run Python, the GIL holder, busy inter-op workers (``select_threads``)
    ALL = "all"  # every thread, those that run Python first
    SELECTED = "selected"  # only the selected thread: the one that stopped, or a core's crashed thread


class PythonThreads:
    """The interpreter's thread states, looked up by OS thread."""

    def __init__(self, reader: Optional[PythonReader], result: Capture,
                 inner: Optional[Dict[int, int]] = None, names: bool = True) -> None:
        """Reads the thread states; ``result`` gets the Python version, or a warning.  ``inner``: the thread
        ids inside the process's PID namespace by host thread id (``namespace_tids``); a thread state holds
        the inner one.  ``names``: read threading's names now (else ``read_names`` later)."""
        self.reader = reader
        self.inner = inner or {}
        states: List[ThreadPy] = []
        if reader is not None:
            result.python = "%d.%d" % reader.layout.version
            try:
                states = reader.thread_states()
                holder = reader.gil_holder()
                collecting = holder is not None and reader.gc_collecting()
                for t in states:
                    t.holds_gil = holder is not None and t.tstate == holder
                    t.gc_collecting = collecting
            except MemoryError as exc:
                result.warnings.append("cannot read Python thread states: %s" % exc)
            try:
                if reader.finalizing():
                    result.finalizing = True
            except MemoryError:
                pass
        self.states = states
        self.by_native = {t.native_id: t for t in states if t.native_id}
        self.by_pthread = {t.pthread_id: t for t in states}
        if names:
            self.read_names()

    def read_names(self) -> None:
        """threading's name and daemon flag of each thread state (a nicety: none where unreadable)."""
        if self.reader is None:
            return
        try:
            names = self.reader.objects.thread_names()
        except MemoryError:
            names = {}  # a name is a nicety: the stacks do not wait for it
        for t in self.states:
            t.name, t.daemon = names.get(t.pthread_id, (None, None))

    def find(self, tid: int, pthread_id: Callable[[], Optional[int]]) -> Optional[ThreadPy]:
        """The state of the thread with LWP ``tid``.

        By native thread id (3.11+); before 3.11 states carry none, and the
        thread's pthread id (``pthread_id()``, asked only then) finds it.
        """
        if self.by_native:
            return self.by_native.get(self.inner.get(tid, tid))
        if not self.by_pthread:
            return None
        ptid = pthread_id()
        return self.by_pthread.get(ptid) if ptid is not None else None


def namespace_tids(pid: int) -> Dict[int, int]:
    """{host thread id: thread id in its own PID namespace} for each thread of ``pid`` when it runs in
    another PID namespace (``NSpid`` of ``/proc/PID/task/TID/status``, innermost last); {} when not."""
    out: Dict[int, int] = {}
    try:
        if os.readlink("/proc/%d/ns/pid" % pid) == os.readlink("/proc/self/ns/pid"):
            return out
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids[:MAX_NS_THREADS]:
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                ids = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
        except OSError:
            continue
        if len(ids) > 1:
            out[int(ids[0])] = int(ids[-1])
    return out


def thread_entry(tid: int, name: str, native: List[NativeFrame], reader: Optional[PythonReader],
                 py: Optional[ThreadPy], stack: Optional[List[Optional[int]]] = None) -> Thread:
    """One thread of a capture: ``native`` frames (innermost first) merged with the Python frames of ``py``.

    ``stack``: each native frame's stack pointer (``rsp`` in that frame), where the caller knows them: they
    find the eval-loop frames no symbol names (``name_eval_frames``)."""
    thread = Thread(tid=tid, name=name)
    if py is not None and py.name is not None:
        thread.python_name = py.name
        if py.daemon is not None:
            thread.daemon = py.daemon
    groups = None
    if py is not None and reader is not None:
        reader.read_frames(py)
        annotate(reader, [f for g in py.groups for f in g])
        groups = [[f.to_frame() for f in g] for g in py.groups]
        if stack is not None:
            name_eval_frames(native, py.entries, stack)
        if py.error:
            thread.error = py.error
    merge(thread, native, groups)
    holds = py is not None and py.holds_gil
    thread.gil = "held" if holds else gil_state_from_native(native)
    thread.gc = in_collection(native, holds, py is not None and py.gc_collecting)
    return thread


def name_eval_frames(native: List[NativeFrame], entries: List[int], stack: List[Optional[int]]) -> int:
    """Name ``_PyEval_EvalFrameDefault`` the unnamed native frames that run an eval call, found by where its
    entry frame is; returns how many were named.

    From 3.12 each eval call's entry frame (``entries``, innermost first) is a local of that call's own C
    frame, so it lies between the frame's stack pointer and its caller's.  That needs no symbol: Debian's
    stripped 3.14/3.15 (GCC 16, LTO) run the eval loop's calls from ``_PyEval_EvalFrameDefault.cold``, a
    part ``.dynsym`` does not name.  Only where the names leave eval calls without a frame, only unnamed
    frames of the interpreter's own object, and only when every entry frame finds its own frame.
    """
    if not entries or sum(1 for f in native if is_eval_frame(f)) >= len(entries) or len(stack) != len(native):
        return 0
    hosts = []
    for entry in entries:
        host = next((i for i in range(len(native) - 1) if stack[i] is not None and stack[i + 1] is not None
                     and stack[i] <= entry < stack[i + 1]), None)  # type: ignore[operator]
        if host is None or host in hosts:
            return 0
        hosts.append(host)
    if hosts != sorted(hosts):  # innermost eval call first, as the native frames are
        return 0
    named = [i for i in hosts if (native[i].function or "??") == "??" and interpreter_object(native[i].library)]
    for i in named:
        native[i].function = EVAL_FUNCTION
    return len(named)


def unwound(which: Threads, has_state: bool, name: str, main_name: Optional[str] = None) -> bool:
    """Whether a thread is unwound for a capture of ``which`` threads: in ``PYTHON`` the threads with a
    Python thread state, and those that may be TensorFlow's pool workers (whose busy workers are shown, and
    all counted): named as the inter-op pool's, or not named at all (``name`` is the main thread's,
    ``main_name``: TensorFlow 2.16 to 2.20 name none of their pools' threads)."""
    return which is not Threads.PYTHON or has_state or name in POOL_THREAD_NAMES or (main_name is not None
                                                                                     and name == main_name)


def select_threads(threads: List[Thread], which: Threads) -> List[Thread]:
    """``PYTHON``: threads with Python frames, the GIL holder, busy inter-op workers; ``ALL``: Python threads
    first; else as they are."""
    if which is Threads.PYTHON:
        return [t for t in threads if t.has_python() or t.gil == "held" or (is_pool_worker(t) and runs_kernel(t))]
    if which is Threads.ALL:
        return [t for t in threads if t.has_python()] + [t for t in threads if not t.has_python()]
    return threads
