"""What everyone is waiting for: the wait-for graph of a snapshot, its cycles and its chains.

Nodes are the event's threads and the resources they wait on; an edge says that a thread waits, for which
resource, for which thread where one holds or owes it, and on what evidence.  The edges come from what the
snapshot read:

- exact, from memory (``core/locks.py``, the thread's ``lock_wait``): a pthread mutex's recorded owner, a Python
  ``RLock``'s owner, the thread a ``Thread.join()`` waits for, the thread whose frames hold a lock object
  (``mutex_lock``, ``std::lock_guard``...) on the mutex a thread locks (gdb, DWARF) -- the thread itself in a
  self-deadlock, an edge from a thread to itself;
- the GIL: a thread waiting for it waits for its holder;
- TensorFlow's, from frames: a thread waiting for a tf.function waits for the executor threads working for
  it (``tf_function.called_by``), a thread in ``IteratorGetNext`` for the tf.data threads producing for it
  (``works_for``), a pool worker running a ``tf.py_function`` callback for what the callback waits on;
- without a holder (``waits_for`` None): an absl::Mutex (TensorFlow's ``mutex``) whose holder no frame shows,
  an eager ``AsyncOpKernel`` whose ``done`` has not been called (``AsyncOpKernel::Compute`` waiting), a
  Python ``queue.Queue``/``Event``/``Condition`` named by the
  variable on the waiting line, a TensorFlow queue's dequeue, a forked child's op that waits for pool
  threads the child does not have, a collective waiting for the other workers of its cluster, a parent
  waiting for its children.

``analyse`` reads the graph: a cycle is a deadlock, named edge by edge; else the chain from the thread the
user waits on (the main thread, a tf.function's caller) to the sink where the work really is.  Pure: it
sees the event only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Set, Tuple

from ..core import frameclass, sourcelines
from ..core.model import Event, EventPythonFrame, EventThread, NativeFrame, Op, PythonFrame, Wait
from ..core.record import Record
from ..core.tensorflow.executors import (
    GET_NEXT_RE,
    TF_DATA,
    is_any_pool_worker,
    pool_of,
    runs_kernel,
    tf_wait,
    worker_loop,
)

_WAIT_LIB_RE = re.compile(r"^(libc\.so|libpthread|ld-linux|libstdc\+\+)")
MAX_CHAIN = 16  # steps of a chain followed at the most


# Python calls that wait for another thread's action, with no owner recorded: (frame function, what).
_PY_WAITS = (("Queue.get", "queue.Queue"), ("Queue.put", "queue.Queue"), ("Queue.join", "queue.Queue"),
             ("Event.wait", "threading.Event"), ("Condition.wait", "threading.Condition"),
             ("Condition.wait_for", "threading.Condition"), ("Barrier.wait", "threading.Barrier"),
             ("Semaphore.acquire", "threading.Semaphore"))
_CHILD_WAITS = (("Pool.map", "its pool's child processes"), ("Pool.starmap", "its pool's child processes"),
                ("ApplyResult.wait", "its pool's child processes"), ("Popen.wait", "a child process"),
                ("BaseProcess.join", "a child process"), ("Popen.poll", "a child process"))
_CHILD_SYSCALLS = ("wait4", "waitid")
_QUEUE_OP_RE = re.compile(r"^Queue(Dequeue|DequeueMany|DequeueUpTo)(V2)?$")
_ENQUEUE_OP_RE = re.compile(r"^Queue(Enqueue|EnqueueMany)(V2)?$")
_COLLECTIVE_RE = re.compile(r"TFE_EnableCollectiveOps|CollectiveExecutor|CollectiveRemoteAccess|"
                            r"CollectiveParamResolver|BaseCollectiveExecutor|DeviceResolver.*Distributed|"
                            r"CollectiveKeys|NcclCommunicator")
_TF_EXEC_RE = re.compile(r"^TFE_Execute|^TF_SessionRun|ExecutorState<|ExecutorImpl|DirectSession::Run|"
                         r"EagerExecute|ThreadPool::Schedule|ParallelFor|Eigen::Barrier::Wait|"
                         r"ThreadPoolDevice::Compute")


def _py(t: EventThread) -> List[EventPythonFrame]:
    return [f for f in t.frames if isinstance(f, PythonFrame)]


def _native(t: EventThread) -> List[str]:
    return [f.function or "" for f in t.frames if isinstance(f, NativeFrame)]


def where(t: EventThread) -> str:
    """``app.py:46`` (the user's innermost line), else the innermost Python line, else its innermost frame."""
    py = _py(t)
    f = next((f for f in py if f.user), py[0] if py else None)
    if f is not None:
        return "%s:%s" % (os.path.basename(f.file or "?"), f.line)
    named = [f for f in t.frames if isinstance(f, NativeFrame) and f.function and f.function != "??"]
    # past the C library's and the interpreter's waiting frames, to the code that waits
    own = [f for f in named if not _WAIT_LIB_RE.match(f.library or "") and frameclass.frame_class(f) != "interpreter"]
    found = own or named
    if not found:
        return "?"
    nf = found[0]
    return "%s in %s" % ((nf.function or "?").split("(", 1)[0], nf.library) if nf.library else nf.function or "?"


def _variable(caller: Optional[EventPythonFrame], method: str) -> Optional[str]:
    """The variable the caller's line calls ``method`` on (``item = q.get()`` -> ``q``)."""
    if caller is None:
        return None
    text = sourcelines.line(caller.file, caller.line) or ""
    m = re.search(r"([A-Za-z_][\w.]*)\.%s\s*\(" % re.escape(method), text)
    return m.group(1) if m else None


def _kernel_op(t: EventThread, pattern: re.Pattern[str]) -> Optional[Op]:
    return next((f.op for f in t.frames if isinstance(f, NativeFrame) and f.op
                 and pattern.match(f.op.type or "")), None)


def _tf_loaded(event: Event) -> bool:
    return any(frameclass.frame_class(f).startswith("tensorflow") for t in event.threads for f in t.frames)


_DEQUEUE_RE = re.compile(r"([A-Za-z_]\w*)\.dequeue(?:_many|_up_to)?\s*\(")
_RUN_RE = re.compile(r"\.run\(\s*([A-Za-z_]\w*)\s*[,)]")
MAX_BODY_LINES = 200  # of a function's body read for the queue it dequeues from


def source_queue(t: EventThread) -> Optional[Tuple[str, str, str]]:
    """(queue class, variable, ``file:line`` of the dequeue) of the TensorFlow queue the user's code that
    the thread waits in dequeues from, read from the user's source: the waiting line itself
    (``q.dequeue()``), the tensor it runs (``sess.run(batch)`` with ``batch = q.dequeue_many(8)``), or the
    body of the tf.function it calls; the class from the variable's assignment (``q = tf.queue.FIFOQueue(``).
    None where the source does not say."""
    user = next((f for f in _py(t) if f.user), None)
    if user is None or not user.file:
        return None
    lines = sourcelines.text_lines(user.file) or []
    text = sourcelines.line(user.file, user.line) or ""
    found: Optional[Tuple[str, int]] = None
    m = _DEQUEUE_RE.search(text)
    if m:
        found = (m.group(1), user.line or 0)
    run = _RUN_RE.search(text)
    if found is None and run:
        found = _assigned_dequeue(lines, run.group(1))
    function = t.tf_function.python_function if t.tf_function else None
    if found is None and function:
        found = _dequeue_in_body(lines, function)
    if found is None:
        return None
    var, number = found
    kind = next((m.group(1) for m in (re.search(r"^\s*%s\s*=\s*[\w.]*?(\w*Queue)\(" % re.escape(var), ln)
                                      for ln in lines) if m), None)
    if kind is None:
        return None
    return kind, var, "%s:%d" % (os.path.basename(user.file), number)


def _assigned_dequeue(lines: List[str], name: str) -> Optional[Tuple[str, int]]:
    for i, ln in enumerate(lines):
        if re.match(r"^\s*%s\s*=" % re.escape(name), ln):
            m = _DEQUEUE_RE.search(ln)
            if m:
                return m.group(1), i + 1
    return None


def _dequeue_in_body(lines: List[str], function: str) -> Optional[Tuple[str, int]]:
    start = next((i for i, ln in enumerate(lines) if re.match(r"^\s*def %s\(" % re.escape(function), ln)), None)
    if start is None:
        return None
    indent = len(lines[start]) - len(lines[start].lstrip())
    for i in range(start + 1, min(len(lines), start + 1 + MAX_BODY_LINES)):
        ln = lines[i]
        if ln.strip() and len(ln) - len(ln.lstrip()) <= indent:
            break
        m = _DEQUEUE_RE.search(ln)
        if m:
            return m.group(1), i + 1
    return None


def _queue_runner_idle(event: Event, t: EventThread) -> bool:
    """The user's file makes a ``QueueRunner`` and no thread runs one (``start_queue_runners`` not called)."""
    user = next((f for f in _py(t) if f.user), None)
    lines = sourcelines.text_lines(user.file if user else None) or []
    if not any("QueueRunner(" in ln or "shuffle_batch(" in ln or "input_producer(" in ln for ln in lines):
        return False
    return not any((f.function or "").endswith("QueueRunner._run") for th in event.threads for f in _py(th))


def _queue_wait(event: Event, t: EventThread, op_type: str) -> Optional[Wait]:
    """The wait of a thread whose user code dequeues from a TensorFlow queue no thread enqueues into."""
    queue = source_queue(t)
    if queue is None:
        return None
    kind, var, at = queue
    evidence = "%s dequeues from %s (%s) and no thread of this process runs an enqueue into it" % (
        op_type, var, at)
    if _queue_runner_idle(event, t):
        evidence += "; its QueueRunner runs on no thread (tf.compat.v1.train.start_queue_runners not called?)"
    return Wait(t.tid, None, "%s %s (a TensorFlow queue)" % (kind, var), evidence)


@dataclass(repr=False, eq=False)
class _Scene(Record):
    """What the edge finders share about the event: its GIL holder, who works for whom, its pool threads, the
    threads that enqueue into a TensorFlow queue, its thread ids."""

    event: Event
    holder: Optional[EventThread]
    workers_of: Dict[int, List[EventThread]]
    pool_threads: List[EventThread]
    enqueuers: List[EventThread]
    tids: Set[int]
    _tf_seen: Optional[bool] = None

    def tf_loaded(self) -> bool:
        """Whether TensorFlow's code is on a stack of the event (looked at once, when first asked)."""
        if self._tf_seen is None:
            self._tf_seen = _tf_loaded(self.event)
        return self._tf_seen


def build(event: Event) -> List[Wait]:
    """The edges of the event's wait-for graph, one or none per thread (its innermost wait)."""
    threads = event.threads
    workers_of: Dict[int, List[EventThread]] = {}
    for t in threads:
        caller = (t.tf_function.called_by if t.tf_function else None) or (t.works_for.tid if t.works_for else None)
        if caller is not None and t.tid != caller:
            workers_of.setdefault(caller, []).append(t)
    scene = _Scene(event, next((t for t in threads if t.gil == "held"), None), workers_of,
                   [t for t in threads if worker_loop(t) is not None],
                   [t for t in threads if _kernel_op(t, _ENQUEUE_OP_RE)], {t.tid for t in threads})
    waits: List[Wait] = []
    for t in threads:
        edge = _edge(scene, t)
        if edge is not None:
            waits.append(replace(edge, at=where(t)))
    return waits


def _edge(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """The thread's innermost wait: the first edge finder (``_FINDERS``, in order) that sees one."""
    for finder in _FINDERS:
        edge = finder(scene, t)
        if edge is not None:
            return edge
    return None


def _lock_owner(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """Exact, from memory: a lock whose recorded owner is a thread of the event (or a thread it joins)."""
    lock = t.lock_wait or {}
    owner = lock.get("owner")
    if owner in scene.tids:
        return Wait(t.tid, owner, lock.get("resource") or "a lock", lock.get("evidence") or "")
    return None


def _gil(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A thread waiting for the GIL waits for its holder."""
    holder = scene.holder
    if t.gil == "waiting" and holder is not None and holder.tid != t.tid:
        return Wait(t.tid, holder.tid, "the GIL", "waits in take_gil; thread %d holds the GIL" % holder.tid)
    return None


def _one_child(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A wait4 for one child process, its pid read from memory."""
    lock = t.lock_wait or {}
    if lock.get("process"):
        return Wait(t.tid, None, lock["resource"], lock.get("evidence") or "")
    return None


def _library(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A standard-library wait with no owner: a queue, an event, a condition, a pool's or a child's process."""
    library = _library_wait(_py(t))
    if library is not None:
        return Wait(t.tid, None, library[0], library[1] % where(t))
    return None


def _ownerless_lock(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A lock read from memory whose owner is no thread of the event."""
    lock = t.lock_wait or {}
    if lock:
        return Wait(t.tid, None, lock.get("resource") or "a lock", lock.get("evidence") or "")
    return None


# The frames of a wait for a Notification (absl's, TensorFlow's) between the futex and the code that waits.
_NOTIFY_WAIT_RE = re.compile(r"^(syscall|__GI_syscall|futex|__futex|absl::|AbslInternal|tsl::Notification|"
                             r"tensorflow::Notification|std::condition_variable|pthread_cond|__pthread_cond|"
                             r"___pthread_cond)")
ASYNC_COMPUTE = "tensorflow::AsyncOpKernel::Compute"
ASYNC_DONE = "the done callback of its async kernel"
# TensorFlow's own async kernels that wait for an event from outside by design (a queue, a peer, a producer),
# and those that run a function (If, While, Case, PartitionedCall...), whose done comes when the function's ops
# have run: none of them is claimed to have returned without calling done
_WAITING_ASYNC_RE = re.compile(r"Queue|Recv|Send|Collective|Nccl|Barrier|Iterator|Remote|Stage|Map(Peek|Unstage)|"
                               r"TakeMany|Accumulator|Dataset|Fifo|Notify|Wait|^(Stateless)?(If|While|Case)$|"
                               r"Call|^For$|Defun|Function")


def _async_kernel(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A thread that runs an ``AsyncOpKernel`` synchronously (an eager op: ``AsyncOpKernel::Compute``) waits
    on a Notification for the kernel's ``done``; nothing records who owes it."""
    native = [f for f in t.frames if isinstance(f, NativeFrame)]
    for i, f in enumerate(native[:MAX_CHAIN]):
        name = (f.function or "").split("(", 1)[0]
        if name == ASYNC_COMPUTE:
            if i == 0:
                return None
            op = f.op.type if f.op and f.op.type else "?"
            if _WAITING_ASYNC_RE.search(op):
                return None
            return Wait(t.tid, None, "%s %s" % (ASYNC_DONE, op),
                        "%s waits for %s's ComputeAsync to call done" % (ASYNC_COMPUTE, op))
        if not _NOTIFY_WAIT_RE.search(name):
            return None
    return None


def _child_syscall(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A thread in wait4/waitid (its syscall or its innermost frames) waits for a child process."""
    syscall = (t.kernel or {}).get("syscall")
    if syscall in _CHILD_SYSCALLS or any(n.startswith(("__GI___wait4", "__wait4", "wait4", "waitpid"))
                                         for n in _native(t)[:3]):
        return Wait(t.tid, None, "a child process", "%s at %s" % (syscall or "waitpid", where(t)))
    return None


def _tf_queue(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A TensorFlow queue's dequeue waits for a thread that enqueues into it, else for the queue itself."""
    op = _kernel_op(t, _QUEUE_OP_RE)
    if op is None:
        return None
    producer = next((w for w in scene.enqueuers if w.tid != t.tid), None)
    if producer is None:
        named = _queue_wait(scene.event, t, op.type or "a dequeue")
        if named is not None:
            return named
    name = op.name or op.type
    return Wait(t.tid, producer.tid if producer else None, "the TensorFlow queue of %s" % name,
                "%s dequeues from an empty queue%s" % (
                    op.type, "" if producer else "; no thread runs an enqueue into it"))


def _collective(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A collective op waits for the other workers of its cluster."""
    native = _native(t)
    if any(_COLLECTIVE_RE.search(n) for n in native):
        return Wait(t.tid, None, "the other workers of its cluster%s" % _peers(scene.event),
                    "%s waits for its collective's peers" % next(n.split("(", 1)[0] for n in native
                                                                  if _COLLECTIVE_RE.search(n)))
    return None


def _pool_callback(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A pool worker's Python callback (tf.py_function, py_func) waits in TensorFlow for work of its own."""
    inner = _inner_native(t)
    if not (_py(t) and worker_loop(t) is not None and inner and any(_TF_EXEC_RE.search(n) for n in inner)):
        return None
    pool_threads = scene.pool_threads
    busy = [w for w in pool_threads if w.tid != t.tid and (runs_kernel(w) or _py(w))]
    free = len(pool_threads) - len(busy) - 1
    return Wait(t.tid, None, "a free thread of TensorFlow's pool",
                "its callback at %s waits in TensorFlow (%s) for work that needs a pool thread; %s" % (
                    where(t), inner[-1].split("(", 1)[0],
                    "every other pool thread is busy too" if free <= 0 else "%d pool thread(s) idle" % free))


def _idle_caller(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A tf.function's or Session.run's caller none of whose workers runs: a queue, a busy pool, a fork, or
    an event from outside the process's threads."""
    caller = (bool(t.tf_function and not t.tf_function.how) or tf_wait(t) == "Session.run") \
        and worker_loop(t) is None
    if not (_py(t) and caller and not any(runs_kernel(w) or _py(w) for w in scene.workers_of.get(t.tid, []))):
        return None
    what = "tf.function" if t.tf_function else "Session.run"
    queued = None if scene.enqueuers else _queue_wait(scene.event, t, "its %s" % what)
    if queued is not None:
        return queued
    busy = [w for w in scene.pool_threads if runs_kernel(w) or _py(w)]
    if busy:  # the pool's threads run callbacks (their own tf.functions): the caller's ops wait for one
        return Wait(t.tid, busy[0].tid, "the threads of TensorFlow's pool, all busy",
                    "no pool thread runs its %s's ops; thread(s) %s run callbacks" % (
                        what, ", ".join(str(w.tid) for w in busy)))
    site = fork_site(t)
    if site is not None:
        return Wait(t.tid, None, "TensorFlow's threads and locks, which a forked child inherits without "
                    "their threads", "forked at %s (multiprocessing) from a process running TensorFlow; "
                    "no thread of this child runs its %s's ops" % (site, what))
    return Wait(t.tid, None, "the ops of its %s, which no thread of this process runs" % what,
                "every pool thread waits for work: the ops wait for an event from outside the process's "
                "threads (a peer, a queue)")


def _working_workers(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A caller whose workers run waits for the first of them (tf.data's for an iterator, a tf.function's)."""
    busy = [w for w in scene.workers_of.get(t.tid, []) if runs_kernel(w) or _py(w)]
    if not (_py(t) and busy):
        return None
    first = busy[0]
    what = ("the tf.data threads producing for its iterator" if any(GET_NEXT_RE.search(n) for n in _native(t))
            else "the threads running its tf.function")
    return Wait(t.tid, first.tid, what, "thread %s works for it%s" % (
        first.tid, "" if len(busy) == 1 else " (and %s)" % ", ".join(str(w.tid) for w in busy[1:])))


def _waits_in_tf(scene: _Scene, t: EventThread) -> bool:
    """A Python thread, no pool worker, that waits in TensorFlow's executor, in a process running TensorFlow."""
    return bool(_py(t)) and not is_any_pool_worker(t) and any(_TF_EXEC_RE.search(n) for n in _native(t)) \
        and scene.tf_loaded()


def _no_pool(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A thread waiting in TensorFlow in a process with no pool thread at all (a forked child)."""
    pool = scene.event.pool
    if not (_waits_in_tf(scene, t) and not scene.pool_threads and pool is not None and not pool.threads
            and scene.event.kind in ("snapshot", "timeout", "hang")
            and (t.kernel or {}).get("state") in ("S", "D", None)):
        return None
    op = next((f.op for f in t.frames if isinstance(f, NativeFrame) and f.op), None)
    return Wait(t.tid, None, "TensorFlow's thread pools, which a forked child inherits without their "
                "threads", "%s waits in TensorFlow and the process has no pool thread at all" % (
                    "its op %s" % op.type if op else "it"))


def _tf_data(scene: _Scene, t: EventThread) -> Optional[Wait]:
    """A thread in ``IteratorGetNext`` waits for the tf.data threads that run its work."""
    if not (_waits_in_tf(scene, t) and any(GET_NEXT_RE.search(n) for n in _native(t))):
        return None
    data = [w for w in scene.event.threads if pool_of(w) == TF_DATA and (runs_kernel(w) or _py(w))]
    if data:
        return Wait(t.tid, data[0].tid, "the tf.data threads producing for its iterator",
                    "tf.data thread %s runs its work" % data[0].tid)
    return None


# The edge finders, tried in order: the first edge found is the thread's.
_FINDERS: Tuple[Callable[[_Scene, EventThread], Optional[Wait]], ...] = (
    _lock_owner, _gil, _one_child, _library, _ownerless_lock, _child_syscall, _tf_queue, _collective, _async_kernel,
    _pool_callback, _idle_caller, _working_workers, _no_pool, _tf_data)


def _library_wait(py: List[EventPythonFrame]) -> Optional[Tuple[str, str]]:
    """(resource, evidence with ``%s`` for the place) of a thread whose innermost Python frames wait in the
    standard library for another thread or process: the outermost such call before the user's code."""
    found: Optional[Tuple[str, str]] = None
    for i, f in enumerate(py):
        path = f.file or ""
        if not path.endswith(("/queue.py", "/threading.py", "/subprocess.py")) and "/multiprocessing/" not in path:
            break
        parts = (f.function or "").rsplit(".", 2)
        name = ".".join(parts[-2:])
        caller = py[i + 1] if i + 1 < len(py) else None
        for fn, what in _PY_WAITS:
            if name == fn:
                var = _variable(caller, fn.split(".")[1])
                found = ("%s %s" % (what, var) if var else what, fn + " at %s; no owner is recorded for it")
        for fn, what in _CHILD_WAITS:
            if name == fn:
                found = (what, fn + " at %s")
    return found


def _inner_native(t: EventThread) -> List[str]:
    """The native frames above a thread's innermost Python frame."""
    out = []
    for f in t.frames:
        if isinstance(f, PythonFrame):
            break
        if isinstance(f, NativeFrame):
            out.append(f.function or "")
    return out


def fork_site(t: EventThread) -> Optional[str]:
    """``app.py:46``: where a process forked by ``multiprocessing`` (its fork start method) was started, from
    the child's own stack (``Popen._launch`` in ``popen_fork.py``, then the user's ``p.start()`` line)."""
    py = _py(t)
    for i, f in enumerate(py):
        if f.function == "Popen._launch" and (f.file or "").endswith("/multiprocessing/popen_fork.py"):
            user = next((g for g in py[i + 1:] if g.user), None)
            return "%s:%s" % (os.path.basename(user.file or "?"), user.line) if user else "?"
    return None


def _peers(event: Event) -> str:
    """`` (worker 1)``: the other tasks of the event's cluster (TF_CONFIG), "" where none is known."""
    cluster = event.cluster or {}
    me = cluster.get("task")
    others = [task.replace(":", " ") for task in cluster.get("tasks") or [] if task != me]
    return " (%s)" % ", ".join(others) if others else ""


def cycle(waits: List[Wait], main: Optional[int] = None) -> Optional[List[Wait]]:
    """The first cycle of thread edges (a deadlock), from the main thread (``main``: the process's pid) where it
    is in it, else from its lowest thread id; None where there is none.  (Not from the lowest id alone: a
    helper started after the pids wrapped has a lower id than the main thread, and the same deadlock was said
    from the helper in one run and from the main thread in another.)"""
    by_thread = {w.thread: w for w in waits if w.waits_for is not None}
    for start in sorted(by_thread):
        path: List[Wait] = []
        seen: Dict[int, int] = {}
        node: Optional[int] = start
        while node is not None and node in by_thread and node not in seen and len(path) <= len(by_thread):
            seen[node] = len(path)
            path.append(by_thread[node])
            node = by_thread[node].waits_for
        if node is not None and node in seen:
            loop = path[seen[node]:]
            first = min(range(len(loop)), key=lambda i: (loop[i].thread != main, loop[i].thread))
            return loop[first:] + loop[:first]
    return None


def chain(waits: List[Wait], start: int) -> List[Wait]:
    """The edges from thread ``start`` along who-waits-for-whom, to a sink (bounded)."""
    by_thread = {w.thread: w for w in waits}
    out: List[Wait] = []
    node: Optional[int] = start
    seen = set()
    while node is not None and node in by_thread and node not in seen and len(out) < MAX_CHAIN:
        seen.add(node)
        out.append(by_thread[node])
        node = by_thread[node].waits_for
    return out


def _name(t: Optional[EventThread], tid: int, pid: Optional[int]) -> str:
    if tid == pid:
        return "the main thread"
    label = (t.label or t.name) if t is not None else ""
    return 'thread %s "%s"' % (tid, label) if label else "thread %s" % tid


def describe_cycle(event: Event, loop: List[Wait]) -> str:
    """"deadlock: thread 5 "one" holds RLock lock_a and waits at app.py:11 for RLock lock_b, held by thread 6
    "two", which waits at app.py:18 for RLock lock_a" (each edge said)."""
    by_tid = {t.tid: t for t in event.threads}
    held = {w.waits_for: w.resource for w in loop}
    parts = []
    for w in loop:
        t = by_tid.get(w.thread)
        parts.append("%s holds %s and waits at %s for %s" % (_name(t, w.thread, event.pid), held.get(w.thread, "?"),
                                                              where(t) if t else "?", w.resource))
    return "deadlock: " + "; ".join(parts)


def start_thread(event: Event, waits: List[Wait]) -> Optional[int]:
    """The thread the user waits on: the main thread where it waits, else the first waiting thread that runs
    Python and is no pool worker."""
    waiting = {w.thread for w in waits}
    if event.pid in waiting:
        return event.pid
    return next((t.tid for t in event.threads if t.tid in waiting and _py(t) and not is_any_pool_worker(t)),
                next(iter(sorted(waiting)), None))


def analyse(event: Event) -> Tuple[List[Wait], Optional[List[Wait]], List[Wait]]:
    """(edges, the cycle or None, the chain from the thread the user waits on)."""
    waits = build(event)
    loop = cycle(waits, event.pid)
    start = start_thread(event, waits)
    return waits, loop, chain(waits, start) if start is not None and loop is None else []
