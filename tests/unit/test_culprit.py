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


def _name(docs, facts):
    """``culprit.name`` with every file it opens recorded (it is to open none: the watch read what it needs)."""
    _OPENED.clear()
    _WATCHING[0] = True
    try:
        return culprit.name(docs, facts)
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
