"""Identical thread stacks, shown once: the equivalence ``stack --all-threads`` and ``merge`` share.

Two threads are the same when every frame reads the same once addresses and source lines are dropped
(``frame_text``), their headers say the same besides the thread's id and name (GIL, kernel state,
tf.function) and so do their ``--locals`` values and C++ exceptions in flight.  A group is titled by
its count and members: ``14 threads (tf_Compute 101-114)``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

from ..core.model import EventFrame, EventThread, PythonFrame
from . import render


def frame_text(frame: EventFrame) -> str:
    """The frame as ``stack`` prints it, without its index, address or source line (they differ between
    processes, and between threads at the same place)."""
    text = render.frame_line(0, frame, bare=True)
    return text[1:].lstrip("0123456789").lstrip() if text.startswith("#") else text.strip()


def thread_key(thread: EventThread, header: str = "") -> Tuple[Any, ...]:
    """What makes two threads the same: ``header`` (the title without id and name), their frames and,
    with ``--locals``, the values shown under them."""
    frames = thread.frames
    return (header, tuple(frame_text(f) for f in frames), thread.merge, thread.error,
            repr([f.variables for f in frames if isinstance(f, PythonFrame) and f.variables]),
            repr(thread.cxx_exception))


def group_threads(threads: Iterable[Tuple[EventThread, str]]) -> List[List[EventThread]]:
    """(thread, header) pairs grouped by ``thread_key``, groups in the order of their first thread."""
    groups: Dict[Tuple[Any, ...], List[EventThread]] = {}
    for t, header in threads:
        groups.setdefault(thread_key(t, header), []).append(t)
    return list(groups.values())


def ranges(numbers: Iterable[int]) -> str:
    """``101-114,120``: sorted integers with consecutive runs as ranges."""
    nums = sorted(set(numbers))
    parts: List[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else "%d-%d" % (nums[i], nums[j]))
        i = j + 1
    return ",".join(parts)


def group_title(members: List[EventThread]) -> str:
    """``14 threads (tf_Compute 101-114)``; names in the order first seen, each with its thread ids."""
    by_name: Dict[str, List[int]] = {}
    for t in members:
        by_name.setdefault(t.name or "?", []).append(int(t.tid or 0))
    names = ", ".join("%s %s" % (name, ranges(tids)) for name, tids in by_name.items())
    return "%d threads (%s)" % (len(members), names)
