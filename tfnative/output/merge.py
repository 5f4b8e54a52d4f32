"""Merge many ``stack`` documents into one STAT-style prefix tree (pure).

Input: schema-v1 documents (JSON Lines, one document, several concatenated, ``host: `` prefixes as pdsh
prints them).  Output: a tree, outermost frame first; each node a frame rendered as ``stack`` renders it
(glue hidden, ``[py]``, user marks, ``<-- op X``), the members (processes) and threads that share it.
The child with the fewest members, where siblings differ, is the outlier.  Memory is linear in the input.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from ..core import ranks
from ..core.model import Document, Frame, Thread
from ..errors import TfnativeError
from . import render
from .threadgroups import frame_text

_PDSH = re.compile(r"^[A-Za-z0-9_.\-]+: ")


def iter_documents(texts: Iterable[Tuple[str, str]]) -> Iterator[Document]:
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
            except json.JSONDecodeError as e:
                raise TfnativeError("%s: not JSON at character %d (%s)" % (name, pos, e.msg)) from None
            if not isinstance(doc, dict) or doc.get("tfnative") != 1:
                raise TfnativeError("%s: a document that is not tfnative schema 1 (from 'tfnative stack "
                                    "--json')" % name)
            try:
                yield Document.from_json(doc)
            except ValueError as e:
                raise TfnativeError("%s: %s" % (name, e)) from None


NO_DOCUMENTS = "no documents in the input (expected 'tfnative stack --json' output)"


def parse_documents(texts: Iterable[Tuple[str, str]]) -> List[Document]:
    """Every document in ``texts`` as a list (see ``iter_documents``); an empty input is an error."""
    docs = list(iter_documents(texts))
    if not docs:
        raise TfnativeError(NO_DOCUMENTS)
    return docs


def member_label(doc: Document) -> str:
    """``worker:2`` from ``task``, else ``rank:2`` from ``scheduler`` (the rank Slurm, Kubernetes or
    torchrun gave the process), else ``KEY:VALUE`` of the first of ``labels`` (``rank:3``, so that ranks
    compress to ranges), else ``host:pid``."""
    task = doc.task
    if isinstance(task, dict) and task.get("type") is not None:
        return "%s:%s" % (task["type"], task.get("index", "?"))
    sched = doc.scheduler
    if isinstance(sched, dict) and sched.get("rank") is not None:
        return "rank:%s" % sched["rank"]
    labels = doc.labels
    if isinstance(labels, dict) and labels:
        key, value = next(iter(labels.items()))
        return "%s:%s" % (key, value)
    return _host_pid(doc)


def _host_pid(doc: Document) -> str:
    return "%s:%s" % (doc.host or "localhost", doc.pid if doc.pid is not None else "?")


def member_names(docs: List[Document]) -> List[str]:
    """``member_label`` of each document, except that a name two processes share (one ``--label`` given
    to several, the same task in two jobs) falls back to ``host:pid`` for each of them."""
    names = [member_label(d) for d in docs]
    owners: Dict[str, Set[Any]] = {}
    for name, d in zip(names, docs):
        owners.setdefault(name, set()).add((d.host, d.pid))
    return [n if len(owners[n]) == 1 else _host_pid(d) for n, d in zip(names, docs)]


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
        parts: List[str] = []
        start = nums[0]
        for a, b in zip(nums, nums[1:] + [-1]):
            if b != a + 1:
                parts.append(str(start) if start == a else "%d-%d" % (start, a))
                start = b
        out.append("%s:%s" % (head, ",".join(parts)))
    return " ".join(out + others)


def _stacks(doc: Document, all_threads: bool) -> Iterator[Thread]:
    """The threads of a document that go in the tree (those that run Python, or ``all_threads``)."""
    return (t for t in doc.threads() if all_threads or t.runs_python())


class Node:
    """A frame of the tree: the processes (members) and threads whose stacks go through it."""

    __slots__ = ("frame", "key", "members", "threads", "children", "processes")

    def __init__(self, frame: Optional[Frame], key: str) -> None:
        self.frame, self.key = frame, key
        self.members: Dict[Any, None] = {}  # member names (while the tree is built: document numbers)
        self.threads = 0
        self.children: Dict[str, Node] = {}
        self.processes: List[Dict[str, Any]] = []  # the root's: label, pid, host of each document

    def to_json(self) -> Dict[str, Any]:
        """The node as ``merge --json`` writes it: its FRAME without ``address`` and ``source``."""
        frame = None if self.frame is None else {k: v for k, v in self.frame.to_json().items()
                                                 if k not in ("address", "source")}
        return {"frame": frame, "members": sorted(self.members), "threads": self.threads,
                "children": [c.to_json() for c in self.children.values()]}


def build_tree(docs: Iterable[Document], all_threads: bool = False) -> Node:
    """The prefix tree of every (Python, or with ``all_threads`` every) thread's stack, glue hidden.

    ``docs`` is read once, one document at a time (none is kept: memory grows with the tree and the
    number of processes, not with the documents).  Raises TfnativeError when there is none.
    """
    root = Node(None, "")
    who: List[Document] = []
    for i, doc in enumerate(docs):
        who.append(Document(pid=doc.pid, host=doc.host, task=doc.task, labels=doc.labels, scheduler=doc.scheduler))
        for t in _stacks(doc, all_threads):
            node = root
            node.members[i] = None
            node.threads += 1
            for f in reversed(render.hide_glue(t.frames)):
                key = frame_text(f)
                child = node.children.get(key)
                if child is None:
                    child = node.children[key] = Node(f, key)
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
    root.processes = []
    for d, n in zip(who, names):
        entry: Dict[str, Any] = {"label": n, "pid": d.pid, "host": d.host}
        if d.scheduler is not None:
            entry["scheduler"] = d.scheduler
        root.processes.append(entry)
    return root


def where(process: Dict[str, Any]) -> Optional[str]:
    """``rank 2 on node vm (slurm job 12, step 0), pid 4242``: a process of the root's ``processes`` in
    words, where a scheduler named its rank (None otherwise)."""
    text = ranks.describe(process.get("scheduler"), process.get("host"))
    if text is None:
        return None
    return "%s, pid %s" % (text, process.get("pid"))


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
    words = {p["label"]: where(p) for p in root.processes}

    def walk(node: Node, depth: int) -> None:
        odd = outlier(node)
        for child in node.children.values():
            mark = "   <== OUTLIER" if child is odd else ""
            if mark and len(child.members) == 1 and words.get(next(iter(child.members))):
                mark += ": %s" % words[next(iter(child.members))]
            lines.append("%s%s   [%s] (%d thread%s)%s" % ("  " * depth, child.key, compress(child.members),
                                                        child.threads, "" if child.threads == 1 else "s",
                                                        mark))
            walk(child, depth + 1)

    walk(root, 1)
    return lines


def folded_lines(docs: Iterable[Document], all_threads: bool = False) -> List[str]:
    """Flamegraph "folded" stacks: ``outer;...;inner COUNT`` per distinct stack.  Raises TfnativeError
    when there is no document."""
    counts: Dict[str, int] = {}
    seen = 0
    for doc in docs:
        seen += 1
        for t in _stacks(doc, all_threads):
            frames = reversed(render.hide_glue(t.frames))
            key = ";".join(frame_text(f).replace(";", ",") for f in frames)
            counts[key] = counts.get(key, 0) + 1
    if not seen:
        raise TfnativeError(NO_DOCUMENTS)
    return ["%s %d" % (k, n) for k, n in counts.items()]


def merge_json(root: Node) -> Dict[str, Any]:
    """``{"tfnative_merge": 1, "processes": [...], "tree": NODE}``."""
    return {"tfnative_merge": 1, "processes": root.processes, "tree": root.to_json()}
