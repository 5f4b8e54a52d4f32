"""Merged trees that merge again, as LLNL STAT does it: each node reduces its ranks to one tree, the head merges
the node trees (pure).

``merge --tree FILE`` writes the tree of ``merge`` as one document, ``{"tfnative_tree": 1, "processes": [...],
"nodes": [[UP, KEY, MEMBERS, THREADS, FRAME]...]}`` (docs/json-schema.md): the nodes flat, each after its
parent (``UP``: the parent's index), so that the JSON nests a few levels deep whatever the stacks' depth, and
the members as rank sets (``[["rank", "0-7,9"], "host:4242"]``: ranges per label prefix, the other labels as
they are), so that a node of 80,000 ranks in one range takes a few bytes.  ``merge`` reads such documents
beside ``stack --json`` documents (read and checked by ``core/docread.py``): a tree adds its counts of threads
and unites its members with the nodes of the same path (``Reducer``).  Memory grows with the tree (its nodes,
the ranges of each), not with the ranks.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Protocol, Tuple, Union

from .. import __version__
from ..core.model import Document, Frame
from ..core.rankset import NO_DOCUMENTS, TREE_VERSION, Members
from ..errors import TfnativeError
from ..files import is_stdout, write_output
from .merge import Builder, Node, merge_json_text, text_lines
from .threadgroups import frame_text

MAX_LISTED = 1_000_000  # members ``merge --json`` lists one by one at most (its members are lists)


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


class TreeInput(Protocol):
    """A merged tree read back (``core/docread.TreeDoc``): its processes, and its nodes checked as they come."""

    processes: List[Dict[str, Any]]
    nodes: List[List[Any]]
    keyed: bool

    def checked_nodes(self) -> Iterator[Tuple[int, int, str, Any, int, Any]]: ...

    def frame(self, i: int, frame: Any) -> Frame: ...

    def members(self, i: int, members: Any) -> Members: ...


Input = Union[Document, TreeInput]


class Reducer(Builder):
    """One tree of ``stack`` documents and ``merge --tree`` trees, read one at a time (none is kept): counts
    of threads summed and members united per path, outermost frame first.  ``finish()`` gives the root (a
    ``merge.Node`` whose members are ``Members``)."""

    def __init__(self, all_threads: bool = False) -> None:
        super().__init__(all_threads)
        # in order: documents by number, each tree's list (compact JSON text: see ``Processes``)
        self.processes: List[Union[int, Tuple[str, int]]] = []
        self.trees = 0

    def add(self, item: Input) -> None:
        if isinstance(item, Document):
            self.processes.append(self.add_document(item))
        else:
            self.add_tree(item)

    def add_tree(self, tree: TreeInput) -> None:
        """Merge a ``merge --tree`` document, its nodes checked as they come (the root first, each node after
        its parent: ``docread.TreeDoc``); raises TfnativeError naming the node that is wrong."""
        self.trees += 1
        if tree.processes:
            self.processes.append((json.dumps(tree.processes, separators=(",", ":")), len(tree.processes)))
        at: List[Node] = []
        for i, up, key, members, threads, frame in tree.checked_nodes():
            if up < 0:
                node = self.root
            else:
                parent = at[up]
                if not tree.keyed:  # a ``merge --json`` tree: the frame's text is the key
                    key = frame_text(tree.frame(i, frame))
                found = parent.children.get(key)
                if found is None:
                    found = parent.children[key] = Node(tree.frame(i, frame), key)
                node = found
            node.members.update(tree.members(i, members))
            node.threads += threads
            at.append(node)
        tree.nodes = []

    def finish(self) -> Node:
        """The root, members named (documents: as ``merge.build_tree`` names them), ``processes`` in order.
        Raises TfnativeError when nothing was read."""
        if not self.who and not self.trees:
            raise TfnativeError(NO_DOCUMENTS)
        names = self.name_members()
        out = Processes()
        for p in self.processes:
            if isinstance(p, int):
                out.add(self.process(p, names))
            else:
                out.add_text(*p)
        self.root.processes = out
        self.who, self.processes = [], []
        return self.root


def reduce(items: Iterable[Input], all_threads: bool = False) -> Node:
    """The tree of ``items`` (documents and trees, in any mix), read one at a time."""
    r = Reducer(all_threads)
    for item in items:
        r.add(item)
    return r.finish()


def tree_json_text(root: Node) -> str:
    """``root`` as ``merge --tree`` writes it: one line for the head, one per node (each after its parent),
    written without recursion."""
    processes = root.processes
    head = '{"tfnative_tree": %d, "kind": "tree", "version": %s, "processes": %s,\n "nodes": [\n' % (
        TREE_VERSION, json.dumps(__version__), processes.json_text() if isinstance(processes, Processes)
        else json.dumps(processes, separators=(",", ":")))
    out = [head]
    todo: List[Tuple[Node, int]] = [(root, -1)]
    index = 0
    while todo:
        node, up = todo.pop()
        members = node.members
        out.append("%s[%d,%s,%s,%d,%s]" % (",\n" if index else "", up, json.dumps(node.key),
                                           json.dumps(members.to_json(), separators=(",", ":")), node.threads,
                                           json.dumps(node.frame_json(), separators=(",", ":"))))
        todo.extend((c, index) for c in reversed(list(node.children.values())))
        index += 1
    out.append("\n]}")
    return "".join(out)


def folded_tree_lines(root: Node) -> List[str]:
    """``merge --folded`` of a tree: ``outer;...;inner COUNT`` for each node where threads end."""
    own = root.threads - sum(c.threads for c in root.children.values())
    lines: List[str] = [" %d" % own] if own > 0 else []  # threads without a frame, as ``folded_lines`` writes them
    path: List[str] = []  # the keys down to the node
    todo: List[Tuple[Node, int]] = [(c, 0) for c in reversed(list(root.children.values()))]
    while todo:
        node, depth = todo.pop()
        del path[depth:]
        path.append(node.key.replace(";", ","))
        own = node.threads - sum(c.threads for c in node.children.values())
        if own > 0:
            lines.append("%s %d" % (";".join(path), own))
        todo.extend((c, depth + 1) for c in reversed(list(node.children.values())))
    return lines


def show(root: Node, echo: Callable[[str], object], json_path: Optional[str] = None, tree_path: Optional[str] = None,
         folded: bool = False, quiet: bool = False) -> None:
    """A merged tree as ``merge`` and ``stack --slurm-job`` show it: ``--json`` and ``--tree`` written, then
    its folded stacks (``folded``) or its text, each line given to ``echo``; no text where a file went to
    stdout or ``quiet``."""
    if json_path:
        if len(root.members) > MAX_LISTED:
            raise TfnativeError("%d processes are too many for --json, which lists each process at each "
                                "node: use --tree (rank sets as ranges)" % len(root.members))
        write_output(json_path, merge_json_text(root).encode() + b"\n")
    if tree_path:
        write_output(tree_path, tree_json_text(root).encode() + b"\n")
    if folded:
        for line in folded_tree_lines(root):
            echo(line)
        return
    if is_stdout(json_path) or is_stdout(tree_path) or quiet:
        return
    for line in text_lines(root):
        echo(line)
