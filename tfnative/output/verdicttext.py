"""A hang verdict as text (``verdict: ...`` and the chain or cycle of waits under it): a function of the
model's ``HangVerdict``, which ``analysis/verdict.py`` computes."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence

from ..core.model import HangVerdict, Wait


def verdict_lines(triage: Optional[HangVerdict], pid: Optional[int]) -> List[str]:
    """``verdict: ...`` and, under it, the cycle or the chain of waits as a short block (text output); none
    for an event without a verdict."""
    if triage is None:
        return []
    lines = ["verdict: %s" % triage.verdict]
    steps = triage.cycle or triage.chain or []
    if len(steps) > 1 or (steps and triage.pattern is None):
        lines += ["  " + line for line in chain_lines(steps, pid)]
    return lines


def culprit_line(culprit: Mapping[str, Any], peers_wait: bool, gone: Sequence[str]) -> str:
    """The line that names a hang's culprit (``analysis/culprit.Blame``: its JSON, whether its peers wait for it,
    the tasks of its cluster no longer running)."""
    whom = "the rank the others wait for" if peers_wait else "the process the job waits for"
    node = culprit.get("node")  # a Slurm job's rank: its node
    line = "the culprit: %s (pid %s%s), %s: %s" % (culprit["label"], culprit["pid"],
                                                   " on node %s" % node if node else "", whom, culprit["why"])
    if gone:
        line += "; its peers %s are no longer running" % ", ".join(gone)
    return line


def chain_lines(steps: Sequence[Wait], pid: Optional[int]) -> List[str]:
    """A chain (the model's ``Wait`` edges) as a short block: ``-> the main thread at app.py:46 waits for X, held
    by thread 5 (evidence)``; where the last step has no holder, a line that says the chain ends there."""
    lines = []
    for w in steps:
        tid = w.thread
        who = "the main thread" if tid == pid else "thread %s" % tid
        holder = w.waits_for
        target = "" if holder is None else ", held by %s" % ("the main thread" if holder == pid else
                                                             "thread %s" % holder)
        lines.append("-> %s at %s waits for %s%s (%s)" % (who, w.at, w.resource, target, w.evidence))
    if steps and steps[-1].waits_for is None:
        lines.append("   the chain ends there: no thread of this process holds or owes it")
    return lines
