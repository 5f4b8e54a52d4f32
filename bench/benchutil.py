"""Helpers shared by the benchmarks (run as scripts: ``bench/`` is on their path)."""

from __future__ import annotations

from typing import List, Optional


def longest_pause(gaps_file: str, start: float, end: float) -> float:
    """The longest gap a target's ticker wrote to ``gaps_file`` (lines ``AT GAP``, monotonic seconds)
    that began at or after ``start`` and ended by ``end`` (plus half a second): how long a tool held it."""
    worst = 0.0
    with open(gaps_file) as f:
        for line in f:
            at, gap = (float(x) for x in line.split())
            if start <= at - gap and at <= end + 0.5:
                worst = max(worst, gap)
    return worst


def publish(lines: List[str], out: Optional[str]) -> None:
    """Print a result table, and write it to ``out`` (a results file under ``bench/results/``) when given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)
