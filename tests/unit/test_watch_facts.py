"""What a node watcher of ``watch --slurm-job`` knew of each process before its report held them (stopped, by
which signal; its CPU) goes to the head with the report's documents and comes back the same: the head names a
stopped rank of another node as ``watch`` names one of its own."""

import json

from tfnative.core.kstate import ProcessFacts as Facts
from tfnative.watch.hangreport import facts_from_json, facts_json


def test_facts_go_to_the_head_and_come_back_the_same():
    facts = {101: Facts(state="t", stopped_by="SIGSTOP", cpu_percent=0.0), 102: Facts(state="S", cpu_percent=3.5),
             103: Facts()}
    back = facts_from_json(json.loads(json.dumps(facts_json(facts))))
    assert back == facts
    assert back[101].stopped() and not back[102].stopped() and not back[103].stopped()


def test_what_is_not_facts_is_left_out():
    assert facts_from_json(None) == {} and facts_from_json([1, 2]) == {}
    got = facts_from_json({"12": {"state": 7, "stopped_by": ["SIGSTOP"], "cpu_percent": "high"}, "x": {},
                           "13": "T", "14": {"state": "T", "cpu_percent": 12}})
    assert got == {12: Facts(), 14: Facts(state="T", cpu_percent=12.0)}
