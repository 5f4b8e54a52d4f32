"""The process a stalled job waits for, and why it does not come (``tfnative watch``'s hang report).

From the report's documents (their verdicts after ``across.across``) and what the watcher knows beyond a
snapshot (``ProcessFacts`` of ``core/kstate.py``, read by the watch: the process's scheduler state before the
report held it, the signal of a group stop the crash catcher answered, its CPU over the last interval), in this
order:

1. a process that is stopped (state ``T``; a traced one ``t`` whose group stop the crash catcher answered,
   by that signal): nothing it owes anybody comes until SIGCONT;
2. in a TensorFlow cluster (the processes' ``TF_CONFIG``), the one member not in the collective while the
   others wait there for it (``waiting_on_peer``, as ``across`` says it).

Why it does not come, from its own verdict and facts (``cause``): ``stopped``; ``deadlock`` (the lock cycle);
``input_pipeline`` (it waits for its tf.data pipeline: the tf.data verdict); ``exiting`` (its program has
ended); ``spins`` (its main thread runs Python, holding the GIL, or runs on a CPU, while the process ran
``SPIN_PERCENT`` of a CPU or more over the last interval: its line and CPU); ``sleeps``
(its main thread is in ``time.sleep``: a sleep, or a loop that polls with one); ``elsewhere`` (it waits
somewhere else than the collective: where it is, and its verdict).

Before the report holds anything, ``early`` names the culprit where the watch's facts alone name it (the
``ProcessFacts`` read ``deep``: a stopped process; among the tasks of a cluster, the one that spins while the
others do not, or the one whose main thread is not where every other task's is, by its Python frames read
without stopping it), so that the watch can say it at once; ``name`` then names the same process from the
report's documents (``first``), with why from its stacks.

The culprit is written on each document's hang event (``"culprit"``, docs/json-schema.md); ``name`` gives it
with what the report's line says of it (``Blame``), which ``output/verdicttext.culprit_line`` words.  A stopped
process's own verdict says it is stopped (pattern ``process_stopped``), not what its stopped threads would be
doing.  Pure: what it knows of a process beyond its document (its state, its TF_CONFIG) was read by the watch
(``snapshot/progress.py``).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..core import frameclass
from ..core.kstate import ProcessFacts, ProcKey
from ..core.model import Document, Event, EventThread, PythonFrame
from . import waitgraph
from .threadwords import blocked_in

SPIN_PERCENT = 50.0  # a main thread that runs this much of a CPU over the last interval spins


Facts = Mapping[ProcKey, ProcessFacts]


@dataclass(frozen=True)
class Blame:
    """The culprit found: its JSON (as every document's event now carries it), whether the others wait for it
    as their peer (else the job waits for it), the tasks of its cluster no document of the report is, and the
    process as the facts name it (``key``)."""

    culprit: Dict[str, Any]
    peers_wait: bool
    gone: Tuple[str, ...] = ()
    key: Optional[ProcKey] = None


def key_of(doc: Document, facts: Facts) -> ProcKey:
    """The key of ``doc``'s process in ``facts``: its node and pid where the facts are a Slurm job's (the head's,
    every node's joined), else its pid on this machine's."""
    pid = doc.pid if doc.pid is not None else -1
    node = doc.node()
    return (node, pid) if node and (node, pid) in facts else ("", pid)


def _event(doc: Document) -> Optional[Event]:
    return doc.events[0] if doc.events else None


def _main(e: Event) -> Optional[EventThread]:
    return next((t for t in e.threads if t.tid == e.pid), e.threads[0] if e.threads else None)


def label(doc: Document) -> str:
    """``worker:1`` (its TF_CONFIG task), ``rank:3`` (its scheduler's rank), else ``process N``."""
    if doc.task and doc.task.get("type") is not None:
        return "%s:%s" % (doc.task.get("type"), doc.task.get("index"))
    rank = (doc.scheduler or {}).get("rank")
    return "rank:%s" % rank if rank is not None else "process %s" % doc.pid


def _pattern(doc: Document) -> Optional[str]:
    e = _event(doc)
    return e.triage.pattern if e is not None and e.triage is not None else None


def find(docs: Sequence[Document], facts: Facts,
         first: Optional[ProcKey] = None) -> Optional[Tuple[Document, str]]:
    """The culprit and how it was found (``"stopped"``, ``"peers_wait"``); None where nothing names one.
    ``first``: the culprit ``early`` named before the report (the same one, where its document is there)."""
    if first is not None:
        doc = next((d for d in docs if key_of(d, facts) == first), None)
        fact = facts.get(first)
        if doc is not None:
            return doc, "stopped" if fact is not None and fact.stopped() else "peers_wait"
    for doc in docs:
        fact = facts.get(key_of(doc, facts))
        if fact is not None and fact.stopped():
            return doc, "stopped"
    clusters: Dict[Tuple[Any, ...], List[Document]] = {}
    for doc in docs:
        e = _event(doc)
        tasks = tuple((e.cluster or {}).get("tasks") or []) if e is not None else ()
        if len(tasks) > 1:
            clusters.setdefault(tasks, []).append(doc)
    for members in clusters.values():
        waiting = [d for d in members if _pattern(d) == "waiting_on_peer"]
        others = [d for d in members if d not in waiting]
        if waiting and len(others) == 1:
            return others[0], "peers_wait"
    return None


def _at(t: Optional[EventThread]) -> str:
    """``work at mwms_steps.py:79`` (the user's innermost frame), else ``waitgraph.where``."""
    if t is None:
        return "?"
    f = next((f for f in t.frames if isinstance(f, PythonFrame) and f.user), None)
    if f is not None:
        return "%s at %s:%s" % (f.function or "?", os.path.basename(f.file or "?"), f.line)
    return waitgraph.where(t)


def _in(t: Optional[EventThread]) -> str:
    call = blocked_in(t) if t is not None else None
    return ", in %s()" % call if call else ""


def explain(doc: Document, fact: ProcessFacts, peers_at: Optional[str] = None) -> Dict[str, Any]:
    """The culprit's JSON (``"culprit"`` of the schema): its pid, label, ``cause``, ``why`` (one sentence),
    where its main thread is (``at``), its state, its stopping signal, its CPU.  ``peers_at``: where the
    processes that wait for it wait (``elsewhere`` says it is not there)."""
    e = _event(doc)
    main = _main(e) if e is not None else None
    at = _at(main)
    verdict = e.triage.verdict if e is not None and e.triage is not None else None
    pattern = _pattern(doc)
    cpu = fact.cpu_percent
    if fact.stopped():
        cause = "stopped"
        why = "it is stopped (state T, by %s): none of its threads runs until SIGCONT; its main thread is at %s%s" % (
            fact.stopped_by or "a stopping signal; which one /proc does not say", at, _in(main))
    elif pattern in ("deadlock", "self_deadlock") and verdict:
        cause, why = "deadlock", "it deadlocked: %s" % (verdict[len("deadlock: "):] if verdict.startswith(
            "deadlock: ") else verdict)
    elif pattern == "waiting_on_tf_data" and verdict:
        cause, why = "input_pipeline", "it waits for its input pipeline: %s" % verdict
    elif pattern in ("exit_waits_for_threads", "interpreter_finalizing") and verdict:
        cause, why = "exiting", "its program has ended: %s" % verdict
    elif cpu is not None and cpu >= SPIN_PERCENT and main is not None and (
            main.gil == "held" or blocked_in(main) is None or (main.kernel or {}).get("state") == "R"):
        cause, why = "spins", "it spins: its main thread runs at %s, %.0f%% of a CPU over the last interval" % (at, cpu)
    elif main is not None and blocked_in(main) == "time.sleep":
        cause, why = "sleeps", "it sleeps (or polls with time.sleep) at %s%s" % (at, "" if cpu is None else (
            ", %.1f%% of a CPU over the last interval" % cpu))
    else:
        cause = "elsewhere"
        why = "it is not where the others wait%s: its main thread is at %s%s%s" % (
            " (%s)" % peers_at if peers_at else "", at, _in(main), "; its verdict: %s" % verdict if verdict else "")
    out: Dict[str, Any] = {"pid": doc.pid, "label": label(doc), "cause": cause, "why": why, "at": at}
    if fact.state:
        out["state"] = fact.state
    if fact.stopped_by:
        out["signal"] = fact.stopped_by
    if cpu is not None:
        out["cpu_percent"] = round(cpu, 1)
    return out


def stopped_verdict(doc: Document, fact: ProcessFacts) -> None:
    """A stopped process's own verdict says so (pattern ``process_stopped``), in place."""
    e = _event(doc)
    if e is None or e.triage is None:
        return
    main = _main(e)
    e.triage.pattern = "process_stopped"
    e.triage.verdict = ("the process is stopped (state T, by %s): none of its threads runs until SIGCONT; its "
                        "main thread is at %s%s" % (fact.stopped_by or "a stopping signal", _at(main), _in(main)))


def name(docs: Sequence[Document], facts: Facts, first: Optional[ProcKey] = None) -> Optional[Blame]:
    """Find the culprit of ``docs`` (``first``: the one ``early`` named), write it on every document's event
    and return it with what the report's line says of it (None where none is found).  A stopped process's
    verdict says it is stopped."""
    for doc in docs:
        fact = facts.get(key_of(doc, facts))
        if fact is not None and fact.stopped():
            stopped_verdict(doc, fact)
    found = find(docs, facts, first)
    if found is None:
        return None
    doc, how = found
    waiting = [d for d in docs if d is not doc and _pattern(d) == "waiting_on_peer"]
    peers_at = None
    if waiting:
        e = _event(waiting[0])
        peers_at = _at(_main(e)) if e is not None else None
    key = key_of(doc, facts)
    culprit = explain(doc, facts.get(key) or ProcessFacts(), peers_at)
    culprit["how"] = how
    node = doc.node()  # a Slurm job's rank: its node
    if node:
        culprit["node"] = node
    for d in docs:
        for e in d.events:
            e.culprit = dict(culprit)
    return Blame(culprit, how == "peers_wait" or bool(waiting), tuple(_gone_peers(doc, docs)), key)


def _gone_peers(doc: Document, docs: Sequence[Document]) -> List[str]:
    """The tasks of the culprit's cluster that no document of the report is (ended meanwhile: TensorFlow's
    coordination service ends the peers of a task that stops sending heartbeats)."""
    e = _event(doc)
    tasks = list((e.cluster or {}).get("tasks") or []) if e is not None else []
    if len(tasks) < 2:
        return []
    present = set()
    for d in docs:
        de = _event(d)
        if de is not None:
            present.add((de.cluster or {}).get("task"))
    return [t for t in tasks if t not in present]


SLEEP_CALLS = ("clock_nanosleep", "nanosleep")  # the calls time.sleep blocks in


def _main_at(fact: ProcessFacts) -> Optional[str]:
    """Where the main thread is by its Python frames read without stopping it (``work at train.py:79``: the
    user's innermost frame, else the innermost frame); None where they were not read."""
    if not fact.main_frames:
        return None
    frames = [PythonFrame(function, file, line) for function, file, line in fact.main_frames]
    f = next((f for f in frames if frameclass.is_user_frame(f)), frames[0])
    return "%s at %s:%s" % (f.function or "?", os.path.basename(f.file or "?"), f.line)


def early(facts: Facts) -> Optional[Blame]:
    """The culprit as the watch's facts name it before any process is held (the module's ``early``): a stopped
    process; else, among the tasks of a cluster of three or more present, the one whose process ran
    ``SPIN_PERCENT`` of a CPU over the last interval while no other did (it spins), else the one whose main
    thread is not where all the others' are (it sleeps, where its main thread was in ``time.sleep``'s call; else
    it is elsewhere, why from its stacks).  None where the facts name none."""
    for key in sorted(facts):
        fact = facts[key]
        if fact.stopped():
            at = _main_at(fact)
            why = "it is stopped (state T, by %s): none of its threads runs until SIGCONT%s" % (
                fact.stopped_by or "a stopping signal; which one /proc does not say",
                "; its main thread is at %s" % at if at else "")
            return _early_blame(key, facts, "stopped", why, at)
    clusters: Dict[Tuple[str, ...], List[ProcKey]] = {}
    for key in sorted(facts):
        if facts[key].task is not None and len(facts[key].tasks) > 1:
            clusters.setdefault(facts[key].tasks, []).append(key)
    for members in clusters.values():
        if len(members) >= 3:
            found = _odd_task(members, facts)
            if found is not None:
                return found
    return None


def _odd_task(members: Sequence[ProcKey], facts: Facts) -> Optional[Blame]:
    """``early``'s rule over the tasks of one cluster."""
    cpu = {key: facts[key].cpu_percent for key in members}
    spinning = [key for key in members if (cpu[key] or 0.0) >= SPIN_PERCENT]
    at = {key: _main_at(facts[key]) for key in members}
    if len(spinning) == 1 and all(cpu[key] is not None for key in members):
        key = spinning[0]
        return _early_blame(key, facts, "spins", "it spins: its main thread runs at %s, %.0f%% of a CPU over the "
                            "last interval" % (at[key] or "?", cpu[key] or 0.0), at[key])
    if any(place is None for place in at.values()):
        return None
    counts = Counter(at.values())
    if len(counts) != 2 or sorted(counts.values()) != [1, len(members) - 1]:
        return None
    key = next(key for key in members if counts[at[key]] == 1)
    peers_at = next(place for place in counts if counts[place] > 1)
    fact, place = facts[key], at[key]
    if fact.main_call in SLEEP_CALLS:
        why = "it sleeps (or polls with time.sleep) at %s%s" % (place, "" if fact.cpu_percent is None else (
            ", %.1f%% of a CPU over the last interval" % fact.cpu_percent))
        return _early_blame(key, facts, "sleeps", why, place)
    why = "it is not where the others wait (%s): its main thread is at %s" % (peers_at, place)
    return _early_blame(key, facts, "elsewhere", why, place)


def _early_blame(key: ProcKey, facts: Facts, cause: str, why: str, at: Optional[str]) -> Blame:
    fact, pid = facts[key], key[1]
    out: Dict[str, Any] = {"pid": pid, "label": fact.task or "process %d" % pid, "cause": cause, "why": why,
                           "at": at or "?", "how": "stopped" if cause == "stopped" else "peers_wait"}
    if fact.state:
        out["state"] = fact.state
    if fact.stopped_by:
        out["signal"] = fact.stopped_by
    if fact.cpu_percent is not None:
        out["cpu_percent"] = round(fact.cpu_percent, 1)
    if fact.node or key[0]:  # a Slurm job's rank: its node, as ``name`` gives it from its document
        out["node"] = fact.node or key[0]
    present = {f.task for f in facts.values() if f.task is not None and f.tasks == fact.tasks}
    peers = [t for t in fact.tasks if t in present and t != fact.task]
    gone = tuple(t for t in fact.tasks if t not in present)
    return Blame(out, bool(peers), gone, key)
