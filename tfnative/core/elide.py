"""Elide the middle of very deep stacks, keeping where the thread is and where it started (pure).

A 5000-deep recursion is read whole; what is shown keeps the innermost
frames (where the thread is) and the outermost ones (``<module>``, ``main``,
``_start``: how it got there), and puts one ``ElidedFrame`` (kind "elided") in
between: how many frames it stands for and which functions they run
(``... 4000 frames of recurse() ...``).
"""

from collections import Counter
from typing import List

from .model import AnyFrame, ElidedFrame

__all__ = ["ELIDED", "KEEP_INNER", "KEEP_OUTER", "elide", "elided_text"]

ELIDED = "elided"
KEEP_INNER = 500
KEEP_OUTER = 500


def elide(frames: List[AnyFrame], inner: int = KEEP_INNER, outer: int = KEEP_OUTER) -> List[AnyFrame]:
    """``frames`` (innermost first) as they are when there are at most ``inner + outer`` + 1, else elided.

    The entry standing for the cut frames has ``kind`` "elided", ``count``,
    ``functions`` (the most frequent names, most frequent first, at most 3)
    and ``function`` (them as one string, for readers of ``function``).
    """
    if len(frames) <= inner + outer + 1:
        return list(frames)
    middle = frames[inner:len(frames) - outer]
    counts = Counter(f.function or "??" for f in middle)
    names = [name for name, _ in counts.most_common(3)]
    marker: AnyFrame = ElidedFrame(count=len(middle), functions=names)
    return list(frames[:inner]) + [marker] + list(frames[len(frames) - outer:])


def elided_text(frame: ElidedFrame) -> str:
    """``... 4000 frames of recurse() ...`` (``recurse(), main() and others`` when they differ)."""
    names = ["%s()" % n if "(" not in n else n for n in frame.functions or ["??"]]
    more = len(names) > 1
    return "... %d frames of %s%s ..." % (frame.count, ", ".join(names), " and others" if more else "")
