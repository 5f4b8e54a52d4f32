"""Why a process does not progress, in one line, from one snapshot event (``stack``'s ``"triage"``).

The verdict is built from the stacks alone (with the states a snapshot puts on
threads: ``gil``, ``kernel``, ``progress``, and the inter-op pool's summary),
and names the thread, the user's line and the native frame it is blocked in.
The known patterns, tried in this order:

``self_deadlock``
    a thread waits for a mutex a frame of its own stack holds (a cycle of one edge in the wait-for graph: the
    lock object in its frame, read with DWARF, or the pthread mutex's ``__owner``): the op, the frame that
    holds it and the one that locks it again;
``deadlock``
    a cycle of several threads, said edge by edge;
``exit_waits_for_threads``
    the main thread is in ``threading._shutdown``: the program has ended and
    waits for its non-daemon threads, which are named with where they are;
``interpreter_finalizing``
    the interpreter is shutting down (``Py_FinalizeEx`` has begun) and the
    main thread is blocked there (a destructor, an ``atexit``-like handler, a
    ``__del__``);

``kernel_lock_held``
    a kernel's thread waits for a mutex another thread holds: the holder named, with its op, the frame that
    holds it (DWARF) or the mutex's ``__owner``, and where it is;
``kernel_lock_unknown``
    a kernel's thread waits for a mutex whose holder nothing records (an ``absl::Mutex``, TensorFlow's
    ``mutex``, in a library without DWARF): the mutex and what cannot be known;
``async_never_done``
    an eager op waits in ``AsyncOpKernel::Compute`` for its kernel's ``done`` while no thread works on
    anything (none of TensorFlow's own async kernels that wait by design): it returned without calling it;

``gil_held_blocked``
    a thread holds the GIL inside native code (``ctypes.PyDLL``, an extension
    that does not release it) while other threads wait for the GIL;
``pool_exhausted``
    every worker of TensorFlow's inter-op pool is inside a ``tf.py_function``
    callback or waits for the GIL, while a thread waits for a ``tf.function``:
    the callbacks wait for work that needs a pool thread;
``waiting_on_executor``
    every Python thread waits, one of them for a ``tf.function`` whose work is
    on an inter-op thread, in a named kernel or callback: the chain from the
    waiting call to where the work is;
``waiting_on_tf_data``
    every Python thread waits, one of them for the next element of a
    ``tf.data`` iterator, whose work is on tf.data's threads (recognised by
    their frames: tf.data's runner, its ``UnboundedThreadPool``), in a named
    kernel or callback;
``function_without_thread``
    a thread waits for a ``tf.function`` and no inter-op thread runs anything:
    its ops wait for an event from outside the process's threads; with a
    ``TF_CONFIG`` cluster of several tasks (``"cluster"`` on the event) that is
    a collective op waiting for its peers.

When none fits, the verdict says so and lists what it saw; it never guesses.
Pure: the event is a ``model.Event``; the verdict a ``model.HangVerdict`` (a TRIAGE of the JSON schema).
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional

from ..core import frameclass
from ..core.model import Event, EventNativeFrame, EventThread, HangVerdict, NativeFrame, Pool, PythonFrame, Wait
from ..core.tensorflow.executors import GET_NEXT_RE, TF_DATA, is_any_pool_worker, pool_of, runs_kernel
from . import waitgraph
from .threadwords import (
    base_name,
    blocked_in,
    callers_of,
    function_phrase,
    group_text,
    in_state,
    is_idle,
    kernel_frame,
    python_frames,
    python_where,
    stuck_note,
    user_where,
    where,
    who,
)

NO_POOL = Pool(has_name=False)  # an event without a pool summary, as the patterns read it


class _Scene:
    """What the patterns look at: the event's threads, the GIL's holder and waiters, the callers, the pool."""

    def __init__(self, event: Event) -> None:
        self.event = event
        self.threads: List[EventThread] = event.threads
        self.pid: Optional[int] = event.pid
        self.holder = next((t for t in self.threads if t.gil == "held"), None)
        self.waiters = [t for t in self.threads if t.gil == "waiting"]
        self.callers = callers_of(self.threads)
        self.pool: Pool = event.pool or NO_POOL  # (no summary: no worker seen)
        self.waits, self.loop, self.steps = waitgraph.analyse(event)


def triage(event: Event) -> HangVerdict:
    """The hang verdict (``verdict``, ``pattern``, ``gil_holder``, ``waiting_for_gil``, ``waiting_for_function``,
    ``stuck``, ``moving``, ``pool``, the wait-for graph) for a snapshot event (threads as ``analysis.event.make_event``
    gives them)."""
    s = _Scene(event)
    sampled = any(t.progress for t in s.threads)
    out = HangVerdict(
        waiting_for_gil=[t.tid for t in s.waiters],
        waiting_for_function=[{"tid": t.tid, "tf_function": t.tf_function.name if t.tf_function else None,
                               "at": user_where(t)} for t in s.callers],
        stuck=[t.tid for t in s.threads if t.progress == "stuck"] if sampled else None,
        moving=[t.tid for t in s.threads if t.progress == "moving"] if sampled else None,
        pool=s.event.pool,
        # the wait-for graph (analysis/waitgraph.py): every edge, the cycle (a deadlock) or the chain from the
        # thread the user waits on to where the work is
        waits=list(s.waits),
        cycle=list(s.loop) if s.loop else None,
        chain=list(s.steps))
    if s.holder is not None:
        f = python_where(s.holder)
        out.gil_holder = {"tid": s.holder.tid, "name": s.holder.name, "blocked_in": blocked_in(s.holder),
                          "function": f.function if f else None, "file": f.file if f else None,
                          "line": f.line if f else None}
    for pattern in (_self_deadlock, _deadlock, _exit_waits_for_threads, _interpreter_finalizing,
                    _fork_without_pools, _kernel_lock_held, _kernel_lock_unknown, _async_never_done,
                    _gil_held_blocked, _pool_exhausted, _waiting_on_peer, _queue_without_producer,
                    _waiting_on_executor, _waiting_on_tf_data, _function_without_thread, _kernel_does_not_return):
        text = pattern(s)
        if text:
            out.verdict = text
            out.pattern = pattern.__name__.lstrip("_")
            return out
    out.verdict = "no known hang pattern fits: " + _facts(s)
    return out


# -- patterns read off the wait-for graph ------------------------------------------------------------------
def _deadlock(s: _Scene) -> Optional[str]:
    return waitgraph.describe_cycle(s.event, s.loop) if s.loop else None


# Frames of taking a lock, between the wait and the code that takes it (libc's, absl's, nsync's, TensorFlow's
# and the C++ library's lock functions, gdb's inline frames of mutex_lock's constructor).
_LOCKING_RE = re.compile(r"^(syscall|__GI_syscall|futex|__futex|__lll_|_*pthread_|lll_|__GI___|absl::|nsync::|"
                         r"AbslInternal|tsl::mutex|tsl::tf_shared_lock|tensorflow::mutex|tensorflow::tf_shared_lock|"
                         r"std::|__gthread_|__gnu_cxx::)")


def _locker(t: EventThread) -> Optional[EventNativeFrame]:
    """The frame of the code that takes the lock a thread waits for: its first native frame past the lock's
    own (libc's, absl's, ``std::mutex``'s, ``mutex_lock``'s; a nameless frame of a system library among them: a
    libc whose symbol table lacks its internal functions, ``__lll_lock_wait``, as Python 3.14's has)."""
    for f in t.frames:
        if isinstance(f, PythonFrame):
            return None
        if not isinstance(f, NativeFrame):
            continue
        name = base_name(f.function or "")
        if _LOCKING_RE.search(name) or (name in ("", "??") and f.frame_class == "system"):
            continue
        return f
    return None


def frame_at(f: Optional[EventNativeFrame]) -> str:
    """``SelfLockOp::Refresh at self_lock.cc:35`` (with DWARF), else ``SelfLockOp::Refresh in self_lock.so``."""
    if f is None:
        return "?"
    name = base_name(f.function or "??")
    if f.file and f.line:
        return "%s at %s:%s" % (name, os.path.basename(f.file), f.line)
    return "%s in %s" % (name, f.library) if f.library else name


def _op_of(t: Optional[EventThread]) -> Optional[str]:
    """The type of the op a thread's kernel frames run."""
    if t is None:
        return None
    k = kernel_frame(t)
    if k is not None and k.op and k.op.type:
        return k.op.type
    return next((f.op.type for f in t.frames if isinstance(f, NativeFrame) and f.op and f.op.type), None)


def _op_prefix(t: Optional[EventThread]) -> str:
    op = _op_of(t)
    return "op %s: " % op if op else ""


def _thread(s: _Scene, tid: Optional[int]) -> Optional[EventThread]:
    return next((t for t in s.threads if t.tid == tid), None)


def _self_deadlock(s: _Scene) -> Optional[str]:
    """A thread that waits for a lock it holds itself (a cycle of one edge): a frame of its own stack holds it."""
    if not s.loop or len(s.loop) != 1 or s.loop[0].waits_for != s.loop[0].thread:
        return None
    w = s.loop[0]
    t = _thread(s, w.thread)
    if t is None:
        return None
    held_at = (t.lock_wait or {}).get("held_at")
    holds = " in %s" % held_at if held_at else " (the mutex records this thread as its owner)"
    return "%s%s waits for %s which it already holds (self-deadlock)%s: it locks it again in %s, from %s" % (
        _op_prefix(t), _subject(s, w), w.resource, holds, frame_at(_locker(t)), w.at)


def _kernel_lock_held(s: _Scene) -> Optional[str]:
    """A kernel's thread waits for a mutex another thread holds: the holder named, with what it does."""
    w = s.steps[0] if s.steps else None
    if w is None or w.waits_for is None or w.waits_for == w.thread or not w.resource.startswith("mutex "):
        return None
    t, holder = _thread(s, w.thread), _thread(s, w.waits_for)
    if t is None or holder is None or _op_of(t) is None:
        return None
    held_at = (t.lock_wait or {}).get("held_at")
    how = "its frame %s holds it" % held_at if held_at else "recorded as the mutex's __owner"
    op = _op_of(holder)
    k = next((f for f in holder.frames if isinstance(f, NativeFrame) and f.op), None) or _locker(holder)
    inner = next((f for f in holder.frames if isinstance(f, NativeFrame) and (f.function or "??") != "??"), None)
    now = "%s%s%s" % ("it runs op %s" % op if op else "it is", " in %s" % frame_at(k) if k else "",
                      ", blocked in %s" % re.sub(r"^__GI_+", "", base_name(inner.function or ""))
                      if inner is not None and inner is not k else "")
    return "%s%s waits in %s (from %s) for %s, held by %s (%s): %s%s" % (
        _op_prefix(t), _subject(s, w), frame_at(_locker(t)), w.at, w.resource, who(holder, s.pid, s.pool),
        how, now, stuck_note(holder))


def _kernel_lock_unknown(s: _Scene) -> Optional[str]:
    """A kernel's thread waits for a mutex whose holder nothing records: what is known is said."""
    w = s.steps[0] if s.steps else None
    if w is None or w.waits_for is not None or not w.resource.startswith("mutex "):
        return None
    t = _thread(s, w.thread)
    if t is None or _op_of(t) is None:
        return None
    return "%s%s waits in %s (from %s) for %s: %s" % (
        _op_prefix(t), _subject(s, w), frame_at(_locker(t)), w.at, w.resource, w.evidence)


def _async_never_done(s: _Scene) -> Optional[str]:
    """An eager async kernel whose ``done`` is owed while no thread works on anything: it returned without
    calling it."""
    w = _sink(s, waitgraph.ASYNC_DONE)
    if w is None:
        return None
    others = [t for t in s.threads if t.tid != w.thread and (runs_kernel(t) or not is_idle(t))]
    if others or s.pool.busy:
        return None
    op = w.resource[len(waitgraph.ASYNC_DONE):].strip()
    pool = " (%s idle)" % ("all %s" % _pool_threads(s.pool)) if s.pool.threads else ""
    return ("op %s: its async kernel returned without calling done; no thread works on it: %s waits in %s "
            "from %s, and every other thread waits%s" % (op, _subject(s, w), waitgraph.ASYNC_COMPUTE, w.at, pool))


_USER_KERNEL_RE = re.compile(r"::Compute(Async)?(\(|$)")  # gdb names a -g kernel's frame without its parameters


def _kernel_does_not_return(s: _Scene) -> Optional[str]:
    """The user's own kernel waits and does not return, while no other thread works and no other pattern explains
    the wait (a kernel that sleeps, waits on a condition variable nobody signals, reads a socket): the thread in
    it, the kernel's frame, the call it waits in.  TensorFlow's own kernels that wait (an iterator, a queue, a
    collective) are the other patterns' to explain."""
    first = s.steps[0].thread if s.steps else None
    for t in sorted(s.threads, key=lambda t: (t.tid != first, t.tid != s.pid)):
        k = next((f for f in t.frames if isinstance(f, NativeFrame) and f.frame_class == "user"
                  and _USER_KERNEL_RE.search(f.function or "")), None)
        op = _op_of(t)
        if k is None or op is None or not is_idle(t):
            continue
        if any(not is_idle(o) for o in s.threads if o is not t) or s.pool.busy:
            return None
        # the call the kernel made (sleep, pthread_cond_wait), not libc's futex underneath it; the C++ library's
        # templates between (std::condition_variable::wait, inlined in one build and not in another) passed over
        inside = [f for f in t.frames[:t.frames.index(k)] if isinstance(f, NativeFrame)
                  and (f.function or "??") != "??" and not frameclass.is_glue(f)
                  and not frameclass.is_standard_library(f)]
        waits = ", waiting in %s" % re.sub(r"^_+(GI_+)?", "", base_name(inside[-1].function or "")) if inside else ""
        called = python_where(t)
        return "op %s: %s runs your kernel %s and it does not return%s%s%s" % (
            op, who(t, s.pid, s.pool), frame_at(k), waits, ", called from %s" % where(called) if called else "",
            stuck_note(t))
    return None


def _sink(s: _Scene, *words: str) -> Optional[Wait]:
    """The first edge of the graph whose resource (no thread holds it) names one of ``words``, the chain's
    own first."""
    for w in list(s.steps) + list(s.waits):
        if w.waits_for is None and any(word in w.resource for word in words):
            return w
    return None


def _subject(s: _Scene, w: Wait) -> str:
    t = next((t for t in s.threads if t.tid == w.thread), None)
    return who(t, s.pid, s.pool) if t is not None else "thread %s" % w.thread


def _fork_without_pools(s: _Scene) -> Optional[str]:
    w = _sink(s, "forked child")
    if w is None:
        return None
    t = next((t for t in s.threads if t.tid == w.thread), None)
    k = kernel_frame(t) if t is not None else None
    op = "its %s" % k.op.type if k is not None and k.op else "its op"
    site = waitgraph.fork_site(t) if t is not None else None
    if site is not None and "pool thread" not in w.evidence:
        return ("%s waits in TensorFlow at %s, and no thread of this process runs its ops: it was forked at %s "
                "from a process that had started TensorFlow (fork copies only the forking thread), so the "
                "threads and locks TensorFlow's state counts on exist only in the parent" % (
                    _subject(s, w), w.at, site))
    return ("%s waits in TensorFlow at %s, and this process has none of TensorFlow's pool threads: it was forked "
            "after TensorFlow started its thread pools (fork copies only the forking thread), so %s waits for "
            "pool threads that do not exist in this child" % (_subject(s, w), w.at, op))


def _waiting_on_peer(s: _Scene) -> Optional[str]:
    w = _sink(s, "the other workers of its cluster")
    if w is None:
        return None
    cluster = s.event.cluster or {}
    tasks = cluster.get("tasks") or []
    me = cluster.get("task")
    others = [t.replace(":", " ") for t in tasks if t != me]
    peers = (" (%s, this process being %s)" % (", ".join(others), (me or "?").replace(":", " "))) if others else ""
    return "%s waits at %s for the other workers of its cluster%s: %s" % (
        _subject(s, w), w.at, peers, w.evidence)


def _queue_without_producer(s: _Scene) -> Optional[str]:
    """A TensorFlow queue's dequeue where no thread of the process runs an enqueue into a queue (its
    producer died or never started: a queue runner not started).  A Python queue or event is not claimed so:
    a thread still running may fill it; the chain under the verdict shows it."""
    w = _sink(s, "TensorFlow queue")
    if w is None:
        return None
    first = s.steps[0] if s.steps else w
    via = "" if first is w else " through %s" % ", ".join(
        "%s (%s)" % (_subject(s, step), step.resource) for step in s.steps if step is not w)
    return "%s waits at %s for %s%s: %s" % (_subject(s, first), first.at, w.resource, via, w.evidence)


def sink_note(s: _Scene) -> str:
    """``; it ends at thread 12 waiting for queue.Queue q (Queue.get at gen.py:15)``: where the chain from
    the thread the user waits on ends, when a thread waits there for something no thread holds."""
    if len(s.steps) < 2 or s.steps[-1].waits_for is not None:
        return ""
    last = s.steps[-1]
    return "; the chain ends at %s waiting at %s for %s" % (_subject(s, last), last.at, last.resource)


def _gil_held_blocked(s: _Scene) -> Optional[str]:
    if s.holder is None or not s.waiters or blocked_in(s.holder) is None:
        return None
    n = len(s.waiters)
    text = "%s holds the GIL in %s, %s%s; %d thread%s wait%s for it (%s)" % (
        who(s.holder, s.pid, s.pool), where(python_where(s.holder)), in_state(s.holder), stuck_note(s.holder), n,
        "" if n == 1 else "s", "s" if n == 1 else "", ", ".join(str(t.tid) for t in s.waiters))
    if s.callers:
        text += "; " + function_phrase(s.callers, s.pid)
    return text


def _main(s: _Scene) -> Optional[EventThread]:
    return next((t for t in s.threads if t.tid == s.pid), None)


def _exit_waits_for_threads(s: _Scene) -> Optional[str]:
    main = _main(s)
    if main is None or not any(f.function in ("_shutdown", "threading._shutdown")
                               and (f.file or "").endswith("threading.py") for f in python_frames(main)):
        return None
    others = [t for t in s.threads if t is not main and python_frames(t) and t.daemon is not True]
    if not others:
        return "the program has ended: the main thread waits in threading._shutdown for its non-daemon threads"
    return "the program has ended: the main thread waits in threading._shutdown for %d non-daemon thread%s: %s" % (
        len(others), "" if len(others) == 1 else "s",
        "; ".join("%s in %s, %s%s" % (_named(t), where(python_where(t)), in_state(t), stuck_note(t))
                  for t in others))


def _interpreter_finalizing(s: _Scene) -> Optional[str]:
    main = _main(s)
    if not s.event.finalizing or main is None:
        return None
    py = python_where(main)
    at = " in %s," % where(py) if py else ""
    return "the interpreter is shutting down (Py_FinalizeEx has begun) and the main thread is%s %s%s" % (
        at, in_state(main), stuck_note(main))


def _named(t: EventThread) -> str:
    """``thread 123 "loader-1"``: threading's name where there is one."""
    return 'thread %s "%s"' % (t.tid, t.python_name or t.name or "")


def _workers(s: _Scene) -> List[EventThread]:
    busy = set(s.pool.busy)
    return [t for t in s.threads if t.tid in busy]


def _pool_threads(pool: Pool) -> str:
    """"2 tf_Compute threads" (a pool TensorFlow names), "2 threads of the inter-op pool" (an unnamed one
    whose workers the frames tell apart), "5 worker threads of TensorFlow's pools" (some of whose pool no
    frame shows)."""
    n = pool.threads
    if not pool.unnamed:
        return "%d %s threads" % (n, pool.name or "tf_Compute")
    if pool.exact is not False:
        return "%d thread%s of the inter-op pool" % (n, "" if n == 1 else "s")
    return "%d worker thread%s of TensorFlow's pools" % (n, "" if n == 1 else "s")


def _pool_exhausted(s: _Scene) -> Optional[str]:
    if not s.callers or not s.pool.threads or s.pool.idle or s.pool.exact is False:
        return None
    workers = _workers(s)
    if len(workers) != s.pool.threads:
        return None
    if not all(python_frames(t) or t.gil == "waiting" for t in workers):
        return None
    return ("TensorFlow's inter-op pool is exhausted: all %s are inside tf.py_function callbacks "
            "or wait for the GIL (%s); %s, and no pool thread is free to run their work" % (
                _pool_threads(s.pool),
                group_text(workers),
                function_phrase(s.callers, s.pid)))


def _waiting_on_executor(s: _Scene) -> Optional[str]:
    if not s.callers or not s.pool.busy:
        return None
    busy = set(s.pool.busy)
    if not all(is_idle(t) for t in s.threads if python_frames(t) and t.tid not in busy):
        return None
    workers = _workers(s)
    if not workers:
        return None
    label = "the inter-op pool's " if s.pool.unnamed else (workers[0].name or "") + " "
    return "%s; the work is on %s" % (function_phrase(s.callers, s.pid), group_text(workers, label))


def _waiting_on_tf_data(s: _Scene) -> Optional[str]:
    waiting = [t for t in s.threads if python_frames(t) and not is_any_pool_worker(t)
               and any(isinstance(f, NativeFrame) and GET_NEXT_RE.search(f.function or "") for f in t.frames)]
    if not waiting or not all(is_idle(t) for t in waiting):
        return None
    workers = [t for t in s.threads if pool_of(t) == TF_DATA and (python_frames(t) or runs_kernel(t))]
    if not workers:
        return None
    busy = {t.tid for t in workers}
    if not all(is_idle(t) for t in s.threads if python_frames(t) and t.tid not in busy):
        return None
    groups: Dict[str, List[EventThread]] = {}
    for t in waiting:
        groups.setdefault(user_where(t), []).append(t)
    subjects = "; ".join("%s wait%s for the next element of a tf.data iterator at %s" % (
        who(ts[0], s.pid) if len(ts) == 1 else "threads %s" % ", ".join(str(t.tid) for t in ts),
        "s" if len(ts) == 1 else "", at) for at, ts in groups.items())
    return "%s; the work is on %s%s" % (subjects, group_text(workers, "tf.data "), sink_note(s))


def _function_without_thread(s: _Scene) -> Optional[str]:
    if not s.callers or not s.pool.threads or s.pool.busy:
        return None
    if not all(is_idle(t) for t in s.callers):
        return None
    text = "%s, and no thread runs its ops (all %s wait for work)" % (
        function_phrase(s.callers, s.pid), _pool_threads(s.pool))
    cluster = s.event.cluster or {}
    if len(cluster.get("tasks") or []) > 1:
        text += (": this process is task %s of a %d-task cluster (%s), so a collective op waits for "
                 "its peers" % (cluster.get("task") or "?", len(cluster["tasks"]), cluster.get("source", "TF_CONFIG")))
    else:
        text += ": its ops wait for an event from outside this process's threads"
    return text


def _facts(s: _Scene) -> str:
    if s.holder is not None:
        parts = ["%s holds the GIL in %s, %s" % (who(s.holder, s.pid, s.pool), where(python_where(s.holder)),
                                                 in_state(s.holder))]
    else:
        parts = ["no thread holds the GIL"]
    if s.waiters:
        parts.append("%d thread(s) wait for it" % len(s.waiters))
    if s.callers:
        parts.append(function_phrase(s.callers, s.pid))
    stuck = [t for t in s.threads if t.progress == "stuck"]
    if stuck:
        parts.append("stuck: %s" % ", ".join(str(t.tid) for t in stuck))
    if s.steps and s.steps[0].resource != "the GIL":  # the waits seen, from the thread the user waits on
        w = s.steps[-1]
        parts.append("%s waits at %s for %s%s" % (
            _subject(s, s.steps[0]), s.steps[0].at, s.steps[0].resource,
            "" if len(s.steps) == 1 else ", which ends at %s waiting at %s for %s" % (_subject(s, w), w.at,
                                                                                     w.resource)))
    return "; ".join(parts)
