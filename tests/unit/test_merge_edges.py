"""tfnative merge at its edges, through its public functions only: each error's whole message, the members'
names when a label is missing, shared or odd, the ranges' edge cases, ``merge --json``'s exact keys, and the
outlier's rank in words."""

import json
from functools import partial

import pytest

from tfnative.analysis import tree as mtree
from tfnative.core import docread, rankset, treemodel
from tfnative.core.model import Document
from tfnative.errors import TfnativeError
from tfnative.output import merge
from tfnative.output.threadgroups import frame_text

from .test_merge import ODD, WAIT, doc, nat, py, th, typed


def _error(texts) -> str:
    with pytest.raises(TfnativeError) as e:
        docread.parse_documents(texts)
    return str(e.value)


def test_each_error_says_where_and_what():
    assert _error([("in.json", "hello")]) == "in.json: not JSON at line 1, column 1 (Expecting value)"
    ok = json.dumps(doc(1, [th(1, WAIT)]))
    assert _error([("a", ok), ("b.json", ok + "\n  oops")]) == (
        "b.json: not JSON at line 2, column 3 (Expecting value)")
    assert _error([("in.json", ok + '\n{"other": 1}')]) == (
        "in.json (document 2, line 2): a document that is not tfnative schema 1 (from 'tfnative stack --json')")
    assert _error([("in.json", "[1]")]).endswith("not tfnative schema 1 (from 'tfnative stack --json')")
    assert _error([("in.json", '{"tfnative": 1, "events": 5}')]) == "in.json: events: expected a list, got an integer"
    assert _error([("in.json", "")]) == rankset.NO_DOCUMENTS
    for empty in (partial(mtree.build_tree, frame_text), merge.folded_lines):
        with pytest.raises(TfnativeError) as e:
            empty(iter([]))
        assert str(e.value) == rankset.NO_DOCUMENTS == (
            "no documents in the input (expected 'tfnative stack --json' output)")


def test_pdsh_prefixes_go_one_per_line():
    a = doc(1, [th(1, WAIT)], task=0)
    pretty = "\n".join("node-1.x_y: " + ln for ln in json.dumps(a, indent=1).splitlines())
    assert [d.pid for d in docread.parse_documents([("x", pretty)])] == [1]
    with pytest.raises(TfnativeError, match="not JSON"):  # a prefix inside the line is the line's
        docread.parse_documents([("x", 'node1: {"tfnative": 1, "pid": 3, "note": "n: x"} node2: 1')])


def _label(**kw) -> str:
    d = {"tfnative": 1, "pid": kw.pop("pid", 5)}
    d.update(kw)
    return treemodel.member_label(Document.from_json(d))


def test_member_label_falls_back_in_its_order():
    assert _label(task={"type": "worker"}) == "worker:?"  # no index
    assert _label(task={"type": None, "index": 1}, labels={"a": "b"}) == "a:b"  # no type: not a task
    assert _label(scheduler={"kind": "slurm", "rank": 0}) == "rank:0"  # rank 0 is a rank
    assert _label(scheduler={"kind": "slurm", "rank": 3}, labels={"a": "b"}) == "rank:3"  # before labels
    assert _label(scheduler={"kind": "slurm", "rank": None}, labels={"a": "b"}) == "a:b"
    assert _label(scheduler={"kind": "slurm"}, host="h") == "h:5"
    assert _label(labels={}, host="h") == "h:5" and _label(labels=["x"], host="h") == "h:5"
    assert _label(labels={"first": 1, "second": 2}) == "first:1"
    assert _label(pid=None, host="h") == "h:?" and _label() == "localhost:5"


def test_a_name_two_processes_share_becomes_host_pid():
    same = [Document.from_json(doc(p, [], task=1, host="h")) for p in (1, 2)]
    other = Document.from_json(doc(3, [], task=2, host="h"))
    assert treemodel.member_names(same + [other]) == ["h:1", "h:2", "worker:2"]
    twice = Document.from_json(doc(1, [], task=1, host="h"))  # the same process twice keeps its name
    assert treemodel.member_names([same[0], twice]) == ["worker:1", "worker:1"]


def test_compress_edge_cases():
    assert merge.compress(["a:b:1", "a:b:2", "a:b:4"]) == "a:b:1-2,4"  # the last colon splits
    assert merge.compress(["5", ":5", "x:", "x:1"]) == "x:1 5 :5 x:"  # no prefix or no number: as they are
    assert merge.compress(["w:0"]) == "w:0" and merge.compress(["w:3", "w:2", "w:3"]) == "w:2-3"
    assert merge.compress(["w:0", "w:1", "w:3", "w:4", "w:6"]) == "w:0-1,3-4,6"
    assert merge.compress([]) == ""


def test_merge_json_keys_exactly():
    frames = [dict(nat("futex_wait", addr="0x10"), source="  wait();"), py("main", 30)]
    docs = [doc(1, [th(1, frames)], host="n1"), doc(2, [th(1, frames)], labels={"rank": "7"})]
    docs[0]["scheduler"] = {"kind": "slurm", "rank": 2, "job": "12", "step": 0, "node": "n1"}
    out = merge.merge_json(mtree.build_tree(frame_text, typed(docs)))
    assert out["tfnative_merge"] == 1
    assert out["processes"] == [
        {"label": "rank:2", "pid": 1, "host": "n1",
         "scheduler": {"kind": "slurm", "rank": 2, "job": "12", "step": 0, "node": "n1"}},
        {"label": "rank:7", "pid": 2, "host": None}]
    tree = out["tree"]
    assert tree == {"frame": None, "members": ["rank:2", "rank:7"], "threads": 2, "children": tree["children"]}
    (main,) = tree["children"]
    (wait,) = main["children"]
    assert set(main) == {"frame", "members", "threads", "children"} and main["threads"] == 2
    assert main["members"] == ["rank:2", "rank:7"] and wait["children"] == []
    assert "address" not in wait["frame"] and "source" not in wait["frame"]
    assert wait["frame"]["function"] == "futex_wait" and wait["frame"]["library"] == "libc.so.6"


def test_the_outlier_says_where_its_rank_runs():
    docs = [doc(10 + i, [th(1, WAIT)], host="n%d" % i) for i in range(3)] + [doc(20, [th(1, ODD)], host="n9")]
    for i, d in enumerate(docs):
        d["scheduler"] = {"kind": "slurm", "rank": i, "job": "12", "step": 0}
    assert merge.text_lines(mtree.build_tree(frame_text, typed(docs))) == [
        "4 processes, 4 threads: rank:0-3",
        "  [py] main at /app/train.py:30  <-- your code   [rank:0-2] (3 threads)",
        "    [py] step at /app/train.py:20  <-- your code   [rank:0-2] (3 threads)",
        "      futex_wait in libc.so.6   [rank:0-2] (3 threads)",
        "  [py] main at /app/train.py:28  <-- your code   [rank:3] (1 thread)   <== OUTLIER: rank 3 on node n9 "
        "(slurm job 12, step 0), pid 20",
        "    [py] load at /app/train.py:9  <-- your code   [rank:3] (1 thread)",  # one member, no outlier: no words
        "      poll in libc.so.6   [rank:3] (1 thread)"]


def test_where_in_words():
    assert merge.where({"label": "h:1", "pid": 1, "host": "h"}) is None
    assert merge.where({"label": "rank:1", "pid": 42, "host": "h",
                        "scheduler": {"kind": "torchrun", "rank": 1, "local_rank": 1}}) == (
        "rank 1 (local rank 1) on host h (torchrun), pid 42")
    assert merge.where({"pid": 42, "scheduler": {"kind": "kubernetes", "rank": 0, "pod": "p-0"}}) == (
        "rank 0 in pod p-0 (kubernetes), pid 42")


def test_an_outlier_of_several_members_is_not_named():
    docs = [doc(i, [th(1, WAIT)], host="h") for i in range(3)] + [doc(7 + i, [th(1, ODD)], host="h")
                                                                  for i in range(2)]
    for i, d in enumerate(docs):
        d["scheduler"] = {"kind": "slurm", "rank": i, "job": "1"}
    odd = [ln for ln in merge.text_lines(mtree.build_tree(frame_text, typed(docs))) if "OUTLIER" in ln]
    assert odd == ["  [py] main at /app/train.py:28  <-- your code   [rank:3-4] (2 threads)   <== OUTLIER"]


def test_folded_all_threads_and_semicolons_in_names():
    frames = [nat("epoll_wait"), py("run", 3, file="/app/a;b.py")]
    docs = typed([doc(1, [th(1, WAIT), th(2, [nat("epoll_wait")])]), doc(2, [th(1, frames)])])
    assert sorted(merge.folded_lines(docs)) == [
        "[py] main at /app/train.py:30  <-- your code;[py] step at /app/train.py:20  <-- your code;"
        "futex_wait in libc.so.6 1",
        "[py] run at /app/a,b.py:3  <-- your code;epoll_wait in libc.so.6 1"]  # ";" separates frames only
    assert "epoll_wait in libc.so.6 1" in merge.folded_lines(docs, all_threads=True)
    assert len(merge.folded_lines(docs, all_threads=True)) == 3


def test_compress_never_writes_one_label_as_another():
    """A tail with a leading zero or a digit that is not ASCII is no rank (as in a merged tree's rank sets:
    ``rankset.Members``): ``w:01`` stays itself, and beside ``w:1`` it is not a second ``1``."""
    assert merge.compress(["w:01", "w:1", "w:2"]) == "w:1-2 w:01"
    assert merge.compress(["w:007", "w:8"]) == "w:8 w:007"
    assert merge.compress(["w:\u0663", "w:1"]) == "w:1 w:\u0663"
    assert merge.compress(["w:0", "w:00", "w:1"]) == "w:0-1 w:00"
