"""Merge many ``stack`` documents into one STAT-style prefix tree (pure).

Input: schema-v1 documents (JSON Lines, one document, several concatenated, ``host: `` prefixes as pdsh
prints them).  Output: a tree, outermost frame first; each node a frame rendered as ``stack`` renders it
(glue hidden, ``[py]``, user marks, ``<-- op X``), the members (processes) and threads that share it.
The child with the fewest members, where siblings differ, is the outlier.  Memory is linear in the input.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ..errors import TfnativeError
from . import render
from .threadgroups import frame_text

_PDSH = re.compile(r"^[A-Za-z0-9_.\-]+: ")


def iter_documents(texts: Iterable[Tuple[str, str]]) -> Iterator[Dict[str, Any]]:
    """Every document in ``texts`` ((source name, text) pairs), in order, one at a time.  Raises
    TfnativeError on garbage or a document that is not tfnative schema v1 (an empty input yields none)."""
    dec = json.JSONDecoder()
    for name, text in texts:
        lines = []
        for line in text.splitlines():
            if line.lstrip().startswith(("{", "}", "]", "[", '"')) or not _PDSH.match(line):
                lines.append(line)
            else:
                lines.append(_PDSH.sub("", line, count=1))
        body = "\n".join(lines)
        del lines
        pos = 0
        while True:
            while pos < len(body) and body[pos].isspace():
                pos += 1
            if pos >= len(body):
                break
            try:
                doc, pos = dec.raw_decode(body, pos)
            except ValueError as e:
                raise TfnativeError("%s: not JSON at character %d (%s)" % (name, pos, e.msg)) from None
            if not isinstance(doc, dict) or doc.get("tfnative") != 1:
                raise TfnativeError("%s: a document that is not tfnative schema 1 (from 'tfnative stack "
                                    "--json')" % name)
            yield doc


NO_DOCUMENTS = "no documents in the input (expected 'tfnative stack --json' output)"


def parse_documents(texts: Iterable[Tuple[str, str]]) -> List[Dict[str, Any]]:
    """Every document in ``texts`` as a list (see ``iter_documents``); an empty input is an error."""
    docs = list(iter_documents(texts))
    if not docs:
        raise TfnativeError(NO_DOCUMENTS)
    return docs


def member_label(doc: Dict[str, Any]) -> str:
    """``worker:2`` from ``task``, else ``KEY:VALUE`` of the first of ``labels`` (``rank:3``, so that ranks
    compress to ranges), else ``host:pid``."""
    task = doc.get("task")
    if isinstance(task, dict) and task.get("type") is not None:
        return "%s:%s" % (task["type"], task.get("index", "?"))
    labels = doc.get("labels")
    if isinstance(labels, dict) and labels:
        key, value = next(iter(labels.items()))
        return "%s:%s" % (key, value)
    return "%s:%s" % (doc.get("host") or "localhost", doc.get("pid", "?"))


def member_names(docs: List[Dict[str, Any]]) -> List[str]:
    """``member_label`` of each document, except that a name two processes share (one ``--label`` given
    to several, the same task in two jobs) falls back to ``host:pid`` for each of them."""
    names = [member_label(d) for d in docs]
    owners: Dict[str, set] = {}
    for name, d in zip(names, docs):
        owners.setdefault(name, set()).add((d.get("host"), d.get("pid")))
    return [n if len(owners[n]) == 1 else "%s:%s" % (d.get("host") or "localhost", d.get("pid", "?"))
            for n, d in zip(names, docs)]


def compress(labels: Iterable[str]) -> str:
    """``worker:0-6,8``: labels with the same prefix and integer suffixes as ranges."""
    groups: Dict[str, List[int]] = {}
    others: List[str] = []
    for lab in sorted(set(labels)):
        head, _, tail = lab.rpartition(":")
        if head and tail.isdigit():
            groups.setdefault(head, []).append(int(tail))
        else:
            others.append(lab)
    out = []
    for head in sorted(groups):
        nums = sorted(groups[head])
        parts, start = [], nums[0]
        for a, b in zip(nums, nums[1:] + [None]):
            if b != a + 1:
                parts.append(str(start) if start == a else "%d-%d" % (start, a))
                start = b
        out.append("%s:%s" % (head, ",".join(parts)))
    return " ".join(out + others)


def _threads(doc: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
    for ev in doc.get("events") or []:
        yield from ev.get("threads") or []


def _runs_python(thread: Dict[str, Any]) -> bool:
    return any(f.get("kind") == "python" for f in thread.get("frames") or [])


class Node:
    __slots__ = ("frame", "key", "members", "threads", "children", "processes")

    def __init__(self, frame: Optional[Dict[str, Any]], key: str) -> None:
        self.frame, self.key = frame, key
        self.members: Dict[Any, None] = {}  # member names (while the tree is built: document numbers)
        self.threads = 0
        self.children: Dict[str, Node] = {}
        self.processes: List[Dict[str, Any]] = []  # the root's: label, pid, host of each document

    def to_json(self) -> Dict[str, Any]:
        return {"frame": self.frame, "members": sorted(self.members), "threads": self.threads,
                "children": [c.to_json() for c in self.children.values()]}


def build_tree(docs: Iterable[Dict[str, Any]], all_threads: bool = False) -> Node:
    """The prefix tree of every (Python, or with ``all_threads`` every) thread's stack, glue hidden.

    ``docs`` is read once, one document at a time (none is kept: memory grows with the tree and the
    number of processes, not with the documents).  Raises TfnativeError when there is none.
    """
    root = Node(None, "")
    who: List[Dict[str, Any]] = []
    for i, doc in enumerate(docs):
        who.append({k: doc.get(k) for k in ("pid", "host", "task", "labels")})
        for t in _threads(doc):
            if not all_threads and not _runs_python(t):
                continue
            node = root
            node.members[i] = None
            node.threads += 1
            for f in reversed(render.hide_glue(t.get("frames") or [])):
                key = frame_text(f)
                child = node.children.get(key)
                if child is None:
                    child = node.children[key] = Node(_clean(f), key)
                node = child
                node.members[i] = None
                node.threads += 1
    if not who:
        raise TfnativeError(NO_DOCUMENTS)
    names = member_names(who)
    todo = [root]
    while todo:  # numbers to names, without recursion (a stack may be deep)
        node = todo.pop()
        node.members = dict.fromkeys(names[i] for i in node.members)
        todo.extend(node.children.values())
    root.processes = [{"label": n, "pid": d["pid"], "host": d["host"]} for d, n in zip(who, names)]
    return root


def _clean(f: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in f.items() if k not in ("address", "source")}


def outlier(node: Node) -> Optional[Node]:
    """The child with strictly the fewest members, where siblings differ in their count."""
    kids = list(node.children.values())
    if len(kids) < 2:
        return None
    counts = sorted(len(k.members) for k in kids)
    if counts[0] == counts[1]:
        return None
    return min(kids, key=lambda k: len(k.members))


def text_lines(root: Node) -> List[str]:
    """The tree as indented text: ``frame  [members] (N threads)``; the outlier marked."""
    lines = ["%d processes, %d threads: %s" % (len(root.members), root.threads, compress(root.members))]

    def walk(node: Node, depth: int) -> None:
        odd = outlier(node)
        for child in node.children.values():
            mark = "   <== OUTLIER" if child is odd else ""
            lines.append("%s%s   [%s] (%d thread%s)%s" % ("  " * depth, child.key, compress(child.members),
                                                        child.threads, "" if child.threads == 1 else "s",
                                                        mark))
            walk(child, depth + 1)

    walk(root, 1)
    return lines


def folded_lines(docs: Iterable[Dict[str, Any]], all_threads: bool = False) -> List[str]:
    """Flamegraph "folded" stacks: ``outer;...;inner COUNT`` per distinct stack.  Raises TfnativeError
    when there is no document."""
    counts: Dict[str, int] = {}
    seen = 0
    for doc in docs:
        seen += 1
        for t in _threads(doc):
            if not all_threads and not _runs_python(t):
                continue
            frames = reversed(render.hide_glue(t.get("frames") or []))
            key = ";".join(frame_text(f).replace(";", ",") for f in frames)
            counts[key] = counts.get(key, 0) + 1
    if not seen:
        raise TfnativeError(NO_DOCUMENTS)
    return ["%s %d" % (k, n) for k, n in counts.items()]


def merge_json(root: Node) -> Dict[str, Any]:
    """``{"tfnative_merge": 1, "processes": [...], "tree": NODE}``."""
    return {"tfnative_merge": 1, "processes": root.processes, "tree": root.to_json()}
