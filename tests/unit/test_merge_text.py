"""``merge --json``'s text (``merge_json_text``): exactly ``json.dumps(merge_json(root), indent=1)`` for a tree
of up to ``DEEP`` levels, and below that each node on one line as ``json.dumps`` writes it, the whole still the
same JSON; the text tree's deep levels; the folded stacks' counts."""

from __future__ import annotations

import json

from tfnative.analysis import tree as mtree
from tfnative.core.model import Document
from tfnative.output import merge
from tfnative.output.threadgroups import frame_text

from .test_merge import ODD, WAIT, doc, py, th, typed


def _tree(docs):
    return mtree.build_tree(frame_text, typed(docs))


def test_the_text_is_json_dumps_indent_1():
    docs = [doc(1, [th(1, WAIT), th(2, ODD)], host="n1"), doc(2, [th(1, WAIT)], labels={"rank": "7"}),
            doc(3, [th(5, ODD)], task=4)]
    docs[0]["scheduler"] = {"kind": "slurm", "rank": 2, "job": "12", "step": 0, "node": "n1"}
    root = _tree(docs)
    assert merge.merge_json_text(root) == json.dumps(merge.merge_json(root), indent=1)
    one = _tree([doc(1, [th(1, [py("main", 1)])])])  # a leaf right below the root
    assert merge.merge_json_text(one) == json.dumps(merge.merge_json(one), indent=1)
    empty = _tree([doc(1, [])])  # a process without Python threads: the root alone
    assert merge.merge_json_text(empty) == json.dumps(merge.merge_json(empty), indent=1)
    assert json.loads(merge.merge_json_text(empty))["tree"]["children"] == []


def _deep(levels: int, tail: str):
    frames = [py("f%d" % i, i, file="/app/%s.py" % (tail if i == 0 else "d")) for i in range(levels)]
    return th(1, frames)  # innermost first: f0 is the leaf


def _node_at(tree, depth: int):
    node = tree
    for _ in range(depth):
        node = node["children"][0]
    return node


def test_below_deep_levels_each_node_is_one_line():
    levels = merge.DEEP + 20
    root = _tree([doc(1, [_deep(levels, "a")]), doc(2, [_deep(levels, "b")])])
    text = merge.merge_json_text(root)
    whole = merge.merge_json(root)
    assert json.loads(text) == whole
    # down to DEEP levels as indent=1 writes it: the first lines are the same
    indented = json.dumps(whole, indent=1).splitlines()
    lines = text.splitlines()
    first_flat = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith('{"frame": '))
    assert lines[:first_flat] == indented[:first_flat]
    # the node at depth DEEP - 1 is the last one indented; the one at DEEP (indentation 2 * DEEP + 1), on
    # one line as json.dumps writes it, with all below it
    flat = _node_at(whole["tree"], merge.DEEP)
    assert lines[first_flat - 1].endswith('"children": [')
    assert lines[first_flat] == " " * (2 * merge.DEEP + 1) + json.dumps(flat)
    assert "[" + json.dumps(flat) not in text and ", ".join(json.dumps(c) for c in flat["children"][-1:]) in text
    # the two leaves, side by side on that line, after a ", "
    leaves = _node_at(whole["tree"], levels - 1)["children"]
    assert [c["frame"]["file"] for c in leaves] == ["/app/a.py", "/app/b.py"]
    assert json.dumps(leaves[0]) + ", " + json.dumps(leaves[1]) in lines[first_flat]
    assert {ln.strip() for ln in lines[first_flat + 1:]} == {"]", "}"}  # what closes the indented ones
    assert len(lines) - first_flat - 1 == 2 * merge.DEEP + 1
    assert lines[-1] == "}" and lines[-2] == " }"


def test_text_lines_below_deep_say_their_level():
    levels = merge.DEEP + 3
    lines = merge.text_lines(_tree([doc(1, [_deep(levels, "a")])]))
    assert len(lines) == levels + 1
    assert lines[merge.DEEP].startswith("  " * merge.DEEP + "[py] f")
    assert lines[merge.DEEP + 1].startswith("  " * merge.DEEP + "[level %d] [py] f" % (merge.DEEP + 1))
    assert lines[-1].startswith("  " * merge.DEEP + "[level %d] [py] f0 at /app/a.py:0" % levels)


def test_text_lines_count_threads_and_mark_one_outlier():
    docs = [doc(i, [th(1, WAIT), th(2, WAIT)], task=i) for i in range(3)] + [doc(9, [th(1, ODD)], task=9)]
    lines = merge.text_lines(_tree(docs))
    assert lines[0] == "4 processes, 7 threads: worker:0-2,9"
    assert lines[1] == "  [py] main at /app/train.py:30  <-- your code   [worker:0-2] (6 threads)"
    assert lines[4] == ("  [py] main at /app/train.py:28  <-- your code   [worker:9] (1 thread)   <== OUTLIER")
    even = [doc(i, [th(1, WAIT if i % 2 else ODD)], task=i) for i in range(4)]
    assert not any("OUTLIER" in ln for ln in merge.text_lines(_tree(even)))  # 2 and 2: no outlier


def test_the_root_counts_and_names_every_process():
    root = _tree([doc(1, [th(1, WAIT), th(2, WAIT)], host="h"), doc(2, [], host="h")])
    assert root.threads == 2 and sorted(root.members) == ["h:1"]  # members: processes with a stack in the tree
    assert [p["label"] for p in root.processes] == ["h:1", "h:2"] and root.frame is None
    assert merge.merge_json(root)["processes"] == [{"label": "h:1", "pid": 1, "host": "h"},
                                                   {"label": "h:2", "pid": 2, "host": "h"}]


def test_folded_counts_and_documents_without_threads():
    docs = typed([doc(1, [th(1, WAIT), th(2, WAIT)]), doc(2, []), doc(3, [th(1, ODD)])])
    folded = merge.folded_lines(docs)
    assert sorted(n for *_, n in (ln.rsplit(" ", 1) for ln in folded)) == ["1", "2"]
    assert merge.folded_lines(typed([doc(1, [])])) == []  # a document, no stack: nothing, not an error
    assert merge.folded_lines(iter([Document.from_json(doc(1, []))])) == []
