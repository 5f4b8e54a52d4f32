"""Hang verdicts that need several processes' documents (``stack --children``, ``--match``, several ``--pid``,
``watch``'s reports): a parent waiting for a child that was forked after TensorFlow started its pools, and the
workers of one TensorFlow cluster waiting in a collective for peers that are not in it (the stalled ranks, and
the tasks no process read is).  Each document's verdict (``analysis/verdict.py``'s, one process's) is changed
in place, its wait-for graph's edges replaced, never changed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Tuple

from ..core.model import Event, HangVerdict, Wait
from . import waitgraph


def across(docs: List[Any]) -> None:
    """Verdicts that need several processes' documents (``stack --children``, ``--match``, several ``--pid``),
    said on the document of the process the user waits on: a parent waiting for a child that was forked after
    TensorFlow started its pools, and a worker waiting in a collective for peers of its cluster that are not
    in it (the stalled ranks).  Each document's triage is changed in place."""
    # each document's event by the document, not its pid: the ranks of a Slurm job come from several nodes, and
    # pids are per node (two ranks may have the same one)
    events = {id(d): d.events[0] for d in docs if d.events and d.events[0].triage}
    forked = {(d.node(), d.pid): events[id(d)] for d in docs
              if id(d) in events and _verdict(events[id(d)]).pattern == "fork_without_pools"}
    for d in docs:
        e = events.get(id(d))
        if e is None or (d.node(), d.pid) in forked:
            continue
        # (a parent and its child share a node)
        _parent_of_forked(e, {pid: f for (node, pid), f in forked.items() if node == d.node() and pid is not None})
    _stalled_peers(docs, events)


def _verdict(e: Event) -> HangVerdict:
    """The hang verdict of an event that has one."""
    assert e.triage is not None
    return e.triage


def _parent_of_forked(e: Event, forked: Dict[int, Event]) -> None:
    t = _verdict(e)
    last = t.chain[-1] if t.chain else None
    if not forked or last is None or last.waits_for is not None:
        return
    resource = last.resource or ""
    named = [pid for pid in forked if resource == "child process %d" % pid]
    if not named and "child process" not in resource and "child processes" not in resource:
        return
    children = named or sorted(forked)
    child = forked[children[0]]
    where_child = next((w.at for w in _verdict(child).chain or []), "?")
    who_waits = "the main thread" if last.thread == e.pid else "thread %s" % last.thread
    t.pattern = "fork_without_pools"
    t.verdict = ("%s waits at %s for %s; %s forked after TensorFlow started its thread pools: %s at %s waits "
                    "for pool threads that do not exist in the child" % (
                        who_waits, last.at, resource if named else "its child processes %s" % ", ".join(
                            str(p) for p in children),
                        "it was" if len(children) == 1 else "they were",
                        "its main thread's op" if len(children) == 1 else "each one's op", where_child))


def _stalled_peers(docs: List[Any], events: Dict[int, Event]) -> None:
    """Workers of one cluster (the same TF_CONFIG task list) that wait in a collective, or for a tf.function
    with no thread running its ops, while other workers of it are elsewhere: those are the stalled ranks."""
    clusters: Dict[Tuple[Any, ...], List[Any]] = {}
    for d in docs:
        e = events.get(id(d))
        tasks = tuple((e.cluster or {}).get("tasks") or []) if e is not None else ()
        if len(tasks) > 1:
            clusters.setdefault(tasks, []).append(d)
    for members in clusters.values():
        waiting = [d for d in members if _verdict(events[id(d)]).pattern in ("waiting_on_peer",
                                                                               "function_without_thread")]
        others = [d for d in members if d not in waiting]
        if len(waiting) == len(members) > 1:
            _missing_peers(waiting, events)
        if not waiting or not others:
            continue
        stalled = "; ".join("%s (pid %s) is not in it: its main thread is at %s" % (
            _task_text(events[id(d)]), d.pid, _main_at(events[id(d)])) for d in others)
        for d in waiting:
            e = events[id(d)]
            t = _verdict(e)
            names = ", ".join(_task_text(events[id(o)]) for o in others)
            chain = t.chain or []
            if chain and chain[-1].waits_for is None:
                _sink_says(t, "%s of its cluster, not in the collective" % names,
                           "; the other workers' snapshots: %s" % stalled)
            else:
                edge = Wait(e.pid if e.pid is not None else d.pid, None,
                            "%s of its cluster, not in the collective" % names,
                            "the other workers' snapshots: %s" % stalled, _main_at(e))
                t.chain = chain + [edge]
                t.waits = [w for w in t.waits or [] if w.thread != e.pid] + [edge]
            t.pattern = "waiting_on_peer"
            t.verdict = "the main thread waits at %s for %s of its cluster, in a collective: %s" % (
                _main_at(e), names, stalled)


def _missing_peers(waiting: List[Any], events: Dict[int, Event]) -> None:
    """Every worker read of a cluster waits for its peers: the tasks of the cluster that no process read is
    are the ones they wait for (not started, gone, or on a node another step reads), named on each."""
    tasks = list((events[id(waiting[0])].cluster or {}).get("tasks") or [])
    present = {(events[id(d)].cluster or {}).get("task") for d in waiting}
    missing = [task for task in tasks if task not in present]
    if not missing:
        return
    names = ", ".join(task.replace(":", " ") for task in missing)
    for d in waiting:
        e = events[id(d)]
        t = _verdict(e)
        chain = t.chain or []
        if not chain or chain[-1].waits_for is not None:
            continue
        peers = "; ".join("%s (pid %s) waits too, at %s" % (_task_text(events[id(o)]), o.pid, _main_at(events[id(o)]))
                          for o in waiting if o is not d)
        _sink_says(t, "%s of its cluster, which no process read is" % names,
                   "; the other workers' snapshots: %s" % peers)
        t.verdict = "the main thread waits at %s for %s of its cluster: no process read is %s (not started, gone, " \
                    "or not read here); %s" % (_main_at(e), names, names, peers)


def _sink_says(t: HangVerdict, resource: str, more: str) -> None:
    """The chain's last edge (no thread holds what it waits for), and the graph's edges of its thread, now say
    what across the processes shows it waits for (``resource``), with the evidence (``more``) added."""
    thread = (t.chain or [])[-1].thread

    def said(w: Wait) -> Wait:
        return replace(w, resource=resource, evidence=w.evidence + more)

    t.chain = (t.chain or [])[:-1] + [said((t.chain or [])[-1])]
    t.waits = [said(w) if w.thread == thread else w for w in t.waits or []]


def _task_text(e: Event) -> str:
    task = (e.cluster or {}).get("task") or "?"
    kind, _, index = task.partition(":")
    return "%s %s" % (kind, index) if index else task


def _main_at(e: Event) -> str:
    main = next((t for t in e.threads if t.tid == e.pid), None)
    return waitgraph.where(main) if main is not None else "?"
