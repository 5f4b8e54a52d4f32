"""``--repro-minimize`` (issue #45): the reproducer's inputs shrunk while its script still dies the same way (the
signal, the op, the ``Check failed`` line: ``attach/repro.check``), each try a fresh process, bounded in tries and
in time.  Delta debugging (ddmin) over the changes ``analysis/shrink.py`` lists: a round tries all its changes at
once, and where that does not die the same way, looks for the fewest to hold back (``_Search.round``).  The first
round takes dimensions to 1 and values to zeros, each later one halves the dimensions left and tries ones, until a
round keeps nothing or a bound is reached."""

from __future__ import annotations

import os
import tempfile
import time
from typing import Callable, List, NamedTuple, Optional, Tuple

from ..analysis import shrink
from ..core.model import Json
from ..files import open_output, write_output
from ..output import reprotext

TRIES = 60  # --repro-minimize-tries' default
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
    search = _Search(call, first, need, bounds, run)
    with tempfile.TemporaryDirectory(prefix="tfnative-minimize-") as tmp:
        search.path = os.path.join(tmp, "try.py")
        try:
            for kind in _ROUNDS:
                before = search.kept
                search.round(shrink.changes(search.best, kind))
                if search.kept == before:
                    break
        except _Bound as bound:
            search.stopped = str(bound)
    sizes = (shrink.elements(call), shrink.elements(search.best))
    return Tried(search.best, search.check, search.tries, search.kept, time.monotonic() - search.start, sizes,
                 search.stopped)


class _Bound(Exception):
    """A bound is reached: ``tries`` or ``time``."""


class _Search:
    """One minimization's state: the smallest call that died the same way so far, its check, the tries."""

    def __init__(self, call: Json, first: Json, need: float, bounds: Bounds, run: Check) -> None:
        self.best, self.check, self.need, self.bounds, self.run = call, first, need, bounds, run
        self.start, self.tries, self.kept, self.path = time.monotonic(), 0, 0, ""
        self.stopped: Optional[str] = None

    def round(self, changes: List[shrink.Change]) -> None:
        """Delta debugging (ddmin) over the changes to hold back: the fewest held back such that all the others,
        made at once on the round's call, still die the same way.  All are tried first; then, a set of them
        split in ``n`` parts, everything but one part, then one part alone; no set is tried twice."""
        base, seen = self.best, set()

        def dies_same(made: List[shrink.Change]) -> bool:
            key = frozenset(made)
            if not made or key in seen:
                return False
            seen.add(key)
            return self.attempt(shrink.apply(base, made))

        if not changes or dies_same(changes):
            return
        held, n = list(changes), 2
        while len(held) >= 2:
            parts = [held[k * len(held) // n:(k + 1) * len(held) // n] for k in range(n)]
            for part in parts:  # hold back one part alone: make all the others
                if dies_same([c for c in changes if c not in part]):
                    held, n = part, 2
                    break
            else:
                for part in parts:  # make one part too
                    if n > 2 and dies_same([c for c in changes if c not in held or c in part]):
                        held, n = [c for c in held if c not in part], max(n - 1, 2)
                        break
                else:
                    if n >= len(held):
                        return
                    n = min(len(held), 2 * n)

    def attempt(self, candidate: Json) -> bool:
        """Check ``candidate``'s script; keep it where it dies the same way.  Raises _Bound."""
        left = self.bounds.seconds - (time.monotonic() - self.start)
        if self.tries >= self.bounds.tries:
            raise _Bound("tries")
        if left < self.need:
            raise _Bound("time")
        self.tries += 1
        outcome = _run(self.path, candidate, self.run, left)
        if outcome.get("outcome") != "same":
            return False
        self.best, self.check, self.kept = candidate, outcome, self.kept + 1
        return True


def _run(path: str, call: Json, run: Check, left: float) -> Json:
    """Write ``call``'s script (and its data file) at ``path`` and check it."""
    text, big = reprotext.script(call, os.path.basename(path) + ".npz")
    write_output(path, text.encode())
    if big:
        with open_output(path + ".npz") as f:  # a large input's values (a spool.Raw) a chunk at a time
            reprotext.write_npz(f, big)
    elif os.path.exists(path + ".npz"):
        os.unlink(path + ".npz")
    return run(path, left)
