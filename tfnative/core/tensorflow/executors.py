"""TensorFlow's thread pools as a capture sees them: which threads are pool workers, of which pool, and
which of the inter-op pool's workers are busy.

A worker is recognised by what it runs, not by its name: its stack loops in a pool's worker loop (Eigen's
``ThreadPoolTempl<...>::WorkerLoop``, under ``tsl::thread::EigenEnvironment::CreateThread``; TensorFlow's
``RunHandlerThreadPool::WorkerLoop``; tf.data's ``UnboundedWorkQueue::PooledThreadFunc``).  TensorFlow
2.21 names its inter-op pool's threads ``tf_Compute``; 2.16 to 2.20 name none of them (every thread shows
the process's name), so a name is only a hint.  A thread that a worker started inherits the worker's name
but has no worker loop on its stack: it is no worker.

Which pool a worker belongs to (``pool_of``):

- a name TensorFlow gave the thread (``tf_Compute``, ``tf_numa_-1_Eigen``, ``tf_data_...``,
  ``tf_graph_runner``) says it: its OS name (2.21), else the name TensorFlow's own thread-name registry
  holds for it (2.16 to 2.20, read by ``threadnames``);
- else the frames inside the loop say it where the worker is busy: an executor (``ExecutorState::Process``)
  or a kernel run by the inter-op pool; ``tensorflow::data::`` frames (an iterator's runner) for tf.data;
  Eigen's tensor evaluation shards (``TensorExecutor``, ``ParallelFor``) for the intra-op pool;
- an idle worker of an unnamed pool (waiting in ``WaitForWork``) shows nothing of its pool: its pool is
  unknown (None), and it is counted as a worker the inter-op pool may own.

A worker is busy when its stack runs an executor or a kernel (``ExecutorState::Process``, an op's
``Compute``); else it waits for work.  Pure: threads of the model (``model.Thread``).
"""

import re
from typing import Dict, List, Optional

from ..model import NativeFrame, Pool, PythonFrame, Thread

# The inter-op pool's thread name, where TensorFlow names its threads (2.21 on).
POOL_THREAD_NAMES = ("tf_Compute",)
INTER_OP, INTRA_OP, TF_DATA, OTHER = "inter-op", "intra-op", "tf.data", "other"

_EIGEN_LOOP_RE = re.compile(r"ThreadPoolTempl<.*>::WorkerLoop\(|"
                            # the start routine of every Eigen pool thread (WorkerLoop inlined into it)
                            r"EigenEnvironment::CreateThread\(")
_RUN_HANDLER_LOOP_RE = re.compile(r"RunHandlerThreadPool::WorkerLoop\(")
_UNBOUNDED_LOOP_RE = re.compile(r"UnboundedWorkQueue::PooledThreadFunc\(")
_BUSY_RE = re.compile(r"Executor(State|Impl)\b|ExecutorState<|::Compute(Async)?\(|PyFuncOp|EagerPyFunc")
# Inside a worker loop, from the loop inwards: the first frame that says whose work the worker runs.
_EXECUTOR_RE = re.compile(r"Executor(State|Impl)\b|ExecutorState<|ThreadPoolDevice::Compute|::Compute(Async)?\(")
_TF_DATA_RE = re.compile(r"\btensorflow::data::|\bdata::.*Dataset|UnboundedThreadPool")
_INTRA_OP_RE = re.compile(r"Eigen::internal::TensorExecutor|Eigen::internal::EvalRange|Eigen::ThreadPoolDevice::"
                          r"parallelFor|ThreadPool::ParallelFor|TensorContraction|Eigen::Barrier|::Shard\(|"
                          r"Eigen::ParallelFor")
_TF_DATA_NAME_RE = re.compile(r"^tf_data")
_EIGEN_NAME_RE = re.compile(r"Eigen")  # tf_numa_-1_Eigen: the intra-op pool of a CPU device


def _native_names(thread: Thread) -> List[str]:
    return [f.function or "" for f in thread.frames if isinstance(f, NativeFrame)]


def worker_loop(thread: Thread) -> Optional[str]:
    """The kind of pool loop the thread's stack runs: "eigen" (Eigen's ``ThreadPoolTempl::WorkerLoop``, the
    inter-op, intra-op and named tf.data pools), "run_handler" (TensorFlow's ``RunHandlerThreadPool``),
    "unbounded" (tf.data's ``UnboundedThreadPool``); None: no pool's worker."""
    for name in reversed(_native_names(thread)):  # the outermost loop (a worker's work may run a nested one)
        if _EIGEN_LOOP_RE.search(name):
            return "eigen"
        if _RUN_HANDLER_LOOP_RE.search(name):
            return "run_handler"
        if _UNBOUNDED_LOOP_RE.search(name):
            return "unbounded"
    return None


def unnamed_workers(threads: List[Thread]) -> bool:
    """Whether ``threads`` hold workers of Eigen pools and none is named as the inter-op pool's: the names
    in TensorFlow's thread-name registry (``threadnames``) would place them."""
    eigen = [t for t in threads if worker_loop(t) == "eigen"]
    return bool(eigen) and not any(t.name in POOL_THREAD_NAMES for t in eigen)


def pool_by_name(name: str) -> Optional[str]:
    """The pool a name TensorFlow gives its threads says (None: not such a name)."""
    if name in POOL_THREAD_NAMES:
        return INTER_OP
    if _TF_DATA_NAME_RE.match(name):
        return TF_DATA
    if not name.startswith("tf_"):
        return None
    return INTRA_OP if _EIGEN_NAME_RE.search(name) else OTHER


def pool_of(thread: Thread, tf_name: Optional[str] = None) -> Optional[str]:
    """Which pool a worker belongs to: ``INTER_OP``, ``INTRA_OP``, ``TF_DATA``, ``OTHER`` (another pool TF
    named, ``tf_graph_runner``...); None: not a worker, or an idle worker of an unnamed pool (its frames do
    not show its pool).  ``tf_name``: the name TensorFlow's thread-name registry gives the thread
    (``threadnames``), where its OS name is not one TensorFlow gave."""
    loop = worker_loop(thread)
    if loop is None:
        return None
    if loop == "unbounded":
        return TF_DATA
    by_name = pool_by_name(thread.name or "") or pool_by_name(tf_name or "")
    if by_name is not None:
        return by_name
    names = _native_names(thread)
    outer = max(i for i, n in enumerate(names) if _EIGEN_LOOP_RE.search(n) or _RUN_HANDLER_LOOP_RE.search(n))
    for n in reversed(names[:outer]):  # from the loop inwards
        if _TF_DATA_RE.search(n):
            return TF_DATA
        if _EXECUTOR_RE.search(n):
            return INTER_OP
        if _INTRA_OP_RE.search(n):
            return INTRA_OP
    return None


def is_pool_worker(thread: Thread) -> bool:
    """A thread of the inter-op pool: a worker loop on its stack, and its name (``tf_Compute``) or the work it
    runs (an executor, a kernel) says the inter-op pool."""
    return pool_of(thread) == INTER_OP


def is_any_pool_worker(thread: Thread) -> bool:
    """A worker of any of TensorFlow's pools (not a thread that a worker started)."""
    return worker_loop(thread) is not None


def runs_kernel(thread: Thread) -> bool:
    """The thread runs an executor or a kernel (a pool worker that is not waiting for work)."""
    return any(_BUSY_RE.search(n) for n in _native_names(thread))


def pools(threads: List[Thread], tf_names: Optional[Dict[int, str]] = None) -> Dict[str, List[int]]:
    """``{pool: [tid...]}`` of the workers among ``threads``, by ``pool_of`` ("unknown": idle workers of
    unnamed pools); pools with no worker left out."""
    names = tf_names or {}
    out: Dict[str, List[int]] = {}
    for t in threads:
        if worker_loop(t) is not None:
            out.setdefault(pool_of(t, names.get(t.tid)) or "unknown", []).append(t.tid)
    return out


def pool_summary(threads: List[Thread], tf_names: Optional[Dict[int, str]] = None) -> Pool:
    """The ``Pool`` (name, threads, busy, idle) of the inter-op pool's workers among
    ``threads`` (every thread of the capture); ``threads`` 0 when none is seen.

    Where TensorFlow names the pool's threads (``name`` "tf_Compute"), its workers are the threads of that
    name.  Where it does not (``name`` None), they are the workers that the names in TensorFlow's own
    thread-name registry (``tf_names``: tid -> name, where it could be read) or their frames put in the
    inter-op pool, and the idle workers of unnamed Eigen pools that neither places: those are counted
    (``threads``, ``idle``) as the inter-op pool's, and ``"exact": False`` says that the count may hold
    other pools' workers.  ``"pools"`` says where each worker was placed."""
    named = any(t.name in POOL_THREAD_NAMES and worker_loop(t) == "eigen" for t in threads)
    if named:
        workers = [t for t in threads if t.name in POOL_THREAD_NAMES and worker_loop(t) == "eigen"]
        busy = [t.tid for t in workers if runs_kernel(t)]
        return Pool(name=POOL_THREAD_NAMES[0], threads=len(workers), busy=tuple(busy),
                    idle=tuple(t.tid for t in workers if t.tid not in busy))
    names = tf_names or {}
    known = [t for t in threads if pool_of(t, names.get(t.tid)) == INTER_OP]
    unknown = [t for t in threads if worker_loop(t) == "eigen" and pool_of(t, names.get(t.tid)) is None]
    workers = known + unknown
    busy = [t.tid for t in known if runs_kernel(t)]
    placed = {pool: tuple(tids) for pool, tids in pools(threads, names).items()} if workers else None
    return Pool(name=None, threads=len(workers), busy=tuple(busy), idle=tuple(t.tid for t in workers
                                                                              if t.tid not in busy),
                exact=not unknown, pools=placed)


# What a Python thread waits for inside TensorFlow, by its frames (innermost first): (what, native frame or
# Python function that says it).  The first frame that matches names the wait.  A thread waiting for a tf.data
# iterator's next element (eager iteration, ``next(iterator)``) is in ``IteratorGetNextOp``.
GET_NEXT_RE = re.compile(r"IteratorGetNext(AsOptional)?Op::|IteratorResource::GetNext\(")
WAIT_TF_DATA = "the next element of a tf.data iterator"
_WAITS = (
    (WAIT_TF_DATA, GET_NEXT_RE,
     ("iterator_get_next", "iterator_get_next_as_optional", "_next_internal")),
    ("Session.run", re.compile(r"^TF_SessionRun\b|DirectSession::Run\("), ("_call_tf_sessionrun", "_run_fn")),
    ("a tf.function", None, ("quick_execute", "call_flat", "call_preflattened")),
    ("an eager op", re.compile(r"^TFE_(Py_)?Execute|^TFE_Py_FastPathExecute|EagerExecute\("), ()),
)


def tf_wait(thread: Thread) -> Optional[str]:
    """What a thread that runs Python waits for inside TensorFlow ("the next element of a tf.data iterator",
    "Session.run", "a tf.function", "an eager op"), from the frames on its stack; None where it runs no Python,
    is a pool's worker (a ``tf.py_function`` callback runs Python there) or is in no TensorFlow call."""
    if worker_loop(thread) is not None or not any(isinstance(f, PythonFrame) for f in thread.frames):
        return None
    for f in thread.frames:
        name = f.function or ""
        for what, native, python in _WAITS:
            if isinstance(f, PythonFrame):
                if name in python:
                    return what
            elif native is not None and native.search(name):
                return what
    return None


def runs_tf_work(thread: Thread) -> bool:
    """A thread that runs TensorFlow's work for others: a pool worker (a ``tf.py_function`` callback's
    Python frames included) or a thread with no Python frame, running a kernel, an executor or tf.data's
    work."""
    if worker_loop(thread) is None and any(isinstance(f, PythonFrame) for f in thread.frames):
        return False
    return any(_BUSY_RE.search(n) or _TF_DATA_RE.search(n) for n in _native_names(thread))
