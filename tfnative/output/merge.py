"""Merge many ``stack`` documents into one STAT-style prefix tree (pure).

Input: schema-v1 documents (JSON Lines, one document, several concatenated, ``host: `` prefixes as pdsh
prints them).  Output: a tree, outermost frame first; each node a frame rendered as ``stack`` renders it
(glue hidden, ``[py]``, user marks, ``<-- op X``), the members (processes) and threads that share it.
The child with the fewest members, where siblings differ, is the outlier.  Memory is linear in the input.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from .. import __version__
from ..core.model import Document, Frame, Thread
from ..core.rankset import NO_DOCUMENTS, Members, compress
from ..errors import TfnativeError
from . import render
from .threadgroups import frame_text

DEEP = 256  # tree levels indented in the text and in --json; the deeper ones are not indented any further


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


def stacks(doc: Document, all_threads: bool) -> Iterator[Thread]:
    """The threads of a document that go in the tree (those that run Python, or ``all_threads``)."""
    return (t for t in doc.threads() if all_threads or t.runs_python())


class Node:
    """A frame of the tree: the processes (members) and threads whose stacks go through it."""

    __slots__ = ("frame", "key", "members", "threads", "children", "processes")

    def __init__(self, frame: Optional[Frame], key: str) -> None:
        self.frame, self.key = frame, key
        # member names (while the tree is built: document numbers as well): a rank set
        self.members = Members()
        self.threads = 0
        self.children: Dict[str, Node] = {}
        # the root's: label, pid, host of each document (a list; a mergetree.Processes in a reduced tree)
        self.processes: Any = []

    def frame_json(self) -> Optional[Dict[str, Any]]:
        """The node's FRAME as ``merge --json`` writes it: without ``address`` and ``source``."""
        return None if self.frame is None else {k: v for k, v in self.frame.to_json().items()
                                                if k not in ("address", "source")}

    def to_json(self) -> Dict[str, Any]:
        """The node as ``merge --json`` writes it (``frame``, ``members``, ``threads``, ``children``); built
        without recursion, whatever the tree's depth."""
        out = self._json()
        todo = [(self, out)]
        while todo:
            node, entry = todo.pop()
            for child in node.children.values():
                sub = child._json()
                entry["children"].append(sub)
                todo.append((child, sub))
        return out

    def _json(self) -> Dict[str, Any]:
        return {"frame": self.frame_json(), "members": sorted(self.members), "threads": self.threads,
                "children": []}


class Builder:
    """The tree of documents read one at a time (none is kept): each thread's stack put in once, outermost
    frame first, its process a document number on each node it goes through (named at the end:
    ``name_members``).  ``mergetree.Reducer`` adds merged trees to it."""

    def __init__(self, all_threads: bool = False) -> None:
        self.root = Node(None, "")
        self.all_threads = all_threads
        self.who: List[Document] = []  # the documents' processes, for their names

    def add_document(self, doc: Document) -> int:
        """Put in the stacks of ``doc`` (those that go in the tree: ``stacks``); its number."""
        i = len(self.who)
        self.who.append(Document(pid=doc.pid, host=doc.host, task=doc.task, labels=doc.labels,
                                 scheduler=doc.scheduler))
        for t in stacks(doc, self.all_threads):
            node = self.root
            node.members.docs[i] = None
            node.threads += 1
            for f in reversed(render.hide_glue(t.frames)):
                key = frame_text(f)
                child = node.children.get(key)
                if child is None:
                    child = node.children[key] = Node(f, key)
                node = child
                node.members.docs[i] = None
                node.threads += 1
        return i

    def name_members(self) -> List[str]:
        """Name the document numbers on every node (``member_names``, without recursion); the names."""
        names = member_names(self.who)
        todo = [self.root]
        while todo:
            node = todo.pop()
            node.members.name(names)
            todo.extend(node.children.values())
        return names

    def process(self, i: int, names: List[str]) -> Dict[str, Any]:
        """Document ``i``'s process as the root's ``processes`` lists it."""
        d = self.who[i]
        entry: Dict[str, Any] = {"label": names[i], "pid": d.pid, "host": d.host}
        if d.scheduler is not None:
            entry["scheduler"] = d.scheduler
        return entry


def build_tree(docs: Iterable[Document], all_threads: bool = False) -> Node:
    """The prefix tree of every (Python, or with ``all_threads`` every) thread's stack, glue hidden.

    ``docs`` is read once, one document at a time (none is kept: memory grows with the tree and the
    number of processes, not with the documents).  Raises TfnativeError when there is none.
    """
    b = Builder(all_threads)
    for doc in docs:
        b.add_document(doc)
    if not b.who:
        raise TfnativeError(NO_DOCUMENTS)
    names = b.name_members()
    b.root.processes = [b.process(i, names) for i in range(len(b.who))]
    return b.root


def where(process: Dict[str, Any]) -> Optional[str]:
    """``rank 2 on node vm (slurm job 12, step 0), pid 4242``: a process of the root's ``processes`` in
    words, where a scheduler named its rank (None otherwise)."""
    text = render.describe_rank(process.get("scheduler"), process.get("host"))
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
    """The tree as indented text: ``frame  [members] (N threads)``; the outlier marked.  Without recursion;
    the levels below ``DEEP`` are not indented further but say their level (``[level 300]``)."""
    lines = ["%d processes, %d threads: %s" % (len(root.members), root.threads, compress(root.members))]
    by_label: Dict[str, Dict[str, Any]] = {}  # the processes by their label, once an outlier names one

    def words(label: str) -> Optional[str]:
        if len(root.processes) > 10000:  # many: read through (one outlier named alone, mostly), not kept
            found = None
            for p in root.processes:
                found = p if p["label"] == label else found
            return where(found) if found is not None else None
        if not by_label:
            by_label.update((p["label"], p) for p in root.processes)
        p = by_label.get(label)
        return where(p) if p is not None else None

    todo: List[Tuple[Node, int, bool]] = []

    def expand(node: Node, depth: int) -> None:
        odd = outlier(node)
        todo.extend((c, depth, c is odd) for c in reversed(list(node.children.values())))

    expand(root, 1)
    while todo:
        child, depth, odd = todo.pop()
        mark = "   <== OUTLIER" if odd else ""
        said = words(next(iter(child.members))) if mark and len(child.members) == 1 else None
        if said:
            mark += ": %s" % said
        indent = "  " * depth if depth <= DEEP else "  " * DEEP + "[level %d] " % depth
        lines.append("%s%s   [%s] (%d thread%s)%s" % (indent, child.key, compress(child.members), child.threads,
                                                    "" if child.threads == 1 else "s", mark))
        expand(child, depth + 1)
    return lines


def folded_lines(docs: Iterable[Document], all_threads: bool = False) -> List[str]:
    """Flamegraph "folded" stacks: ``outer;...;inner COUNT`` per distinct stack.  Raises TfnativeError
    when there is no document."""
    counts: Dict[str, int] = {}
    seen = 0
    for doc in docs:
        seen += 1
        for t in stacks(doc, all_threads):
            frames = reversed(render.hide_glue(t.frames))
            key = ";".join(frame_text(f).replace(";", ",") for f in frames)
            counts[key] = counts.get(key, 0) + 1
    if not seen:
        raise TfnativeError(NO_DOCUMENTS)
    return ["%s %d" % (k, n) for k, n in counts.items()]


def merge_json(root: Node) -> Dict[str, Any]:
    """``{"tfnative_merge": 1, "version": "X.Y.Z", "processes": [...], "tree": NODE}``."""
    return {"tfnative_merge": 1, "version": __version__, "processes": list(root.processes), "tree": root.to_json()}


def merge_json_text(root: Node) -> str:
    """``merge_json(root)`` as ``json.dumps(..., indent=1)`` writes it, written without recursion: the same
    text for a tree of up to ``DEEP`` levels; the nodes below are written on one line each (as ``json.dumps``
    without ``indent``), so that the text grows with the tree, not with the square of its depth."""

    def value(v: Any, level: int) -> str:  # a small value (a frame, members) at an indentation level
        if level < 0:
            return json.dumps(v)
        return json.dumps(v, indent=1).replace("\n", "\n" + " " * level)

    head = '{\n "tfnative_merge": 1,\n "version": %s,\n "processes": %s,\n "tree": ' % (
        json.dumps(__version__), value(list(root.processes), 1))
    out = [head]
    # (node, its indentation level, -1: on one line) or a text to write, in reverse order of writing
    todo: List[Any] = ["\n}", (root, 1)]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        node, level = item
        if level < 0 or level > 2 * DEEP:
            out.append('{"frame": %s, "members": %s, "threads": %d, "children": [' % (
                value(node.frame_json(), -1), value(sorted(node.members), -1), node.threads))
            todo.append("]}")
            kids = list(node.children.values())
            for i in range(len(kids) - 1, -1, -1):
                todo.append((kids[i], -1))
                if i:
                    todo.append(", ")
            continue
        inner = "\n" + " " * (level + 1)
        out.append('{%s"frame": %s,%s"members": %s,%s"threads": %d,%s"children": ' % (
            inner, value(node.frame_json(), level + 1), inner, value(sorted(node.members), level + 1), inner,
            node.threads, inner))
        kids = list(node.children.values())
        if not kids:
            out.append("[]\n" + " " * level + "}")
            continue
        todo.append("\n" + " " * (level + 1) + "]\n" + " " * level + "}")
        sep = "\n" + " " * (level + 2)
        for i in range(len(kids) - 1, -1, -1):
            todo.append((kids[i], level + 2))
            todo.append(("[" if i == 0 else ",") + sep)
    return "".join(out)
