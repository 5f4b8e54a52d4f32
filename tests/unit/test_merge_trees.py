"""Merged trees that merge again (output/mergetree.py): each node reduces its ranks to one tree (``merge --tree``),
the head merges the node trees; the result is the tree of all documents at once."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfnative.analysis import tree as mtree
from tfnative.core import docread, rankset, treemodel
from tfnative.core.model import Document
from tfnative.errors import TfnativeError
from tfnative.output import merge, mergetree
from tfnative.output.threadgroups import frame_text

from ..installed import tfnative_command

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TFNATIVE = tfnative_command()

FRAMES = [{"kind": "python", "function": "f%d" % i, "file": "/app/m%d.py" % (i % 2), "line": 10 + i, "user": True}
          for i in range(5)] + [{"kind": "native", "function": "pthread_cond_wait", "library": "libc.so.6",
                                 "file": None, "line": None},
                                {"kind": "native", "function": "tensorflow::Foo::Run()", "file": None, "line": None,
                                 "library": "libtensorflow_framework.so.2"}]


def document(rank: int, stacks: List[List[int]], host: str = "node0") -> Dict[str, Any]:
    """A ``stack --json`` document of Slurm rank ``rank``: a thread per stack (frame numbers, innermost first;
    a Python frame at the bottom, so that each thread runs Python)."""
    threads = [{"tid": 100 * rank + i, "name": "python", "frames": [dict(FRAMES[j]) for j in s] + [dict(FRAMES[0])]}
               for i, s in enumerate(stacks)]
    return {"tfnative": 1, "pid": 1000 + rank, "host": host,
            "scheduler": {"kind": "slurm", "rank": rank, "job": "7", "step": "0", "node": host, "local_rank": 0},
            "events": [{"kind": "snapshot", "threads": threads}]}


def docs_of(raw: List[Dict[str, Any]]) -> List[Document]:
    return [Document.from_json(json.loads(json.dumps(d))) for d in raw]


def shape(root: treemodel.Node) -> Dict[Tuple[str, ...], Tuple[List[str], int]]:
    """Each path of the tree: its sorted members and its threads (the order of siblings left out)."""
    out: Dict[Tuple[str, ...], Tuple[List[str], int]] = {}
    todo: List[Tuple[treemodel.Node, Tuple[str, ...]]] = [(root, ())]
    while todo:
        node, path = todo.pop()
        out[path] = (sorted(node.members), node.threads)
        todo.extend((c, path + (c.key,)) for c in node.children.values())
    return out


def trees_of(groups: List[List[Dict[str, Any]]]) -> List[Any]:
    """Each group's ``merge --tree`` text, read back as ``merge`` reads its inputs."""
    texts = [("node%d" % i, mergetree.tree_json_text(mtree.reduce(frame_text, docs_of(g))) + "\n")
             for i, g in enumerate(groups)]
    return list(docread.iter_inputs((name, (text,)) for name, text in texts))


stack = st.lists(st.integers(0, len(FRAMES) - 1), min_size=0, max_size=8)
ranks = st.lists(st.lists(stack, min_size=1, max_size=3), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(stacks=ranks, cuts=st.lists(st.integers(0, 12), max_size=5), shuffle=st.randoms())
def test_trees_of_trees_are_the_tree_of_all_documents(stacks, cuts, shuffle):
    raw = [document(r, s, host="node%d" % (r // 4)) for r, s in enumerate(stacks)]
    whole = mtree.build_tree(frame_text, docs_of(raw))
    bounds = sorted({0, len(raw), *(c for c in cuts if c < len(raw))})
    groups = [raw[a:b] for a, b in zip(bounds, bounds[1:])]
    merged = mtree.reduce(frame_text, trees_of(groups))
    # in order: the same tree, the same text, the same merge --json, byte for byte
    assert merge.text_lines(merged) == merge.text_lines(whole)
    assert merge.merge_json_text(merged) == merge.merge_json_text(whole)
    # in any order of the documents across nodes and of the nodes: the same paths, members and counts
    mixed = list(raw)
    shuffle.shuffle(mixed)
    groups = [mixed[a:b] for a, b in zip(bounds, bounds[1:])]
    shuffle.shuffle(groups)
    again = mtree.reduce(frame_text, trees_of(groups))
    assert shape(again) == shape(whole)
    assert sorted(p["label"] for p in again.processes) == sorted(p["label"] for p in whole.processes)
    # a tree of trees is a tree too: merged once more with a document, as if all were documents
    extra = document(len(raw), [[1, 2]])
    assert shape(mtree.reduce(frame_text, [*trees_of([raw]), *docs_of([extra])])) == shape(
        mtree.build_tree(frame_text, docs_of(raw + [extra])))


@settings(max_examples=200, deadline=None)
@given(numbers=st.sets(st.integers(0, 10 ** 6), max_size=60), others=st.sets(st.text(max_size=6), max_size=4),
       heads=st.sampled_from(["rank", "worker", "host:12"]))
def test_rank_sets_round_trip_as_ranges(numbers, others, heads):
    labels = ["%s:%d" % (heads, n) for n in numbers] + list(others)
    m = rankset.Members()
    for label in reversed(labels):  # out of order: put in order on the way out
        m.add_label(label)
    ascending = rankset.Members()
    for label in sorted(labels, key=lambda t: (len(t), t)):  # in order: each joined to the range before it
        ascending.add_label(label)
    assert ascending.to_json() == m.to_json()
    back = rankset.Members()
    back.update_json(json.loads(json.dumps(m.to_json())))
    assert sorted(back) == sorted(set(labels)) and len(back) == len(set(labels))
    assert back.text() == merge.compress(set(labels)) or any(":" in o for o in others)
    spans = [item[1] for item in m.to_json() if isinstance(item, list)]
    # ranges, not one entry per rank (an "other" label may itself look like a rank: "0:0")
    assert sum(s.count(",") + 1 for s in spans) <= len(numbers) + sum(":" in o for o in others)
    if numbers and numbers == set(range(min(numbers), max(numbers) + 1)):
        assert m.to_json()[0] == [heads, "%d-%d" % (min(numbers), max(numbers)) if len(numbers) > 1
                                  else str(min(numbers))]


def test_many_ranks_take_a_few_bytes():
    m = rankset.Members()
    for r in range(80000):
        if r != 34587:
            m.add_label("rank:%d" % r)
    assert m.to_json() == [["rank", "0-34586,34588-79999"]] and len(m) == 79999


@pytest.mark.parametrize("bad,says", [
    ('{"tfnative_tree": 1, "processes": [], "nodes": []}', "nodes: expected a list of nodes"),
    ('{"tfnative_tree": 2, "processes": [], "nodes": [[-1, "", [], 0, null]]}', "tfnative_tree: a tree of version 1"),
    ('{"tfnative_tree": 1, "processes": [], "nodes": [[-1, "", [], 0, null], [5, "x", [], 1, {"kind": "python"}]]}',
     "nodes[1]: the root first"),
    ('{"tfnative_tree": 1, "processes": [], "nodes": [[-1, "", [["rank", "5-2"]], 0, null]]}',
     'nodes[0].members[0]: ranges like "0-7,9" expected, got "5-2"'),
    ('{"tfnative_tree": 1, "processes": [], "nodes": [[-1, "", [], 0, null], [0, "x", [], 1, {"kind": "nope"}]]}',
     "nodes[1]: frame.kind: expected one of native, python, elided"),
    ('{"tfnative_tree": 1, "processes": [{"label": 3}], "nodes": [[-1, "", [], 0, null]]}', "processes[0]"),
    ('{"tfnative_tree": 1, "processes": [{"label": "a", "scheduler": {"rank": "x"}}], "nodes": [[-1, "", [], 0, '
     'null]]}', "processes[0].scheduler.rank: expected an integer, got a string"),
    ('{"tfnative_merge": 1, "processes": [], "tree": {"frame": null, "members": [], "threads": 0, "children": [3]}}',
     "tree.children[0]: expected a NODE"),
])
def test_a_wrong_tree_says_where(bad, says):
    with pytest.raises(TfnativeError) as e:
        mtree.reduce(frame_text, docread.iter_inputs([("t.json", (bad + "\n",))]))
    assert says in str(e.value) and str(e.value).startswith("t.json: ")


def test_documents_alone_still_refuse_trees():
    tree = mergetree.tree_json_text(mtree.reduce(frame_text, docs_of([document(0, [[1]])])))
    with pytest.raises(TfnativeError, match="a merged tree"):
        list(docread.iter_documents([("t", tree)]))


def run(args: List[str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(TFNATIVE + args, input=stdin, capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_node_trees_merged_at_the_head_name_the_odd_rank(tmp_path):
    """The whole flow through the command: two "nodes" of 4 ranks reduce their documents with ``merge --tree``;
    the head merges the two trees (and ``merge --json`` of one of them, read back); the text is that of all
    8 documents merged at once, and the odd rank (5) is named with where it runs."""
    raw = [document(r, [[1, 2, 3] if r != 5 else [4, 2, 3], [6, 5]], host="node%d" % (r // 4)) for r in range(8)]
    files = []
    for n in range(2):
        r = run(["merge", "-", "--tree", "-"], "".join(json.dumps(d) + "\n" for d in raw[4 * n:4 * n + 4]))
        assert r.returncode == 0, r.stderr
        files.append(tmp_path / ("node%d.json" % n))
        files[-1].write_text(r.stdout)
    assert json.loads(files[1].read_text())["nodes"][0][2] == [["rank", "4-7"]]
    everything = tmp_path / "all.jsonl"
    everything.write_text("".join(json.dumps(d) + "\n" for d in raw))
    alone = run(["merge", str(everything)])
    assert alone.returncode == 0, alone.stderr
    head = run(["merge", *map(str, files)])
    assert head.returncode == 0, head.stderr
    assert head.stdout == alone.stdout
    odd = [ln for ln in head.stdout.splitlines() if "OUTLIER" in ln]
    assert odd and "[rank:5]" in odd[0] and "rank 5 on node node1" in odd[0]
    as_json = tmp_path / "node0.merge.json"
    r = run(["merge", str(everything.parent / "node0.json"), "--json", str(as_json)])
    assert r.returncode == 0, r.stderr
    mixed = run(["merge", str(as_json), str(files[1])])
    assert mixed.stdout == alone.stdout, mixed.stderr
    folded = run(["merge", *map(str, files), "--folded"])
    assert sorted(folded.stdout.splitlines()) == sorted(run(["merge", str(everything), "--folded"]).stdout.splitlines())
    bad = tmp_path / "bad.json"
    bad.write_text(files[0].read_text().replace('"4-7"', '"7-4"').replace('"0-3"', '"3-0"'))
    r = run(["merge", str(bad)])
    assert r.returncode not in (0, 70) and r.stderr.startswith("tfnative: error: ") and "Traceback" not in r.stderr
    r = run(["merge", *map(str, files), "--html", str(tmp_path / "x.html")])
    assert r.returncode not in (0, 70) and "not merged trees" in r.stderr
