"""What ``merge`` reads besides documents (output/merge.py ``inputs_of``): a merged tree (``merge --tree``, ``merge
--json``) read in one piece (parsed as it is) or in pieces (scanned like documents), with the same result, the
lines and document numbers that come after it, and its refusal where no tree is wanted; and ``text_lines``
naming a lone outlier from the root's processes, however many they are."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

import pytest

from tfnative.analysis import tree as mtree
from tfnative.core import docread, rankset, treemodel
from tfnative.errors import TfnativeError
from tfnative.output import merge, mergetree
from tfnative.output.threadgroups import frame_text

from .test_merge_trees import docs_of, document

REFUSED = "a merged tree (from 'tfnative merge'): only 'tfnative merge' reads these"
NOT_SCHEMA_1 = "a document that is not tfnative schema 1 (from 'tfnative stack --json')"


def tree_text() -> str:
    """A ``merge --tree`` file of two ranks: several lines, a line end at its end."""
    text = mergetree.tree_json_text(mtree.reduce(frame_text, docs_of([document(0, [[1, 2]]), document(1, [[3]])])))
    assert text.count("\n") >= 5 and text.startswith('{"tfnative_tree"')
    return text + "\n"


def doc_line(rank: int) -> str:
    return json.dumps(document(rank, [[1]])) + "\n"


def seen(pieces: List[str], name: str = "t") -> List[Tuple[str, Any]]:
    """What ``inputs_of`` gives for ``pieces``, a tree as (where, its JSON) as the loader was given it."""
    out: List[Tuple[str, Any]] = []
    for item in docread.inputs_of([(name, pieces)], lambda d, where: (where, d)):
        out.append(item if isinstance(item, tuple) else ("document", item.pid))
    return out


def error(pieces: List[str], trees: bool = True) -> str:
    with pytest.raises(TfnativeError) as e:
        if trees:
            list(docread.iter_inputs([("t", pieces)]))
        else:
            list(docread.inputs_of([("t", pieces)], None))
    return str(e.value)


def test_a_tree_in_one_piece_or_in_lines_is_the_same_tree():
    text = tree_text()
    want = [("t", json.loads(text))]
    assert seen([text]) == want
    assert seen(text.splitlines(keepends=True)) == want
    # the last piece without its line end: what is left at the end is read, trees too
    assert seen(text.rstrip("\n").splitlines(keepends=True)) == want
    assert seen([doc_line(5)] + text.rstrip("\n").splitlines(keepends=True))[1][1] == want[0][1]
    assert seen([text, doc_line(5)]) == want + [("document", 1005)]
    assert seen([doc_line(5), text]) == [("document", 1005), ("t (document 2, line 2)", json.loads(text))]
    # in one piece with a document after it: the scan reads both
    assert seen([text + doc_line(6)]) == want + [("document", 1006)]
    got = list(docread.iter_inputs([("t", [text])]))
    assert len(got) == 1 and isinstance(got[0], docread.TreeDoc)
    assert [p["label"] for p in got[0].processes] == ["rank:0", "rank:1"] and got[0].where == "t"


def test_what_follows_a_tree_in_one_piece_has_its_line_and_number():
    text = tree_text()
    lines = text.count("\n")
    assert error([text, doc_line(2), '{"tfnative": 2}\n']) == "t (document 3, line %d): %s" % (lines + 2, NOT_SCHEMA_1)
    assert error([text, '{"tfnative": 2}\n']) == "t (document 2, line %d): %s" % (lines + 1, NOT_SCHEMA_1)
    assert error([text, text, "[1]\n"]) == "t (document 3, line %d): %s" % (2 * lines + 1, NOT_SCHEMA_1)
    assert error([text, "x\n"]).startswith("t: not JSON at line %d, column 1 " % (lines + 1))
    assert error([doc_line(1), text.replace('"tfnative_tree": 1', '"tfnative_tree": 9')]) == (
        "t (document 2, line 2): tfnative_tree: a tree of version 1 expected (this tfnative's 'merge --tree'), "
        "got 9")
    assert error([text.replace('"tfnative_tree": 1', '"tfnative_tree": 9')]).startswith(
        "t: tfnative_tree: a tree of version 1 expected")


def test_a_tree_not_alone_in_its_piece_is_scanned():
    text = tree_text()
    assert error([text[:-3] + "\n"]).startswith("t: not JSON at line %d, column 1 " % (text.count("\n") + 1))
    assert error([text + "]\n"]).startswith("t: not JSON at line %d, column 1 " % (text.count("\n") + 1))
    # a tree nested too deep: in one piece it is parsed as it is (the loader then reads what it knows of it);
    # cut into lines it is scanned as documents are, and the nesting bound says where
    deep = text.rstrip()[:-1] + ',\n"x": ' + "[" * 70 + "]" * 70 + "}\n"
    assert [t[0] for t in seen([deep])] == ["t"]
    assert error(deep.splitlines(keepends=True)) == (
        "t: JSON nested more than 64 deep at line %d (a 'tfnative stack --json' document nests about 10 deep)"
        % deep.count("\n"))
    assert error([deep + doc_line(1)]).startswith("t: JSON nested more than 64 deep at line %d " % deep.count("\n"))
    # where no tree is wanted, a tree in one piece is scanned as documents are
    assert error([deep], trees=False).startswith("t: JSON nested more than 64 deep at line %d " % deep.count("\n"))
    # a document in one piece is scanned, trees or not
    too_deep = '{"tfnative": 1, "x": ' + "[" * 70 + "]" * 70 + "}\n"
    for trees in (True, False):
        assert error([too_deep], trees=trees).startswith("t: JSON nested more than 64 deep at line 1 ")
    # a line that begins like a tree inside a document is part of the document
    d = document(2, [[1]])
    lines = json.dumps(d)[:-1] + ',\n"x":\n{"tfnative_tree": 1}\n}\n'
    for loader in (lambda doc, where: ("tree", where)), None:
        got = list(docread.inputs_of([("t", lines.splitlines(keepends=True))], loader))
        assert [g.pid for g in got] == [1002]


@pytest.mark.parametrize("kind", ["tfnative_tree", "tfnative_merge"])
def test_trees_refused_where_no_loader_is_given(kind):
    text = tree_text().replace('"tfnative_tree"', '"%s"' % kind)
    assert error([text], trees=False) == "t: " + REFUSED
    assert error(text.splitlines(keepends=True), trees=False) == "t: " + REFUSED
    assert error([doc_line(1), text], trees=False) == "t (document 2, line 2): " + REFUSED
    with pytest.raises(TfnativeError) as e:
        list(docread.iter_document_chunks([("in", [text])]))
    assert str(e.value) == "in: " + REFUSED
    with pytest.raises(TfnativeError) as e:
        list(docread.iter_documents([("in", text)]))
    assert str(e.value) == "in: " + REFUSED


def test_a_document_that_names_a_tree_too_is_a_document():
    d = document(3, [[1]])
    d["tfnative_tree"] = 1
    d["tfnative_merge"] = 1
    assert seen([json.dumps(d) + "\n"]) == [("document", 1003)]
    assert error(['{"tfnative_tree": 1, "tfnative": 2}\n'], trees=False) == "t: " + NOT_SCHEMA_1
    assert error(["[{\"tfnative_tree\": 1}]\n"], trees=False) == "t: " + NOT_SCHEMA_1


def outlier_tree(fillers: int, place: int) -> Tuple[treemodel.Node, List[Dict[str, Any]]]:
    """A tree of three ranks, rank 1 alone on its path; its processes with ``fillers`` others around rank 1's."""
    root = mtree.build_tree(frame_text, docs_of([document(0, [[1, 2]]), document(1, [[3, 2]]), document(2, [[1, 2]])]))
    real = list(root.processes)
    assert [p["label"] for p in real] == ["rank:0", "rank:1", "rank:2"]
    others = [{"label": "rank:%d" % (100 + i), "pid": 9, "host": "x"} for i in range(fillers)]
    root.processes = others[:place] + real + others[place:]
    return root, real


@pytest.mark.parametrize("fillers", [0, 9997, 9998, 12000])
def test_a_lone_outlier_is_named_from_any_number_of_processes(fillers):
    root, real = outlier_tree(fillers, fillers // 2)
    odd = [ln for ln in merge.text_lines(root) if "OUTLIER" in ln]
    assert odd == ["      [py] f3 at /app/m1.py:13  <-- your code   [rank:1] (1 thread)   <== OUTLIER: rank 1 on node "
                   "node0 (slurm job 7, step 0), pid 1001"]
    # a label the processes do not have (a tree cut down by hand): the outlier is marked, not named
    root.processes = [p for p in root.processes if p["label"] != "rank:1"]
    odd = [ln for ln in merge.text_lines(root) if "OUTLIER" in ln]
    assert odd == ["      [py] f3 at /app/m1.py:13  <-- your code   [rank:1] (1 thread)   <== OUTLIER"]
    # where two share the label, the last one says where
    twin = dict(real[1], pid=77)
    root.processes = [real[1]] + root.processes + [twin]
    odd = [ln for ln in merge.text_lines(root) if "OUTLIER" in ln]
    assert odd[0].endswith("<== OUTLIER: rank 1 on node node0 (slurm job 7, step 0), pid 77")


def test_the_last_document_without_a_line_end_across_pieces():
    text = json.dumps(document(4, [[1, 2]]), indent=1)  # no line end at its end
    pieces = text.splitlines(keepends=True)
    assert len(pieces) > 3
    assert [d.pid for d in docread.iter_document_chunks([("t", pieces)])] == [1004]
    assert [d.pid for d in docread.iter_document_chunks([("t", [pieces[0], "".join(pieces[1:])])])] == [1004]


def test_too_deep_after_an_empty_line_names_its_line():
    deep = '{"a": ' + "[" * 64 + "]" * 64 + "}\n"
    for pieces in (["\n" + deep], ["\n", deep], ["\n\n" + deep]):
        with pytest.raises(TfnativeError) as e:
            list(docread.iter_document_chunks([("t", pieces)]))
        assert str(e.value) == ("t: JSON nested more than 64 deep at line %d (a 'tfnative stack --json' document "
                                "nests about 10 deep)" % "".join(pieces).count("\n"))


def test_a_tree_too_deep_for_the_parser_in_one_piece_is_scanned():
    deep = '{"tfnative_tree": 1, "x": ' + "[" * 100000 + "]" * 100000 + "}\n"
    for trees in (True, False):
        assert error([deep], trees=trees) == (
            "t: JSON nested more than 64 deep at line 1 (a 'tfnative stack --json' document nests about 10 deep)")


def test_compress_of_a_reduced_trees_members_is_their_own_text():
    m = rankset.Members()
    for label in ("rank:2", "rank:01", "rank:1", "host:a"):
        m.add_label(label)
    assert merge.compress(m) == m.text() == "rank:1-2 host:a rank:01"


@pytest.mark.parametrize("per_piece", [1, 2])
def test_each_document_comes_before_the_next_piece_is_read(per_piece):
    read: List[int] = []

    def pieces():
        for p in range(3):
            read.append(p)
            yield "".join(doc_line(per_piece * p + k) for k in range(per_piece))

    it = docread.iter_document_chunks([("t", pieces())])
    for p in range(3):
        for k in range(per_piece):
            assert next(it).pid == 1000 + per_piece * p + k and read == list(range(p + 1))
    assert list(it) == []
    nested = json.dumps(document(9, [[1, 2]]), indent=1) + "\n"  # a document over several lines, then one more
    read.clear()
    it = docread.iter_document_chunks([("t", pieces_of([nested, nested], read))])
    assert next(it).pid == 1009 and read == [0]


def pieces_of(texts: List[str], read: List[int]):
    for i, t in enumerate(texts):
        read.append(i)
        yield t


def test_a_piece_that_ends_inside_a_document_gives_the_whole_ones_before_it():
    nested = json.dumps(document(9, [[1, 2]]), indent=1) + "\n"
    half = nested.count("\n") // 2
    lines = nested.splitlines(keepends=True)
    read: List[int] = []
    texts = [doc_line(1) + doc_line(2) + "".join(lines[:half]), "".join(lines[half:])]
    it = docread.iter_document_chunks([("t", pieces_of(texts, read))])
    assert next(it).pid == 1001 and read == [0]
    assert next(it).pid == 1002 and read == [0]
    assert next(it).pid == 1009 and read == [0, 1]
