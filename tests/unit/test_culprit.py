"""``analysis/culprit.py`` on a job's documents: which process the others wait for and why it does not come, from
the documents and what the watch read beforehand (``ProcessFacts``), reading nothing itself; the line
``output/verdicttext.culprit_line`` words from it.

The documents are a recorded ``stack --json`` document (``data/doc_stack_a.json``) made three ranks of one
TensorFlow cluster, two of which wait for their peer in the collective (``waiting_on_peer``, as ``across`` says it).
"""

import json
import os
import sys

from tfnative.analysis import culprit
from tfnative.core.kstate import ProcessFacts
from tfnative.core.model import Document, HangVerdict
from tfnative.output.verdicttext import culprit_line

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
TASKS = ["worker:0", "worker:1", "worker:2"]


def _rank(index, pattern, tasks=TASKS):
    with open(os.path.join(DATA, "doc_stack_a.json")) as f:
        doc = Document.from_json(json.load(f))
    pid = 1000 + index
    doc.pid = pid
    doc.task = {"type": "worker", "index": index}
    event = doc.events[0]
    event.pid = pid
    event.threads[0].tid = pid
    event.cluster = {"task": "worker:%d" % index, "tasks": list(tasks)}
    event.triage = HangVerdict(verdict="it waits (%s)" % pattern, pattern=pattern)
    return doc


_OPENED = []
_WATCHING = [False]


def _audit(event, args):
    if _WATCHING[0] and event in ("open", "os.listdir", "os.scandir", "subprocess.Popen", "os.system"):
        _OPENED.append((event, args[0] if args else None))


sys.addaudithook(_audit)


def here(facts):
    """Facts by pid as a watch of this machine keys them (``ProcKey``: no node)."""
    return {("", pid): fact for pid, fact in facts.items()}


def _name(docs, facts):
    """``culprit.name`` with every file it opens recorded (it is to open none: the watch read what it needs)."""
    _OPENED.clear()
    _WATCHING[0] = True
    try:
        return culprit.name(docs, here(facts))
    finally:
        _WATCHING[0] = False


def test_the_rank_its_peers_wait_for_is_named_with_why_and_nothing_is_read():
    docs = [_rank(0, "waiting_on_peer"), _rank(1, None), _rank(2, "waiting_on_peer")]
    blame = _name(docs, {1001: ProcessFacts(state="S", cpu_percent=0.2)})
    assert _OPENED == []
    assert blame is not None and blame.peers_wait and blame.gone == ()
    assert blame.culprit["pid"] == 1001 and blame.culprit["label"] == "worker:1"
    assert blame.culprit["how"] == "peers_wait" and blame.culprit["cause"] == "elsewhere"
    assert blame.culprit["state"] == "S" and blame.culprit["cpu_percent"] == 0.2
    assert all(d.events[0].culprit == blame.culprit for d in docs)  # on every document's event
    line = culprit_line(blame.culprit, blame.peers_wait, blame.gone)
    assert line.startswith("the culprit: worker:1 (pid 1001), the rank the others wait for: it is not where the "
                           "others wait")


def test_a_stopped_process_is_the_culprit_and_its_verdict_says_stopped():
    docs = [_rank(0, "waiting_on_peer"), _rank(1, "waiting_on_peer")]  # worker:2 no longer runs
    blame = _name(docs, {1000: ProcessFacts(state="S"), 1001: ProcessFacts(state="t", stopped_by="SIGSTOP")})
    assert _OPENED == []
    assert blame is not None and blame.culprit["cause"] == "stopped" and blame.culprit["signal"] == "SIGSTOP"
    assert blame.gone == ("worker:2",)
    assert docs[1].events[0].triage.pattern == "process_stopped"
    assert docs[0].events[0].triage.pattern == "waiting_on_peer"
    line = culprit_line(blame.culprit, blame.peers_wait, blame.gone)
    assert "it is stopped (state T, by SIGSTOP)" in line and line.endswith("its peers worker:2 are no longer running")


def test_no_culprit_where_none_is_alone_out_of_the_collective():
    docs = [_rank(0, "waiting_on_peer"), _rank(1, None), _rank(2, None)]
    assert _name(docs, {}) is None
    assert _OPENED == []
    assert all(d.events[0].culprit is None for d in docs)


def test_a_slurm_ranks_culprit_is_named_with_its_node():
    docs = [_rank(0, "waiting_on_peer"), _rank(1, None), _rank(2, "waiting_on_peer")]
    docs[1].scheduler = {"kind": "slurm", "rank": 1, "node": "n2"}
    blame = _name(docs, {})
    assert blame is not None and blame.culprit["node"] == "n2" and docs[0].events[0].culprit["node"] == "n2"
    assert culprit_line(blame.culprit, blame.peers_wait, blame.gone).startswith(
        "the culprit: worker:1 (pid 1001 on node n2), the rank the others wait for: ")


STEP = (("_call", "/venv/lib/python3.11/site-packages/tensorflow/python/eager/polymorphic_function/x.py", 9),
        ("work", "/job/mwms_steps.py", 137), ("main", "/job/mwms_steps.py", 150))


def _facts(index, frames=STEP, call="futex", cpu=3.0, **kw):
    return ProcessFacts(state=kw.pop("state", "S"), cpu_percent=cpu, task="worker:%d" % index, tasks=tuple(TASKS),
                        main_frames=frames, main_call=call, **kw)


def _early(facts):
    _OPENED.clear()
    _WATCHING[0] = True
    try:
        return culprit.early(here(facts))
    finally:
        _WATCHING[0] = False


def test_early_names_a_stopped_rank_from_its_facts_alone_and_the_report_names_the_same():
    stall = (("stall", "/job/mwms_steps.py", 112), ("main", "/job/mwms_steps.py", 150))
    facts = {1000: _facts(0), 1001: _facts(1, stall, "clock_nanosleep", 0.0, state="T", stopped_by="SIGSTOP"),
             1002: _facts(2)}
    blame = _early(facts)
    assert _OPENED == []
    assert blame.culprit["pid"] == 1001 and blame.culprit["cause"] == "stopped" and blame.peers_wait
    assert culprit_line(blame.culprit, blame.peers_wait, blame.gone) == (
        "the culprit: worker:1 (pid 1001), the rank the others wait for: it is stopped (state T, by SIGSTOP): none "
        "of its threads runs until SIGCONT; its main thread is at stall at mwms_steps.py:112")
    docs = [_rank(0, "waiting_on_peer"), _rank(1, None), _rank(2, "waiting_on_peer")]
    assert culprit.name(docs, here(facts), ("", 1001)).culprit["pid"] == 1001


def test_early_names_the_one_rank_whose_main_thread_is_elsewhere_sleeping_or_not():
    stall = (("stall", "/job/mwms_steps.py", 112), ("main", "/job/mwms_steps.py", 150))
    sleeping = {1000: _facts(0), 1001: _facts(1, stall, "clock_nanosleep", 0.1), 1002: _facts(2), 1003: _facts(3)}
    blame = _early(sleeping)
    assert blame.culprit["cause"] == "sleeps" and blame.culprit["pid"] == 1001, blame
    assert blame.culprit["why"] == ("it sleeps (or polls with time.sleep) at stall at mwms_steps.py:112, 0.1% of a "
                                    "CPU over the last interval")
    leave = (("wait", "/usr/lib/python3.11/threading.py", 320), ("leave", "/job/mwms_steps.py", 93))
    blame = _early({1000: _facts(0), 1001: _facts(1, leave), 1002: _facts(2)})
    assert blame.culprit["cause"] == "elsewhere" and blame.culprit["why"] == (
        "it is not where the others wait (work at mwms_steps.py:137): its main thread is at leave at "
        "mwms_steps.py:93")


def test_early_names_the_one_rank_that_spins_and_none_where_the_facts_do_not_single_one_out():
    spin = (("spin", "/job/mwms_steps.py", 98),)
    blame = _early({1000: _facts(0), 1001: _facts(1, spin, None, 97.0), 1002: _facts(2)})
    assert blame.culprit["cause"] == "spins" and blame.culprit["why"] == (
        "it spins: its main thread runs at spin at mwms_steps.py:98, 97% of a CPU over the last interval")
    other = (("other", "/job/mwms_steps.py", 50),)
    assert _early({1000: _facts(0), 1001: _facts(1), 1002: _facts(2)}) is None  # all at one place
    assert _early({1000: _facts(0, other), 1001: _facts(1, (("x", "/job/a.py", 1),)), 1002: _facts(2)}) is None
    assert _early({1000: _facts(0), 1001: _facts(1, other)}) is None  # two tasks: no majority to stand out from
    assert _early({1000: _facts(0), 1001: _facts(1, None), 1002: _facts(2)}) is None  # a main thread not read


def test_two_ranks_of_one_pid_on_two_nodes_are_two_processes():
    """Pids are per node: the head joins every node's facts keyed by node and pid, and the stopped rank is the one
    of its node, in its early line and in the report's (whose documents name their node)."""
    stall = (("stall", "/job/mwms_steps.py", 112), ("main", "/job/mwms_steps.py", 150))
    facts = {("n1", 1001): _facts(1, node="n1"), ("n1", 1000): _facts(0, node="n1"),
             ("n2", 1001): _facts(2, stall, "clock_nanosleep", 0.0, state="T", stopped_by="SIGSTOP", node="n2")}
    blame = culprit.early(facts)
    assert blame.key == ("n2", 1001) and blame.culprit["label"] == "worker:2" and blame.culprit["node"] == "n2"
    docs = [_rank(0, "waiting_on_peer"), _rank(1, "waiting_on_peer"), _rank(2, None)]
    docs[2].pid = 1001  # worker:2 has worker:1's pid, on the other node
    for doc, node in zip(docs, ("n1", "n1", "n2")):
        doc.scheduler = {"kind": "slurm", "rank": int(doc.task["index"]), "node": node}
    named = culprit.name(docs, facts, blame.key)
    assert named.key == ("n2", 1001) and named.culprit["label"] == "worker:2" and named.culprit["cause"] == "stopped"
    assert docs[2].events[0].triage.pattern == "process_stopped"  # its own verdict, not worker:1's
    assert docs[1].events[0].triage.pattern == "waiting_on_peer"
