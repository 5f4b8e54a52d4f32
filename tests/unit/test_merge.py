"""tfnative merge on hand-made documents: tree shape, members, outlier, ranges, input forms, bad input."""

import json
import subprocess
from pathlib import Path

import pytest

from tfnative.analysis import tree as mtree
from tfnative.analysis.frames import mark_documents
from tfnative.core import docread, treemodel
from tfnative.core.model import Document
from tfnative.errors import TfnativeError
from tfnative.output import merge
from tfnative.output.threadgroups import frame_text

from ..utils import TFNATIVE


def py(fn, line, file="/app/train.py"):
    return {"kind": "python", "function": fn, "file": file, "line": line}


def nat(fn, lib="libc.so.6", addr="0x1"):
    return {"kind": "native", "function": fn, "file": None, "line": None, "library": lib, "address": addr}


def doc(pid, threads, task=None, labels=None, host=None):
    d = {"tfnative": 1, "pid": pid, "events": [{"kind": "snapshot", "pid": pid, "threads": threads}]}
    if task is not None:
        d["task"] = {"type": "worker", "index": task}
    if labels:
        d["labels"] = labels
    if host:
        d["host"] = host
    return d


def typed(docs):
    """``docs`` read back, marked by analysis as ``merge`` reads them (``mark_documents``)."""
    out = [Document.from_json(d) for d in docs]
    mark_documents(out)
    return out


def th(tid, frames, name="python"):
    return {"tid": tid, "name": name, "frames": frames}  # frames innermost first


WAIT = [nat("futex_wait", addr="0x10"), nat("_PyEval_Vector", "python3.11"), py("step", 20),
        py("main", 30)]
ODD = [nat("poll"), py("load", 9), py("main", 28)]


def test_identical_stacks_one_branch_all_members():
    docs = [doc(100 + i, [th(1, WAIT)], task=i) for i in range(3)]
    root = mtree.build_tree(frame_text, typed(docs))
    assert [k for k in root.children] == ["[py] main at /app/train.py:30  <-- your code"]
    node = root.children["[py] main at /app/train.py:30  <-- your code"]
    chain = []
    while node.children:
        (node,) = node.children.values()
        chain.append(node.key)
    assert chain[0] == "[py] step at /app/train.py:20  <-- your code"
    assert chain[-1].startswith("futex_wait in libc.so.6")
    assert not any("_PyEval_Vector" in k for k in chain)  # glue hidden
    assert sorted(node.members) == ["worker:0", "worker:1", "worker:2"] and node.threads == 3


def test_common_prefix_and_outlier():
    same_main = [nat("poll"), py("load", 9), py("main", 30)]
    docs = [doc(100 + i, [th(1, WAIT)], task=i) for i in range(4)] + [doc(200, [th(1, same_main)], task=4)]
    root = mtree.build_tree(frame_text, typed(docs))
    (top,) = root.children.values()
    assert len(top.members) == 5
    odd = mtree.outlier(top)
    assert odd is not None and odd.key == "[py] load at /app/train.py:9  <-- your code"
    assert list(odd.members) == ["worker:4"]
    text = "\n".join(merge.text_lines(root))
    assert "[py] load at /app/train.py:9  <-- your code   [worker:4] (1 thread)   <== OUTLIER" in text
    assert "[worker:0-4]" in text


def test_no_outlier_when_tied():
    docs = [doc(1, [th(1, WAIT)], task=0), doc(2, [th(1, ODD)], task=1)]
    root = mtree.build_tree(frame_text, typed(docs))
    assert mtree.outlier(root) is None


def test_threads_vs_processes():
    docs = [doc(10, [th(1, WAIT), th(2, WAIT), th(3, [nat("epoll_wait")])], host="h1")]
    root = mtree.build_tree(frame_text, typed(docs))
    (top,) = root.children.values()
    assert top.threads == 2 and list(top.members) == ["h1:10"]
    assert mtree.build_tree(frame_text, typed(docs), all_threads=True).threads == 3


def test_member_names_and_ranges():
    assert treemodel.member_label(Document.from_json(doc(5, [], task=2))) == "worker:2"
    assert treemodel.member_label(Document.from_json(doc(5, [], labels={"rank": "3", "node": "n1"}))) == "rank:3"
    # task first
    assert treemodel.member_label(Document.from_json(doc(5, [], task=2, labels={"rank": "3"}))) == "worker:2"
    assert treemodel.member_label(Document.from_json(doc(5, [], host="n1"))) == "n1:5"
    assert treemodel.member_label(Document.from_json(doc(5, []))) == "localhost:5"
    assert merge.compress(["worker:%d" % i for i in (0, 1, 2, 3, 4, 5, 6, 8)]) == "worker:0-6,8"
    assert merge.compress(["ps:0", "worker:1", "worker:2", "chief"]) == "ps:0 worker:1-2 chief"


def test_input_forms_jsonl_concatenated_pretty_and_pdsh():
    a, b = doc(1, [th(1, WAIT)], task=0), doc(2, [th(1, WAIT)], task=1)
    jsonl = json.dumps(a) + "\n" + json.dumps(b) + "\n"
    pretty = json.dumps(a, indent=1) + json.dumps(b, indent=2)
    pdsh = "node1: " + json.dumps(a) + "\nnode2: " + json.dumps(b) + "\n"
    for text in (jsonl, pretty, pdsh):
        docs = docread.parse_documents([("x", text)])
        assert [d.pid for d in docs] == [1, 2]


@pytest.mark.parametrize("text,msg", [("", "no documents"), ("   \n", "no documents"),
                                      ('{"other": 1}', "not tfnative schema 1"),
                                      ("hello world", "not JSON"), ('{"tfnative": 1', "not JSON")])
def test_bad_input(text, msg):
    with pytest.raises(TfnativeError, match=msg):
        docread.parse_documents([("x", text)])


def test_folded():
    docs = [doc(1, [th(1, WAIT), th(2, WAIT)]), doc(2, [th(1, ODD)])]
    lines = merge.folded_lines(typed(docs))
    assert ("[py] main at /app/train.py:30  <-- your code;[py] step at /app/train.py:20  <-- your code;"
            "futex_wait in libc.so.6 2") in lines
    assert len(lines) == 2


def test_cli_json_and_errors(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(doc(i, [th(1, WAIT)], task=i)) for i in range(3)) + "\n")
    out = tmp_path / "tree.json"
    r = subprocess.run([*TFNATIVE, "merge", str(src), "--json", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    tree = json.loads(out.read_text())
    assert tree["tfnative_merge"] == 1 and len(tree["processes"]) == 3
    assert tree["tree"]["frame"] is None and tree["tree"]["members"] == ["worker:0", "worker:1", "worker:2"]
    assert tree["tree"]["children"][0]["frame"]["function"] == "main"
    r = subprocess.run([*TFNATIVE, "merge", "-"], input="garbage", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and r.stderr.startswith("tfnative: error: <stdin>: not JSON")
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_thousand_documents_linear():
    big = [doc(i, [th(t, WAIT if t % 2 else ODD) for t in range(40)], task=i) for i in range(1000)]
    text = "\n".join(json.dumps(d) for d in big)
    root = mtree.build_tree(frame_text, docread.parse_documents([("x", text)]), all_threads=True)
    assert root.threads == 40000 and len(root.members) == 1000


def test_real_documents_merge():
    """Two real ``stack --json`` documents of tests/scripts/tf_hang.py (tfnative's unwinder, and gdb's, which
    names libc's frames with their source lines: those branches differ)."""
    data = Path(__file__).parent / "data"
    texts = [(p.name, p.read_text()) for p in (data / "doc_stack_a.json", data / "doc_stack_gdb.json")]
    root = mtree.build_tree(frame_text, docread.iter_documents(texts))
    assert root.threads == 4 and len(root.members) == 1  # the same process twice: its host:pid
    start = root.children["_start in python3.11"]
    assert start.threads == 2 and len(start.children) == 2
    for branch in start.children.values():
        keys, node = [], branch
        while node.children:
            (node,) = node.children.values()
            keys.append(node.key)
        assert keys[1].startswith("[py] <module> at ") and keys[1].endswith("tf_hang.py:31  <-- your code")
        assert keys[2].startswith("[py] main at ") and keys[2].endswith("tf_hang.py:28  <-- your code")
    workers = [c for k, c in root.children.items() if k.startswith("clone3")]
    assert sum(c.threads for c in workers) == 2
    frame = merge.merge_json(root)["tree"]["children"][0]["frame"]
    assert frame == {"kind": "native", "function": "_start", "file": None, "line": None, "library": "python3.11",
                     "class": "interpreter"}  # no address, no source
