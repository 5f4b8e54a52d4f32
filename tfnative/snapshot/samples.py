"""Several snapshots over time: which threads move and which are stuck (``stack --samples N --interval S``).

A hang and a slow step look alike in one snapshot; over several they differ
(LLNL STAT's third dimension).  ``take`` calls the snapshot function N times,
``interval`` seconds apart (each call holds the process only for its own
snapshot, and lets it run in between), and returns the last capture with each
thread marked:

* ``"progress": "stuck"``: the thread was there in every sample with the same
  stack, frame for frame (native frames by address, Python frames by file,
  line and function); ``"stuck_s"``: the seconds from the first sample to the
  last, a lower bound on how long it has been there;
* ``"progress": "moving"``: its stack differed in some sample, or it was not
  there (not yet started, or not selected then: another state).

A thread that keeps going back to the same wait (a polling loop that sleeps at
the same line) reads as stuck: the stacks alone cannot tell it from a wait that
never ends.  Pure apart from the clock and the sleep, which the caller may pass.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..core.model import Capture, PythonFrame, Thread


def signature(thread: Thread) -> Tuple[Any, ...]:
    """What must be equal for a thread to count as not having moved: each frame, innermost first."""
    out: List[Tuple[Any, ...]] = []
    for f in thread.frames:
        if isinstance(f, PythonFrame):
            out.append(("py", f.file, f.line, f.function))
        else:
            out.append(("native", getattr(f, "library", None), getattr(f, "address", None) or f.function))
    return tuple(out)


def progress(samples: List[Tuple[float, Capture]]) -> Dict[int, Dict[str, Any]]:
    """For each thread of the last sample, ``{"progress": ..., "stuck_s": ...}`` (``stuck_s`` when stuck).

    ``samples``: (time in seconds, capture) in the order taken; with fewer than
    two there is nothing to compare, and the result is empty.
    """
    if len(samples) < 2:
        return {}
    t_last, last = samples[-1]
    t_first = samples[0][0]
    earlier = [{t.tid: signature(t) for t in capture.threads} for _, capture in samples[:-1]]
    out: Dict[int, Dict[str, Any]] = {}
    for thread in last.threads:
        sig = signature(thread)
        if all(seen.get(thread.tid) == sig for seen in earlier):
            out[thread.tid] = {"progress": "stuck", "stuck_s": round(t_last - t_first, 3)}
        else:
            out[thread.tid] = {"progress": "moving"}
    return out


def take(count: int, interval: float, snapshot: Callable[[], Capture],
         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
         on_sample: Optional[Callable[[int], None]] = None) -> Capture:
    """``count`` snapshots ``interval`` seconds apart (from the start of one to the start of the next, at
    least); the last capture, its threads marked (``progress``, ``stuck_s``), with ``samples``:
    ``{"count", "interval_s", "span_s"}``.

    ``on_sample(i)`` is called before the i-th snapshot (from 1), e.g. for a progress line.
    """
    if count < 1:
        raise ValueError("count must be at least 1")
    samples: List[Tuple[float, Capture]] = []
    for i in range(count):
        if i:
            wait = samples[-1][0] + interval - clock()
            if wait > 0:
                sleep(wait)
        if on_sample is not None:
            on_sample(i + 1)
        started = clock()
        samples.append((started, snapshot()))
    last = samples[-1][1]
    marks = progress(samples)
    for thread in last.threads:
        mark = marks.get(thread.tid, {})
        thread.progress = mark.get("progress", thread.progress)
        thread.stuck_s = mark.get("stuck_s", thread.stuck_s)
    last.samples = {"count": count, "interval_s": interval, "span_s": round(samples[-1][0] - samples[0][0], 3)}
    return last
