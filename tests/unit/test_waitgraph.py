"""The wait-for graph and the hang verdict read off it (analysis/waitgraph.py, analysis/verdict.py), on the
snapshots ``tests/integration/test_hangs.py`` took of the real hang programs of ``tests/hangs`` (their
``--json`` documents, kept in ``tests/hangs/captures``: ``TFNATIVE_HANGS_CAPTURE=1`` retakes them).

The graph is a function of the event alone: the verdict is computed again here from each snapshot's threads,
and must say what the live run said.  No process, no gdb.
"""

import json
import os

import pytest

from tfnative.analysis import verdict, waitgraph
from tfnative.analysis.across import across
from tfnative.core.model import Document, Event, EventThread, frames_from_json
from tfnative.output import verdicttext

from ..utils import ROOT, line_of

CAPTURES = os.path.join(ROOT, "tests", "hangs", "captures")
HANGS = os.path.join(ROOT, "tests", "hangs")
MISSING_RANK = os.path.join(ROOT, "tests", "scripts", "mwms_missing_rank.py")


def docs(name):
    with open(os.path.join(CAPTURES, name + ".json")) as f:
        text = f.read().replace("<worktree>", ROOT)
    text = text.strip()
    raw = [json.loads(text)] if not text.startswith("{") or "\n{" not in text else [
        json.loads(line) for line in text.splitlines() if line.strip()]
    return [Document.from_json(d) for d in raw]


def again(doc):
    """The event's triage computed anew from its threads."""
    event = doc.events[0]
    event.triage = verdict.triage(event)
    return event.triage


def marker(name, who):
    return "%s.py:%d" % (name, line_of(os.path.join(HANGS, name + ".py"), "# hangs here: %s" % who))


@pytest.mark.parametrize("name,pattern,resource", [
    ("data_map_event", "waiting_on_tf_data", "threading.Event"),
    ("data_generator_queue", "waiting_on_tf_data", "queue.Queue"),
    ("fifo_eager", "queue_without_producer", "FIFOQueue requests"),
    ("fifo_function", "queue_without_producer", "FIFOQueue requests"),
    ("tf1_queue_runner", "queue_without_producer", "FIFOQueue examples"),
    ("tf1_session_in_py_func", "pool_exhausted", "a free thread of TensorFlow's pool"),
])
def test_the_chain_from_the_main_thread_ends_where_the_work_is(name, pattern, resource):
    (doc,) = docs(name)
    t = again(doc)
    assert t.pattern == pattern, t.verdict
    assert marker(name, "main") in t.verdict
    chain = t.chain
    assert chain[0].thread == doc.pid and chain[0].at == marker(name, "main")
    assert resource in chain[-1].resource and chain[-1].waits_for is None, chain
    assert t.cycle is None and "deadlock" not in t.verdict


def test_a_queue_runner_never_started_is_said():
    (doc,) = docs("tf1_queue_runner")
    t = again(doc)
    assert "QueueRunner runs on no thread" in t.chain[-1].evidence
    assert "tf1_queue_runner.py:%d" % line_of(os.path.join(HANGS, "tf1_queue_runner.py"), "dequeue_many(8)") \
        in t.verdict


def test_deadlocks_are_cycles_named_edge_by_edge():
    (doc,) = docs("rlock_order")
    t = again(doc)
    assert t.pattern == "deadlock"
    tids = {th.python_name: th.tid for th in doc.events[0].threads}
    assert {(w.thread, w.waits_for) for w in t.cycle} == {(tids["loader"], tids["saver"]),
                                                                   (tids["saver"], tids["loader"])}
    assert t.verdict.startswith("deadlock: thread %d" % min(tids["loader"], tids["saver"]))
    for who, lock in (("loader", "lock_b"), ("saver", "lock_a")):
        assert "waits at %s for RLock %s" % (marker("rlock_order", who), lock) in t.verdict
    main = next(w for w in t.waits if w.thread == doc.pid)
    assert main.waits_for in (tids["loader"], tids["saver"]) and "joins" in main.resource

    (doc,) = docs("gil_mutex")
    t = again(doc)
    assert t.pattern == "deadlock"
    assert "the main thread holds the GIL and waits at %s for mutex 0x" % marker("gil_mutex", "main") in t.verdict
    assert [w.resource for w in t.cycle][1] == "the GIL"


def test_fork_after_tensorflow_started_its_pools():
    parent, child = docs("fork_matmul")
    t = again(child)
    assert t.pattern == "fork_without_pools"
    assert "its MatMul waits for pool threads that do not exist in this child" in t.verdict
    again(parent)
    assert parent.events[0].triage.chain[-1].resource == "child process %d" % child.pid
    across([parent, child])
    t = parent.events[0].triage
    assert t.pattern == "fork_without_pools"
    assert t.verdict.startswith("the main thread waits at %s for child process %d" % (
        marker("fork_matmul", "main"), child.pid))

    procs = docs("process_after_predict")
    for d in procs:
        again(d)
    across(procs)
    for d in procs[1:]:
        assert d.events[0].triage.pattern == "fork_without_pools"
        assert "it was forked at process_after_predict.py:" in d.events[0].triage.verdict


def test_the_stalled_worker_of_a_cluster_is_named():
    workers = docs("mwms_stalled_worker")
    for d in workers:
        again(d)
    across(workers)
    by_task = {d.events[0].cluster["task"]: d for d in workers}
    for task in ("worker:0", "worker:1"):
        t = by_task[task].events[0].triage
        assert t.pattern == "waiting_on_peer"
        assert "worker 2 (pid %d) is not in it" % by_task["worker:2"].pid in t.verdict
        assert "worker 2" in t.chain[-1].resource
    assert by_task["worker:2"].events[0].triage.pattern != "waiting_on_peer"


def test_ranks_of_one_pid_on_two_nodes_are_judged_apart():
    """The same job as a Slurm job over two nodes whose pids collide: worker 2 (node n2) has worker 0's pid (n1).
    Each document keeps its own verdict: the two others wait for worker 2, named with its pid."""
    workers = docs("mwms_stalled_worker")
    for d in workers:
        again(d)
    by_task = {d.events[0].cluster["task"]: d for d in workers}
    pid = by_task["worker:0"].pid
    for task, node in (("worker:0", "n1"), ("worker:1", "n1"), ("worker:2", "n2")):
        by_task[task].scheduler = {"kind": "slurm", "node": node, "rank": int(task[-1])}
    by_task["worker:2"].pid = by_task["worker:2"].events[0].pid = pid
    across(workers)
    for task in ("worker:0", "worker:1"):
        t = by_task[task].events[0].triage
        assert t.pattern == "waiting_on_peer" and "worker 2 (pid %d) is not in it" % pid in t.verdict, t.verdict
    assert by_task["worker:2"].events[0].triage.pattern != "waiting_on_peer"


@pytest.mark.parametrize("name", ["busy_control", "busy_matmul_control"])
def test_busy_processes_are_no_deadlock_and_no_fork(name):
    (doc,) = docs(name)
    t = again(doc)
    assert t.pattern not in ("deadlock", "fork_without_pools")


def n(function, library="libc.so.6"):
    return {"kind": "native", "function": function, "library": library}


def py(function, line, file="/home/me/app.py"):
    return {"kind": "python", "function": function, "file": file, "line": line, "user": True}


def test_a_chain_without_a_cycle_is_no_deadlock():
    """A waits for B (a lock B holds), B sleeps: a chain, not a cycle."""
    a = EventThread(tid=10, name="python", frames=frames_from_json([n("rlock_acquire", "libpython3.11.so.1.0"),
                                                               py("one", 5)]),
               lock_wait={"resource": "RLock lock_a", "owner": 11, "evidence": "owned by thread 11"})
    b = EventThread(tid=11, name="python", frames=frames_from_json([n("clock_nanosleep"), py("two", 9)]))
    event = Event(kind="snapshot", pid=10, threads=[a, b])
    waits, loop, steps = waitgraph.analyse(event)
    assert loop is None and [w.thread for w in steps] == [10]
    assert waitgraph.cycle([waitgraph.Wait(1, 2, "x", ""), waitgraph.Wait(2, 3, "y", ""),
                            waitgraph.Wait(3, 1, "z", "")])[0].thread == 1
    # the main thread first where it is in the cycle: a helper started after the pids wrapped has a lower id
    helper_first = [waitgraph.Wait(580, 32703, "RLock a", ""), waitgraph.Wait(32703, 580, "RLock b", "")]
    assert [w.thread for w in waitgraph.cycle(helper_first, 32703)] == [32703, 580]
    assert [w.thread for w in waitgraph.cycle(helper_first, 7)] == [580, 32703]  # (not in it: the lowest id)


def test_verdict_lines_show_the_chain():
    (doc,) = docs("data_map_event")
    t = again(doc)
    lines = verdicttext.verdict_lines(t, doc.pid)
    assert lines[0].startswith("verdict: the main thread waits for the next element of a tf.data iterator")
    assert lines[1].startswith("  -> the main thread at %s waits for" % marker("data_map_event", "main"))
    assert lines[-1] == "     the chain ends there: no thread of this process holds or owes it"


def test_a_missing_worker_of_a_cluster_is_named():
    """Workers 0 and 1 of a 3-worker cluster both wait at start-up (mwms_missing_rank.py): worker 2, which no
    process read is, is the one named; one worker's document alone (mwms_missing_peer) stays as it was."""
    workers = docs("mwms_missing_rank")
    for d in workers:
        again(d)
    across(workers)
    by_task = {d.events[0].cluster["task"]: d for d in workers}
    for task, other in (("worker:0", "worker:1"), ("worker:1", "worker:0")):
        t = by_task[task].events[0].triage
        assert t.pattern == "waiting_on_peer"
        assert t.chain[-1].resource == "worker 2 of its cluster, which no process read is", t.chain
        assert t.verdict.startswith("the main thread waits at mwms_missing_rank.py:%d for worker 2 of its cluster: "
                                    "no process read is worker 2" % line_of(MISSING_RANK, "# hangs here: worker"))
        assert "%s (pid %d) waits too" % (other.replace(":", " "), by_task[other].pid) in t.verdict
    (single,) = docs("mwms_missing_peer")
    again(single)
    before = single.events[0].triage.verdict
    across([single])
    assert single.events[0].triage.verdict == before and "worker 1" in before
