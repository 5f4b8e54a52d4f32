"""``watch --slurm-job``'s head judges the job only once every node's watcher reads it (``Head.joined``).

A CI run caught the head calling a hang 5 s after its own start, before one node's watcher had sent a single
reading (that node, busy with eight TF ranks on two cores, took longer than ``--hang-after`` to start): the job
was judged on no reading at all.  The stall now counts from each node's first reading; a node silent for
``JOIN_WAIT_S`` is named once and the job judged without it."""

import io
import time

from tfnative.snapshot.slurm import Job
from tfnative.watch.feed import Message
from tfnative.watch.options import WatchOptions
from tfnative.watch.slurmjob import JOIN_WAIT_S, Head


def head(started_ago, hang_after=5.0):
    err = io.StringIO()
    h = Head(Job("42", "42", "RUNNING", "root", ["n1", "n2"]), WatchOptions(hang_after=hang_after), [], [],
             io.StringIO(), err)
    h.start = h.job_last = time.monotonic() - started_ago
    return h, err


def tick(h, node, age, ranks):
    h.handle(Message(0, {"node": node, "tick": {"age": age, "ranks": {str(p): age for p in ranks}}}))


def test_no_hang_before_every_node_has_read_the_job():
    h, err = head(started_ago=30.0)
    now = time.monotonic()
    assert not h.hung(now) and h.stalled_for(now) == 0.0  # 30 s past --hang-after 5, but no node read anything
    tick(h, "n1", 2.0, [101, 102])
    assert not h.hung(time.monotonic())  # n2's watcher has not read its ranks yet
    tick(h, "n2", 1.0, [201, 202])
    now = time.monotonic()
    assert 0.9 <= h.stalled_for(now) <= 1.5 and not h.hung(now)  # from n2's own start (the age it sent)
    assert h.hung(now + 4.5) and not h.hung(now + 3.5)
    assert err.getvalue() == ""


def test_a_node_silent_past_the_join_wait_is_named_once_and_the_job_judged_without_it():
    h, err = head(started_ago=JOIN_WAIT_S - 1.0)
    tick(h, "n1", 10.0, [101])
    now = time.monotonic()
    assert not h.hung(now)  # still waiting for n2
    assert h.hung(now + 1.5)  # the wait is over: n1 has not progressed for 10 s
    assert h.hung(now + 2.0)
    assert err.getvalue() == "tfnative: watch: node n2 sent no reading in 60 s: the job is judged from the other node\n"


def test_a_node_whose_watcher_ended_counts_as_read():
    h, _err = head(started_ago=30.0)
    tick(h, "n1", 6.0, [101])
    h.handle(Message(1, {"node": "n2", "bye": True}))  # its processes all exited before its first reading
    assert h.hung(time.monotonic())
