"""What a node watcher of ``watch --slurm-job`` knows of each process before its report holds them (stopped, by
which signal; its CPU; its task, its main thread's frames, its node) goes to the head in a ``facts`` message
before the report's documents and comes back the same: the head names the culprit from every node's facts
before the report (``hangreport.say_first``), a rank of another node with its node, as ``watch`` names one of
its own."""

import io
import json

from tfnative.core.kstate import ProcessFacts as Facts
from tfnative.snapshot.slurm import LABEL
from tfnative.watch.feed import Assembler, Feed
from tfnative.watch.hangreport import Hang, facts_from_json, facts_json, say_first
from tfnative.watch.options import WatchOptions


def test_facts_go_to_the_head_and_come_back_the_same():
    facts = {("", 101): Facts(state="t", stopped_by="SIGSTOP", cpu_percent=0.0),
             ("", 102): Facts(state="S", cpu_percent=3.5), ("", 103): Facts()}
    back = facts_from_json(json.loads(json.dumps(facts_json(facts))))
    assert back == facts
    assert back[("", 101)].stopped() and not back[("", 102)].stopped() and not back[("", 103)].stopped()
    assert facts_from_json(json.loads(json.dumps(facts_json(facts))), "n2") == {
        ("n2", pid): f for (_, pid), f in facts.items()}  # at the head: keyed by the node that sent them


def test_what_is_not_facts_is_left_out():
    assert facts_from_json(None) == {} and facts_from_json([1, 2]) == {}
    got = facts_from_json({"12": {"state": 7, "stopped_by": ["SIGSTOP"], "cpu_percent": "high"}, "x": {},
                           "13": "T", "14": {"state": "T", "cpu_percent": 12}})
    assert got == {("", 12): Facts(), ("", 14): Facts(state="T", cpu_percent=12.0)}


STEP = (("_call", "/venv/lib/python3.11/site-packages/tensorflow/python/eager/polymorphic_function/x.py", 9),
        ("work", "/job/mwms_steps.py", 137), ("main", "/job/mwms_steps.py", 150))
STALL = (("stall", "/job/mwms_steps.py", 112), ("main", "/job/mwms_steps.py", 150))
TASKS = tuple("worker:%d" % i for i in range(8))


def _rank(index, node, frames=STEP, call="futex", cpu=2.0, **kw):
    return Facts(state=kw.pop("state", "S"), cpu_percent=cpu, task="worker:%d" % index, tasks=TASKS,
                 main_frames=frames, main_call=call, node=node, **kw)


def _node_facts(node, first, sleeper=None, **kw):
    """Four ranks' deep facts as node ``node``'s watcher reads them (rank ``sleeper`` in time.sleep)."""
    return {("", 1000 + i): (_rank(i, node, STALL, "clock_nanosleep", 0.1, **kw) if i == sleeper else
                             _rank(i, node)) for i in range(first, first + 4)}


def _through_srun(feed_node, kind, value, **more):
    """A node's message as the head reads it: written by ``Feed``, cut by ``srun --label`` into 1 KiB pieces
    labelled with the task's number, joined by ``Assembler``."""
    raw = io.BytesIO()
    Feed(raw, feed_node).send(kind, value, **more)
    pieces = Assembler()
    got = []
    for line in raw.getvalue().decode().splitlines():
        for start in range(0, max(len(line), 1), 1024):
            m = LABEL.match("1: " + line[start:start + 1024])
            message = pieces.piece(int(m.group(1)), m.group(2))
            if message is not None:
                got.append(message)
    assert len(got) == 1
    return got[0]


def test_deep_facts_go_to_the_head_whole_in_one_facts_message():
    """What the head names the culprit by before the report (its task, its main thread's frames and call, its
    node) crosses srun's 1 KiB pieces and comes back the same, as the node's ``facts`` message."""
    facts = _node_facts("n2", 4, sleeper=5)
    facts[("", 1007)] = Facts(state="T", stopped_by="SIGSTOP", cpu_percent=0.0, node="n2")
    message = _through_srun("n2", "facts", facts_json(facts), number=1)
    assert message.kind() == "facts" and message.node == "n2" and message.body["number"] == 1
    assert facts_from_json(message.body["facts"]) == facts


def test_deep_facts_that_are_not_facts_are_left_out():
    got = facts_from_json({"5": {"task": "worker:5", "tasks": ["worker:4", 5], "main_frames": [["f", "a.py", "x"]],
                                 "main_call": 7, "node": ["n2"]},
                           "6": {"task": "worker:6", "tasks": ["worker:6", "worker:7"],
                                 "main_frames": [["f", None, 3], ["g", "b.py"]]}})
    # tasks not all names: no task; a line that is no number: none; a call and a node of the wrong types: none
    assert got[("", 5)] == Facts(main_frames=(("f", "a.py", None),))
    assert got[("", 6)] == Facts(task="worker:6", tasks=("worker:6", "worker:7"))  # a frame of two fields: none


def _first_lines(facts):
    out = io.StringIO()
    hang = Hang(1, "tfnative: watch: hang: no process of Slurm job 7 has progressed for 8.1 s (--hang-after 8): "
                   "8 processes on 2 nodes", facts)
    say_first(hang, WatchOptions(), out)
    return hang, out.getvalue().splitlines()


def test_the_head_names_a_rank_of_another_node_from_every_node_s_facts_before_the_report():
    """Both nodes' facts joined at the head: the headline, then the culprit with its node, as the report's line
    names it (``culprit_line``); ``hang.first`` is the rank the report names."""
    facts = {}
    for node, first in (("n1", 0), ("n2", 4)):
        message = _through_srun(node, "facts", facts_json(_node_facts(node, first, sleeper=5)), number=1)
        facts.update(facts_from_json(message.body["facts"], message.node))
    hang, lines = _first_lines(facts)
    assert lines == [hang.headline, "tfnative: watch: the culprit: worker:5 (pid 1005 on node n2), the rank the "
                     "others wait for: it sleeps (or polls with time.sleep) at stall at mwms_steps.py:112, 0.1% of a "
                     "CPU over the last interval"]
    assert hang.said == tuple(lines) and hang.first == ("n2", 1005)
    stopped = {**facts, ("n2", 1005): _rank(5, "n2", STALL, "clock_nanosleep", 0.0, state="t", stopped_by="SIGSTOP")}
    hang, lines = _first_lines(stopped)
    assert lines[1] == ("tfnative: watch: the culprit: worker:5 (pid 1005 on node n2), the rank the others wait for: "
                        "it is stopped (state T, by SIGSTOP): none of its threads runs until SIGCONT; its main thread "
                        "is at stall at mwms_steps.py:112")


def test_the_head_says_the_headline_alone_where_the_facts_name_no_culprit():
    facts = {**{("n1", p): f for (_, p), f in _node_facts("n1", 0).items()},
             **{("n2", p): f for (_, p), f in _node_facts("n2", 4).items()}}  # every rank where the others are
    hang, lines = _first_lines(facts)
    assert lines == [hang.headline] and hang.first is None
