"""Many ``stack`` documents (and merged trees) as one STAT-style prefix tree, and its outlier (pure).

The tree is built here, the one loop that puts a stack in it (``Builder``): each thread's stack (those that
run Python, or every one), outermost frame first, the interpreter's glue hidden; a node per frame, keyed by the
frame's text as the renderers print it (``key``: ``output/threadgroups.frame_text``, given by the caller), with
the members (processes) and threads that go through it.  A merged tree read back (``merge --tree``) is merged
into it as LLNL STAT does it (``Reducer``).  The child with the fewest members, where siblings differ, is the
outlier (``outlier``, marked on each node of a whole tree: ``Node.outlier``; the highest one:
``first_outlier``).  Each node's frame is marked as the renderers show it (``frames.mark_frame``).
``output/merge.py`` and ``output/mergetree.py`` write the tree (text, JSON, folded), ``output/flamegraph.py``
draws it.  Memory is linear in the input: documents are read one at a time, none is kept.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Protocol, Tuple, Union

from ..core.frameclass import is_glue
from ..core.model import Document, EventFrame, EventThread, NativeFrame, PythonFrame
from ..core.rankset import NO_DOCUMENTS, Members
from ..core.treemodel import Node, Processes, member_names
from ..errors import TfnativeError
from .frames import mark_frame, python_user

# a frame's text, as the tree's nodes are keyed by it (output/threadgroups.frame_text)
Key = Callable[[EventFrame], str]


def stacks(doc: Document, all_threads: bool) -> Iterator[EventThread]:
    """The threads of a document that go in the tree (those that run Python, or ``all_threads``)."""
    return (t for t in doc.threads() if all_threads or t.runs_python())


class Builder:
    """The tree of documents read one at a time (none is kept): each thread's stack put in once, outermost
    frame first, its process a document number on each node it goes through (named at the end:
    ``name_members``).  ``Reducer`` adds merged trees to it.  A document's native frames get their ``glue``
    (the renderers that draw documents read it), a node's frame every mark (``frames.mark_frame``)."""

    def __init__(self, key: Key, all_threads: bool = False) -> None:
        self.key = key
        self.root = Node(None, "")
        self.all_threads = all_threads
        self.who: List[Document] = []  # the documents' processes, for their names

    def add_document(self, doc: Document) -> int:
        """Put in the stacks of ``doc`` (those that go in the tree: ``stacks``); its number."""
        i = len(self.who)
        self.who.append(Document(pid=doc.pid, host=doc.host, task=doc.task, labels=doc.labels,
                                 scheduler=doc.scheduler))
        key = self.key
        for t in stacks(doc, self.all_threads):
            node = self.root
            node.members.docs[i] = None
            node.threads += 1
            for f in reversed(t.frames):
                if isinstance(f, NativeFrame):
                    f.glue = is_glue(f)
                    if f.glue:
                        continue
                elif isinstance(f, PythonFrame):
                    f.user_code = python_user(f)
                text = key(f)
                child = node.children.get(text)
                if child is None:
                    child = node.children[text] = Node(mark_frame(f), text)
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


def build_tree(key: Key, docs: Iterable[Document], all_threads: bool = False) -> Node:
    """The prefix tree of every (Python, or with ``all_threads`` every) thread's stack, glue hidden, each node
    keyed by ``key`` of its frame.

    ``docs`` is read once, one document at a time (none is kept: memory grows with the tree and the
    number of processes, not with the documents).  Raises TfnativeError when there is none.
    """
    b = Builder(key, all_threads)
    for doc in docs:
        b.add_document(doc)
    if not b.who:
        raise TfnativeError(NO_DOCUMENTS)
    names = b.name_members()
    b.root.processes = [b.process(i, names) for i in range(len(b.who))]
    return mark_outliers(b.root)


def outlier(node: Node) -> Optional[Node]:
    """The child with strictly the fewest members, where siblings differ in their count."""
    kids = list(node.children.values())
    if len(kids) < 2:
        return None
    counts = sorted(len(k.members) for k in kids)
    if counts[0] == counts[1]:
        return None
    return min(kids, key=lambda k: len(k.members))


def mark_outliers(root: Node) -> Node:
    """Each node's ``outlier`` (``outlier``), without recursion; ``root``."""
    todo = [root]
    while todo:
        node = todo.pop()
        node.outlier = outlier(node)
        todo.extend(node.children.values())
    return root


def first_outlier(root: Node) -> Optional[Node]:
    """The highest place where one branch has fewer members than its siblings (breadth first): the branch of
    the process (or processes) whose stacks leave the others' first; None where all agree."""
    todo = [root]
    while todo:
        node = todo.pop(0)
        odd = node.outlier
        if odd is not None:
            return odd
        todo.extend(node.children.values())
    return None


class TreeInput(Protocol):
    """A merged tree read back (``core/docread.TreeDoc``): its processes, and its nodes checked as they come."""

    processes: List[Dict[str, Any]]
    nodes: List[List[Any]]
    keyed: bool

    def checked_nodes(self) -> Iterator[Tuple[int, int, str, Any, int, Any]]: ...

    def frame(self, i: int, frame: Any) -> EventFrame: ...

    def members(self, i: int, members: Any) -> Members: ...


Input = Union[Document, TreeInput]


class Reducer(Builder):
    """One tree of ``stack`` documents and ``merge --tree`` trees, read one at a time (none is kept): counts
    of threads summed and members united per path, outermost frame first.  ``finish()`` gives the root (a
    ``Node`` whose members are ``Members``)."""

    def __init__(self, key: Key, all_threads: bool = False) -> None:
        super().__init__(key, all_threads)
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
                    key = self.key(mark_frame(tree.frame(i, frame)))
                found = parent.children.get(key)
                if found is None:
                    found = parent.children[key] = Node(mark_frame(tree.frame(i, frame)), key)
                node = found
            node.members.update(tree.members(i, members))
            node.threads += threads
            at.append(node)
        tree.nodes = []

    def finish(self) -> Node:
        """The root, members named (documents: as ``build_tree`` names them), ``processes`` in order.
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
        return mark_outliers(self.root)


def reduce(key: Key, items: Iterable[Input], all_threads: bool = False) -> Node:
    """The tree of ``items`` (documents and trees, in any mix), read one at a time."""
    r = Reducer(key, all_threads)
    for item in items:
        r.add(item)
    return r.finish()
