"""The merged tree's model (pure): its nodes (``Node``: a frame, the members and threads through it, children by
the frame's text), the processes of a reduced tree (``Processes``), and how a document's process is named in
it (``member_label``, ``member_names``).  ``analysis/tree.py`` builds the tree; ``output/merge.py``,
``output/mergetree.py`` and the pictures write it.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Optional, Set, Union

from .model import Document, EventFrame
from .rankset import Members


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
    return host_pid(doc)


def host_pid(doc: Document) -> str:
    return "%s:%s" % (doc.host or "localhost", doc.pid if doc.pid is not None else "?")


def member_names(docs: List[Document]) -> List[str]:
    """``member_label`` of each document, except that a name two processes share (one ``--label`` given
    to several, the same task in two jobs) falls back to ``host:pid`` for each of them."""
    names = [member_label(d) for d in docs]
    owners: Dict[str, Set[Any]] = {}
    for name, d in zip(names, docs):
        owners.setdefault(name, set()).add((d.host, d.pid))
    return [n if len(owners[n]) == 1 else host_pid(d) for n, d in zip(names, docs)]


class Node:
    """A frame of the tree: the processes (members) and threads whose stacks go through it."""

    __slots__ = ("frame", "key", "members", "threads", "children", "processes", "outlier")

    def __init__(self, frame: Optional[EventFrame], key: str) -> None:
        self.frame, self.key = frame, key
        # member names (while the tree is built: document numbers as well): a rank set
        self.members = Members()
        self.threads = 0
        self.children: Dict[str, Node] = {}
        # the root's: label, pid, host of each document (a list; a ``Processes`` in a reduced tree)
        self.processes: Any = []
        # the child analysis found odd (``analysis/tree.outlier``), once the tree is whole; never written
        self.outlier: Optional[Node] = None

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


class Processes:
    """The processes of a reduced tree, in order: those of documents as objects, those of each merged tree as
    the tree's list in compact JSON text (about 150 bytes a process, against some 900 as objects), parsed
    again when read: 80,000 ranks' processes take about 12 MiB."""

    def __init__(self) -> None:
        self.parts: List[Union[Dict[str, Any], str]] = []
        self.count = 0

    def add(self, process: Dict[str, Any]) -> None:
        self.parts.append(process)
        self.count += 1

    def add_text(self, text: str, count: int) -> None:
        """Add ``count`` processes, a list as compact JSON text."""
        self.parts.append(text)
        self.count += count

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for part in self.parts:
            if isinstance(part, str):
                yield from json.loads(part)
            else:
                yield part

    def __getitem__(self, i: int) -> Dict[str, Any]:
        for n, p in enumerate(self):
            if n == i:
                return p
        raise IndexError(i)

    def json_text(self) -> str:
        """The list as compact JSON text, without making its objects again."""
        return "[%s]" % ",".join(p[1:-1] if isinstance(p, str) else json.dumps(p, separators=(",", ":"))
                                 for p in self.parts)
