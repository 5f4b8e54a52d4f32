"""TensorFlow's inter-op pool as a capture sees it: which threads are its workers, and which of them are busy.

TensorFlow runs the kernels of a ``tf.function`` (and the ``tf.py_function`` callbacks among them) on the
inter-op pool, whose threads are named ``tf_Compute`` and loop in Eigen's ``ThreadPoolTempl::WorkerLoop``.
A worker is busy when its stack runs an executor or a kernel (``ExecutorState::Process``, an op's
``Compute``); else it waits for work.  A thread that a worker started inherits the name ``tf_Compute`` but
has no ``WorkerLoop`` frame: it is no worker.  Pure: threads of the model (``model.Thread``).
"""

import re
from typing import Dict, List

from .model import NativeFrame, Thread

POOL_THREAD_NAMES = ("tf_Compute",)
_WORKER_RE = re.compile(r"ThreadPoolTempl<.*>::WorkerLoop\(")
_BUSY_RE = re.compile(r"Executor(State|Impl)\b|ExecutorState<|::Compute(Async)?\(|PyFuncOp|EagerPyFunc")


def _native_names(thread: Thread) -> List[str]:
    return [f.function or "" for f in thread.frames if isinstance(f, NativeFrame)]


def is_pool_worker(thread: Thread) -> bool:
    """A thread of the inter-op pool: its name, and Eigen's worker loop on its stack."""
    return thread.name in POOL_THREAD_NAMES and any(_WORKER_RE.search(n) for n in _native_names(thread))


def runs_kernel(thread: Thread) -> bool:
    """The thread runs an executor or a kernel (a pool worker that is not waiting for work)."""
    return any(_BUSY_RE.search(n) for n in _native_names(thread))


def pool_summary(threads: List[Thread]) -> Dict:
    """``{"name", "threads", "busy": [tid...], "idle": [tid...]}`` of the inter-op pool's workers among
    ``threads`` (every thread of the capture); ``threads`` 0 when none is seen."""
    workers = [t for t in threads if is_pool_worker(t)]
    busy = [t.tid for t in workers if runs_kernel(t)]
    return {"name": POOL_THREAD_NAMES[0], "threads": len(workers), "busy": busy,
            "idle": [t.tid for t in workers if t.tid not in busy]}
