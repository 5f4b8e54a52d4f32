"""``--repro-minimize`` (issue #45): the reproducer's inputs shrunk while its script still dies the same way (the
signal, the op, the ``Check failed`` line: ``attach/repro.check``), each try a fresh process, bounded in tries and
in time.  Delta debugging over the changes ``analysis/shrink.py`` lists: a round tries all its changes at once,
and a set that does not die the same way is split in halves, each tried on its own (what is kept stays kept).
The first round takes dimensions to 1 and values to zeros, each later one halves the dimensions left and tries
ones, until a round keeps nothing or a bound is reached."""

from __future__ import annotations

import os
import tempfile
import time
from typing import Callable, List, NamedTuple, Optional, Tuple

from ..analysis import shrink
from ..core.model import Json
from ..files import write_output
from ..output import reprotext

TRIES = 40  # --repro-minimize-tries' default
SECONDS = 300.0  # --repro-minimize-seconds' default
_ROUNDS = ("one", "half", "half", "half", "half", "half", "half", "half")


class Bounds(NamedTuple):
    tries: int = TRIES
    seconds: float = SECONDS


class Tried(NamedTuple):
    """What a minimization did: the smallest call that died the same way and its check (the original's where
    nothing smaller did), the tries and how many were kept, the seconds, the elements before and after, and the
    bound that stopped it, if one did."""
    call: Json
    check: Json
    tries: int
    kept: int
    seconds: float
    elements: Tuple[int, int]
    stopped: Optional[str]

    def to_json(self) -> Json:
        out: Json = {"tries": self.tries, "kept": self.kept, "seconds": round(self.seconds, 1),
                     "elements": list(self.elements)}
        if self.stopped:
            out["stopped"] = self.stopped
        return out


Check = Callable[[str, float], Json]  # (a script's path, the seconds it may run) -> attach/repro.check's outcome


def minimize(call: Json, first: Json, need: float, bounds: Bounds, run: Check) -> Tried:
    """Shrink ``call``'s inputs; ``first``: the check of its own script, which took ``need`` seconds (no try starts
    with less time left); ``run``: the check of a try's script."""
    start = time.monotonic()
    best, best_check, tries, kept, stopped = call, first, 0, 0, None
    with tempfile.TemporaryDirectory(prefix="tfnative-minimize-") as tmp:
        path = os.path.join(tmp, "try.py")
        for kind in _ROUNDS:
            queue: List[List[shrink.Change]] = [shrink.changes(best, kind)]
            before = kept
            while queue and queue[0]:
                left = bounds.seconds - (time.monotonic() - start)
                if tries >= bounds.tries or left < need:
                    stopped = "tries" if tries >= bounds.tries else "time"
                    break
                chunk = queue.pop(0)
                candidate = shrink.apply(best, chunk)
                tries += 1
                outcome = _run(path, candidate, run, left)
                if outcome.get("outcome") == "same":
                    best, best_check, kept = candidate, outcome, kept + 1
                elif len(chunk) > 1:
                    queue[:0] = [chunk[:len(chunk) // 2], chunk[len(chunk) // 2:]]
            if stopped or kept == before:
                break
    sizes = (shrink.elements(call), shrink.elements(best))
    return Tried(best, best_check, tries, kept, time.monotonic() - start, sizes, stopped)


def _run(path: str, call: Json, run: Check, left: float) -> Json:
    """Write ``call``'s script (and its data file) at ``path`` and check it."""
    text, big = reprotext.script(call, os.path.basename(path) + ".npz")
    write_output(path, text.encode())
    if big:
        write_output(path + ".npz", reprotext.npz(big))
    elif os.path.exists(path + ".npz"):
        os.unlink(path + ".npz")
    return run(path, left)
