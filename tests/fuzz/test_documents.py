"""Fuzz: the documents given to ``merge`` (and ``core``'s input files), valid and hostile.

Valid ``stack --json`` documents are generated from the schema (docs/json-schema.md): they must merge with exit
0 in every output mode, into the right tree.  Hostile ones must get one line and a non-zero exit, within time
and memory: a wrong type at any field (the line names it), JSON nested 10,000 deep, huge strings, lone
surrogates, a 100,000-frame stack, truncated and random JSON, /dev/zero, /dev/urandom, a FIFO no one writes
to, a silent pipe, a directory, an empty file.  The bulk of the generated examples runs ``merge`` in-process
(click's runner, ``TFNATIVE_DEBUG=1`` so that an internal error shows its traceback); a representative set
runs as a real process through ``run_bounded`` (time, RSS, exit 70, traceback, one line, leftovers).
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tfnative.analysis import tree as mtree
from tfnative.analysis.frames import shown
from tfnative.cli.merge import merge_cmd
from tfnative.core import docread
from tfnative.core.model import Document, frame_from_json
from tfnative.output.threadgroups import frame_text

from .harness import FuzzFailure, Outcome, check_contract, run_bounded

RSS_MB = 500
MODES = ("text", "html", "json", "speedscope", "folded")

# -- valid documents, from the schema -------------------------------------------------------------------------
# Names from small pools (so that stacks share prefixes and the tree branches), sometimes any text at all.
_any_text = st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=12)  # names have no line breaks
_names = st.one_of(st.sampled_from(["main", "train", "step", "run", "__call__", "f", "g"]), _any_text)
_natives = st.one_of(st.sampled_from(["syscall", "pthread_cond_wait", "tensorflow::DirectSession::Run",
                                      "_PyEval_EvalFrameDefault", "PyObject_Call", "Eigen::Tensor<float, 2>::x",
                                      "tensorflow::MatMulOp<float>::Compute(tensorflow::OpKernelContext*)"]),
                     _any_text)
_files = st.one_of(st.sampled_from(["/app/train.py", "/usr/lib/python3.11/threading.py",
                                    "/venv/lib/python3.11/site-packages/tensorflow/x.py", "<string>"]), _any_text)
_libs = st.sampled_from(["libc.so.6", "libpython3.11.so.1.0", "libtensorflow_framework.so.2", "x.so", ""])
_ints = st.integers(min_value=0, max_value=2 ** 31)
_classes = st.sampled_from(["user", "tensorflow-python", "tensorflow-native", "interpreter", "system"])


def _opt(strategy: Any) -> Any:
    return st.one_of(st.none(), strategy)


@st.composite
def native_frame(draw: Any) -> Dict[str, Any]:
    f = {"kind": "native", "function": draw(_opt(_natives)), "file": draw(_opt(_files)),
         "line": draw(_opt(_ints)), "library": draw(_opt(_libs)), "address": "0x%016x" % draw(_ints)}
    if draw(st.booleans()):
        f["class"] = draw(_classes)
    if draw(st.integers(0, 5)) == 0:
        f["op"] = {"type": draw(st.sampled_from(["MatMul", "Conv2D"])), "name": draw(_opt(_names))}
    if draw(st.integers(0, 5)) == 0:
        f["inline"] = True
    if draw(st.integers(0, 8)) == 0:
        f["recovered"] = draw(st.sampled_from(["frame-pointer", "scan"]))
    if draw(st.integers(0, 8)) == 0:
        f["source"] = draw(_any_text)
    return f


@st.composite
def python_frame(draw: Any) -> Dict[str, Any]:
    f = {"kind": "python", "function": draw(_names), "file": draw(_files), "line": draw(_opt(_ints)),
         "user": draw(_opt(st.booleans()))}
    if draw(st.booleans()):
        f["class"] = draw(_classes)
    if draw(st.integers(0, 8)) == 0:
        f["converted"] = {"function": draw(_names), "file": draw(_files), "line": draw(_ints)}
    if draw(st.integers(0, 8)) == 0:
        f["variables"] = draw(st.lists(st.fixed_dictionaries(
            {"name": _names, "repr": _any_text, "arg": st.booleans()}), max_size=3))
    return f


@st.composite
def elided_frame(draw: Any) -> Dict[str, Any]:
    functions = draw(st.lists(_names, max_size=3))
    return {"kind": "elided", "count": draw(st.integers(0, 10 ** 6)), "functions": functions,
            "function": ", ".join(functions), "file": None, "line": None}


frames = st.lists(st.one_of(python_frame(), native_frame(), native_frame(), elided_frame()), max_size=10)


@st.composite
def thread(draw: Any) -> Dict[str, Any]:
    t = {"tid": draw(_ints), "name": draw(st.sampled_from(["python", "tf_Compute", ""])), "frames": draw(frames),
         "merge": draw(_opt(st.sampled_from(["ok", "native", "partial"]))),
         "gil": draw(_opt(st.sampled_from(["held", "waiting"])))}
    if draw(st.integers(0, 5)) == 0:
        t["kernel"] = {"state": "S", "syscall": "futex"}
    return t


@st.composite
def document(draw: Any) -> Dict[str, Any]:
    pid = draw(st.integers(1, 4 * 10 ** 6))
    d: Dict[str, Any] = {"tfnative": 1, "pid": pid, "argv": draw(st.lists(_any_text, max_size=3)),
                         "events": [{"kind": "snapshot", "thread": None, "pid": pid,
                                     "threads": draw(st.lists(thread(), min_size=1, max_size=4))}],
                         "unresolved": [], "host": draw(_opt(st.sampled_from(["vm", "node-1", "h"])))}
    which = draw(st.integers(0, 4))
    if which == 1:
        d["task"] = {"type": "worker", "index": draw(st.integers(0, 8))}
    elif which == 2:
        d["labels"] = {draw(st.sampled_from(["rank", "job"])): str(draw(st.integers(0, 8)))}
    elif which == 3:
        d["scheduler"] = {"kind": "slurm", "rank": draw(st.integers(0, 8)), "job": "12", "step": "0", "node": "vm"}
    return d


def write_documents(path: str, docs: Sequence[Dict[str, Any]], form: str) -> None:
    """The documents as ``stack --json`` and its users write them: JSON Lines, one pretty document after the
    other (``--json FILE``'s indent), or JSON Lines through pdsh (``host: `` before each line)."""
    if form == "pretty":
        text = "".join(json.dumps(d, indent=1) + "\n" for d in docs)
    elif form == "pdsh":
        text = "".join("node%d: %s\n" % (i, json.dumps(d)) for i, d in enumerate(docs))
    else:
        text = "".join(json.dumps(d) + "\n" for d in docs)
    with open(path, "w") as f:
        f.write(text)


# -- running merge ---------------------------------------------------------------------------------------------
def mode_args(mode: str, out: str) -> List[str]:
    return {"text": [], "html": ["--html", out], "json": ["--json", out], "speedscope": ["--speedscope", out],
            "folded": ["--folded"]}[mode]


def merge_in_process(args: Sequence[str], expect_ok: Optional[bool] = None) -> Outcome:
    """``tfnative merge ARGS`` in this process, held to the same contract as ``run_bounded``'s runs; an internal
    error fails with its traceback."""
    start = time.monotonic()
    result = CliRunner(env={"TFNATIVE_DEBUG": "1"}).invoke(merge_cmd, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        raise FuzzFailure("merge %s raised:\n%s" % (" ".join(args), "".join(
            traceback.format_exception(*result.exc_info)) if result.exc_info else repr(result.exception)))
    out = Outcome(args=["merge", *args], returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr,
                  peak_rss_mb=0.0, seconds=time.monotonic() - start)
    check_contract(out, expect_ok)
    return out


def expected_paths(docs: Sequence[Dict[str, Any]], all_threads: bool) -> List[List[Dict[str, Any]]]:
    """Each thread's stack as the tree holds it: outermost first, glue hidden, frames as ``merge --json``
    writes them."""
    out = []
    for d in docs:
        for t in Document.from_json(copy.deepcopy(d)).threads():
            if all_threads or t.runs_python():
                out.append([{k: v for k, v in f.to_json().items() if k not in ("address", "source")}
                            for f in reversed(shown(t.frames))])
    return out


def _place(frame: Dict[str, Any]) -> str:
    """What makes two frames one node: the frame as ``stack`` prints it without index, address or source line
    (``threadgroups.frame_text``: a file '' and none, a line 0 and none print alike).  A node keeps its first
    thread's frame (its ``variables``, say)."""
    return frame_text(frame_from_json(dict(frame, address=frame.get("address", "0x0"))))


def _missing(node: Dict[str, Any], path: Sequence[Dict[str, Any]]) -> Optional[tuple]:
    """None where the tree under ``node`` holds ``path``; else (the frame, its parent's frame) where the deepest
    try stopped.  Every child with the frame's ``_place`` is tried."""
    if not path:
        return None
    matches = [c for c in node["children"] if _place(c["frame"]) == _place(path[0])]
    deepest: Optional[tuple] = (path[0], node["frame"])
    for child in matches:
        got = _missing(child, path[1:])
        if got is None:
            return None
        deepest = got
    return deepest


def check_tree(data: Dict[str, Any], docs: Sequence[Dict[str, Any]], all_threads: bool) -> None:
    """``merge --json``'s tree holds every thread's stack and nothing else, and the processes are the documents."""
    assert data["tfnative_merge"] == 1
    assert [p["pid"] for p in data["processes"]] == [d["pid"] for d in docs]
    paths = expected_paths(docs, all_threads)
    root = data["tree"]
    assert root["frame"] is None and root["threads"] == len(paths)
    for path in paths:
        missing = _missing(root, path)
        assert missing is None, "frame %r missing under %r" % missing
    todo = [root]
    while todo:
        node = todo.pop()
        assert node["threads"] >= sum(c["threads"] for c in node["children"])
        todo.extend(node["children"])


# -- valid documents merge, in every mode -----------------------------------------------------------------------
def test_valid_documents_merge_in_every_mode(budget, tmp_path):
    @settings(max_examples=budget.examples(40))
    @given(docs=st.lists(document(), min_size=1, max_size=4), form=st.sampled_from(["lines", "pretty", "pdsh"]),
           all_threads=st.booleans(), split=st.booleans())
    def check(docs, form, all_threads, split):
        if split:  # a file each
            inputs = []
            for i, d in enumerate(docs):
                inputs.append(str(tmp_path / ("doc%d.json" % i)))
                write_documents(inputs[-1], [d], form)
        else:
            inputs = [str(tmp_path / "docs.json")]
            write_documents(inputs[0], docs, form)
        extra = ["--all-threads"] if all_threads else []
        out = str(tmp_path / "out")
        for mode in MODES:
            r = merge_in_process([*inputs, *extra, *mode_args(mode, out)], expect_ok=True)
            if mode == "json":
                text = open(out).read()
                data = json.loads(text)
                assert text == json.dumps(data, indent=1) + "\n"  # as json.dumps writes it, byte for byte
                check_tree(data, docs, all_threads)
            elif mode == "speedscope":
                assert len(json.load(open(out))["profiles"]) == len(docs)
            elif mode == "html":
                assert open(out).read().startswith("<!DOCTYPE html>")
            elif mode == "folded":
                counts = sum(int(line.rsplit(" ", 1)[1]) for line in r.stdout.splitlines())
                assert counts == len(expected_paths(docs, all_threads))
            else:
                head = r.stdout.splitlines()[0].split()
                assert head[1:3] == ["processes,", head[2]] and int(head[2]) == len(expected_paths(docs, all_threads))

    check()


def test_recorded_documents_give_json_dumps_text(tmp_path):
    """``merge --json`` of the documents tfnative wrote (tests/unit/data, the hang captures) is, byte for byte,
    what ``json.dumps(..., indent=1)`` wrote before the tree was written without recursion; past the 256th
    level it is the same JSON on fewer lines."""
    import glob

    from tfnative.output import merge

    root_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    names = sorted(glob.glob(os.path.join(root_dir, "unit", "data", "doc_*.json")))
    names += sorted(glob.glob(os.path.join(root_dir, "hangs", "captures", "*.json")))
    docs = list(docread.iter_documents((n, open(n).read()) for n in names))
    assert len(docs) >= 10
    for all_threads in (False, True):
        root = mtree.build_tree(frame_text, docs, all_threads)
        assert merge.merge_json_text(root) == json.dumps(merge.merge_json(root), indent=1)
    out = str(tmp_path / "tree.json")
    merge_in_process([*names, "--json", out], expect_ok=True)
    assert open(out).read() == json.dumps(merge.merge_json(mtree.build_tree(frame_text, docs)), indent=1) + "\n"
    deep = mtree.build_tree(frame_text, [Document.from_json(deep_document(300))])
    text = merge.merge_json_text(deep)
    assert json.loads(text) == merge.merge_json(deep) and text != json.dumps(merge.merge_json(deep), indent=1)


# -- a wrong type at any field ---------------------------------------------------------------------------------
WRONG = [None, True, 0, -1, 2 ** 70, 1.5, "", "x", [], [1, "a"], {}, {"a": [{}]}]


def _where(path: Sequence[Any]) -> str:
    return "".join("[%d]" % p if isinstance(p, int) else "." + p for p in path).lstrip(".")


def test_a_wrong_type_anywhere_is_named(budget, tmp_path):
    @settings(max_examples=budget.examples(80))
    @given(doc=document(), data=st.data())
    def check(doc, data):
        # Down a random path of the document, then put a value of another kind there.
        path: List[Any] = []
        node: Any = doc
        while isinstance(node, (dict, list)) and node and data.draw(st.integers(0, 4)) > 0:
            key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
            path.append(key)
            node = node[key]
        if not path:
            return
        value = data.draw(st.sampled_from(WRONG))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value
        name = str(tmp_path / "doc.json")
        write_documents(name, [doc], data.draw(st.sampled_from(["lines", "pretty"])))
        mode = data.draw(st.sampled_from(MODES))
        r = merge_in_process([name, *mode_args(mode, str(tmp_path / "out"))])
        if r.returncode:
            line = r.stderr.strip()
            # the value put there, or one inside it (a list of the wrong items) is named
            named = re.search(r": %s[:.\[]" % re.escape(_where(path)), line)
            assert named or "not tfnative schema 1" in line and path == ["tfnative"], (path, value, line)

    check()


# -- hostile values -------------------------------------------------------------------------------------------
_surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)  # one alone: never half of a pair


def test_lone_surrogates_are_shown_escaped(budget, tmp_path):
    @settings(max_examples=budget.examples(20))
    @given(doc=document(), bad=_surrogate, where=st.sampled_from(["function", "file", "host", "label", "argv"]))
    def check(doc, bad, where):
        t = doc["events"][0]["threads"][0]
        t["frames"].insert(0, {"kind": "python", "function": "f" + bad, "file": "/app/x.py", "line": 1})
        if where == "file":
            t["frames"][0]["file"] = "/app/" + bad
        elif where == "host":
            doc["host"] = bad
        elif where == "label":
            doc.pop("task", None)
            doc.pop("scheduler", None)
            doc["labels"] = {"rank" + bad: bad}
        elif where == "argv":
            doc["argv"] = [bad]
        name = str(tmp_path / "doc.json")
        with open(name, "w") as f:
            f.write(json.dumps(doc) + "\n")  # json.dumps writes a lone surrogate as its \ud800 escape
        for mode in MODES:
            r = merge_in_process([name, *mode_args(mode, str(tmp_path / "out"))], expect_ok=True)
            if mode in ("text", "folded"):
                assert "\\u" in r.stdout or "\\U" in r.stdout or where in ("host", "argv", "label")

    check()


DEEP_LIST = "[" * 10000 + "1" + "]" * 10000  # 10,000 lists in each other (json.dumps would recurse)


@pytest.mark.parametrize("where", ["pid", "frame", "unknown key", "labels"])
def test_deep_nesting_is_one_line(tmp_path, where):
    doc: Dict[str, Any] = {"tfnative": 1, "pid": 1, "events": [{"kind": "snapshot", "threads": [
        {"tid": 1, "name": "python", "frames": [{"kind": "python", "function": "f", "file": "/a.py", "line": 1}]}]}]}
    if where == "pid":
        doc["pid"] = "DEEP"
    elif where == "frame":
        doc["events"][0]["threads"][0]["frames"][0]["op"] = "DEEP"
    elif where == "unknown key":
        doc["future"] = {"x": "DEEP"}
    else:
        doc["labels"] = {"rank": "DEEP"}
    name = str(tmp_path / "doc.json")
    with open(name, "w") as f:
        f.write(json.dumps(doc).replace('"DEEP"', DEEP_LIST) + "\n")
    r = merge_in_process([name], expect_ok=False)
    assert "nested more than 64 deep" in r.stderr


def test_huge_strings_merge(tmp_path):
    doc = {"tfnative": 1, "pid": 1, "host": "h" * 100000, "events": [{"kind": "snapshot", "threads": [
        {"tid": 1, "name": "python", "frames": [
            {"kind": "python", "function": "f" * (2 << 20), "file": "/" * 100000, "line": 1},
            {"kind": "native", "function": "tensorflow::X<" * 50000, "file": None, "line": None,
             "library": "libtensorflow_framework.so.2", "address": "0x1"}]}]}]}
    name = str(tmp_path / "doc.json")
    with open(name, "w") as f:
        f.write(json.dumps(doc) + "\n")
    for mode in MODES:
        start = time.monotonic()
        merge_in_process([name, *mode_args(mode, str(tmp_path / "out"))], expect_ok=True)
        assert time.monotonic() - start < 20, mode


def test_truncated_and_garbage_json(budget, tmp_path):
    @settings(max_examples=budget.examples(60))
    @given(docs=st.lists(document(), min_size=1, max_size=2), data=st.data())
    def check(docs, data):
        text = "".join(json.dumps(d, indent=data.draw(st.sampled_from([None, 1]))) + "\n" for d in docs)
        how = data.draw(st.sampled_from(["cut", "garbage", "bytes", "splice"]))
        if how == "cut":
            raw = text[:data.draw(st.integers(1, len(text) - 2))].encode()
        elif how == "garbage":
            raw = data.draw(st.text(min_size=1, max_size=200)).encode("utf-8", "surrogatepass")
        elif how == "bytes":
            raw = data.draw(st.binary(min_size=1, max_size=300))
        else:
            at = data.draw(st.integers(0, len(text)))
            raw = (text[:at] + data.draw(st.sampled_from(["]", "}", "{", "[", '"', "\\", ",", "\x00", "nul",
                                                          "1e99999", "9" * 5000])) + text[at:]).encode()
        name = str(tmp_path / "doc.json")
        with open(name, "wb") as f:
            f.write(raw)
        merge_in_process([name, *mode_args(data.draw(st.sampled_from(MODES)), str(tmp_path / "out"))])

    check()


# -- real processes: each mode, the deep stacks, the inputs that are no files -------------------------------------
def deep_document(frames: int) -> Dict[str, Any]:
    """A thread recursing ``frames`` deep (as ``stack --json`` writes a deep recursion), beside a shallow one."""
    deep = [{"kind": "python", "function": "recurse", "file": "/app/deep.py", "line": 3 + i % 2, "user": True}
            for i in range(frames)]
    shallow = [{"kind": "python", "function": "main", "file": "/app/deep.py", "line": 9}]
    return {"tfnative": 1, "pid": 7, "host": "vm", "events": [{"kind": "snapshot", "pid": 7, "threads": [
        {"tid": 7, "name": "python", "frames": deep}, {"tid": 8, "name": "python", "frames": shallow}]}]}


@pytest.fixture(scope="module")
def bad_documents(tmp_path_factory) -> Dict[str, str]:
    d = tmp_path_factory.mktemp("docs")
    good = deep_document(3)
    wrong = copy.deepcopy(good)
    wrong["events"][0]["threads"][0]["frames"][1]["function"] = ["not", "a", "string"]
    surrogate = copy.deepcopy(good)
    surrogate["events"][0]["threads"][0]["frames"][0]["function"] = "bad\ud800name"
    host = copy.deepcopy(good)
    host["host"] = {"a": 1}
    paths = {}
    for name, doc in (("wrong_type", wrong), ("surrogate", surrogate), ("host_object", host),
                      ("deep_10000", deep_document(10000))):
        paths[name] = str(d / (name + ".json"))
        with open(paths[name], "w") as f:
            f.write(json.dumps(doc, indent=1) + "\n")
    paths["nested_10000"] = str(d / "nested.json")
    with open(paths["nested_10000"], "w") as f:
        f.write('{"tfnative": 1, "pid": ' + "[" * 10000 + "]" * 10000 + "}\n")
    return paths


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case,ok,says", [("wrong_type", False, "frames[1].function: expected a string, got a list"),
                                          ("surrogate", True, None),
                                          ("host_object", False, "host: expected a string, got an object"),
                                          ("deep_10000", True, None),
                                          ("nested_10000", False, "nested more than 64 deep")])
def test_bad_documents_as_a_process(bad_documents, tmp_path, mode, case, ok, says):
    r = run_bounded(["merge", bad_documents[case], *mode_args(mode, str(tmp_path / "out"))], timeout=60,
                    rss_mb=RSS_MB, expect_ok=ok)
    if says:
        assert says in r.stderr
    if case == "deep_10000" and mode == "text":
        lines = r.stdout.splitlines()
        assert len(lines) == 1 + 10000 + 1 and "[level 10000]" in lines[10000]


def test_a_100000_frame_stack_merges_in_bounded_time_and_memory(tmp_path):
    name = str(tmp_path / "deep.json")
    with open(name, "w") as f:
        f.write(json.dumps(deep_document(100000), indent=1) + "\n")  # 13 MB, as stack --json writes it
    html, tree = str(tmp_path / "page.html"), str(tmp_path / "tree.json")
    # --speedscope - : the profile on stdout, no text (10,000 frames' text: test_bad_documents_as_a_process)
    r = run_bounded(["merge", name, "--json", tree, "--html", html, "--speedscope", "-"], timeout=120,
                    rss_mb=RSS_MB, expect_ok=True)
    text = open(tree).read()
    assert text.count('"frame": ') == 1 + 100000 + 1 and text.count("{") == text.count("}") and text.endswith("}\n")
    assert len(text) < 32 << 20  # linear in the stack: the levels below 256 are not indented further
    assert text.count('"members": ["vm:7"], "threads": 1, "children": [') == 100000 - 256 + 1  # on one line each
    ss = json.loads(r.stdout)
    assert sorted(len(s) for s in ss["profiles"][0]["samples"]) == [1, 100000]
    assert os.path.getsize(html) < 64 << 20


@pytest.fixture
def fifo(tmp_path) -> str:
    path = str(tmp_path / "fifo")
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("mode", ["text", "json"])
# /dev/urandom: "not JSON", or, where its first bytes happen to be a JSON value ("7" or "-1e5" before a stray byte),
# what that value is not
@pytest.mark.parametrize("what,says", [("/dev/zero", "bigger than 64 MiB"),
                                       ("/dev/urandom", ("not JSON", "a document that is not tfnative schema 1")),
                                       ("fifo", "nothing came for 1 s"), ("directory", "is a directory"),
                                       ("empty", "no documents"), ("missing", "no such file"),
                                       ("/dev/null", "no documents")])
def test_inputs_that_are_no_documents(tmp_path, fifo, mode, what, says):
    path = {"fifo": fifo, "directory": str(tmp_path), "empty": str(tmp_path / "empty"),
            "missing": str(tmp_path / "missing")}.get(what, what)
    if what == "empty":
        open(path, "w").close()
    r = run_bounded(["merge", "--timeout", "1", path, *mode_args(mode, str(tmp_path / "out"))], timeout=30,
                    rss_mb=RSS_MB, expect_ok=False)
    assert any(words in r.stderr for words in ((says,) if isinstance(says, str) else says)), r.stderr


def test_a_fifo_and_a_pipe_are_read_as_streams(tmp_path, fifo):
    text = (json.dumps(deep_document(5)) + "\n").encode()

    def write_late() -> None:
        time.sleep(0.5)
        with open(fifo, "wb") as f:
            f.write(text[:100])
            f.flush()
            time.sleep(0.3)
            f.write(text[100:])

    writer = threading.Thread(target=write_late, daemon=True)
    writer.start()
    r = run_bounded(["merge", fifo], timeout=30, rss_mb=RSS_MB, expect_ok=True)
    writer.join(5)
    assert "2 threads" in r.stdout.splitlines()[0]
    # merge - (and merge with no FILE): standard input, a pipe
    read, write = os.pipe()
    try:
        os.write(write, text)
        os.close(write)
        write = -1
        r = run_bounded(["merge", "-"], timeout=30, rss_mb=RSS_MB, stdin=read, expect_ok=True)
        assert "2 threads" in r.stdout.splitlines()[0]
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_a_silent_pipe_is_given_up(tmp_path):
    read, write = os.pipe()  # a writer that holds its end open and writes nothing
    try:
        start = time.monotonic()
        r = run_bounded(["merge", "--timeout", "1"], timeout=30, rss_mb=RSS_MB, stdin=read, expect_ok=False)
        assert "<stdin>: nothing came for 1 s" in r.stderr and time.monotonic() - start < 10
    finally:
        os.close(read)
        os.close(write)


@pytest.mark.parametrize("what,says,exe_says", [
    ("fifo", "a pipe or FIFO, not a file", "not a regular file (a pipe or FIFO)"),
    ("/dev/zero", "a character device", "not a regular file (a character device)"),
    ("directory", "is a directory", "not a regular file (a directory)")])
def test_core_inputs_that_are_no_files(tmp_path, fifo, what, says, exe_says):
    path = {"fifo": fifo, "directory": str(tmp_path)}.get(what, what)
    r = run_bounded(["core", path], timeout=30, rss_mb=RSS_MB, expect_ok=False)
    assert says in r.stderr
    core = str(tmp_path / "core")
    with open(core, "wb") as f:
        f.write(b"\x7fELF" + b"\0" * 100)
    r = run_bounded(["core", core, path], timeout=30, rss_mb=RSS_MB, expect_ok=False)  # the executable given
    assert "%s: not an executable to read the core with: %s" % (path, exe_says) in r.stderr
