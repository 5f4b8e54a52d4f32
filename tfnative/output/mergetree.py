"""Merged trees that merge again, as LLNL STAT does it: each node reduces its ranks to one tree, the head merges
the node trees (pure).

``merge --tree FILE`` writes the tree of ``merge`` as one document, ``{"tfnative_tree": 1, "processes": [...],
"nodes": [[UP, KEY, MEMBERS, THREADS, FRAME]...]}`` (docs/json-schema.md): the nodes flat, each after its
parent (``UP``: the parent's index), so that the JSON nests a few levels deep whatever the stacks' depth, and
the members as rank sets (``[["rank", "0-7,9"], "host:4242"]``: ranges per label prefix, the other labels as
they are), so that a node of 80,000 ranks in one range takes a few bytes.  ``merge`` reads such documents
beside ``stack --json`` documents: a tree adds its counts of threads and unites its members with the nodes of
the same path (``Reducer``).  Memory grows with the tree (its nodes, the ranges of each), not with the ranks.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from ..core.docschema import SchemaError, check_frame, check_scheduler, clean_string, kind_of
from ..core.model import Document, frame_from_json
from ..core.rankset import Members
from ..errors import TfnativeError
from ..files import is_stdout, write_output
from .merge import NO_DOCUMENTS, Builder, Node, inputs_of, merge_json_text, text_lines
from .threadgroups import frame_text

TREE_VERSION = 1
MAX_LISTED = 1_000_000  # members ``merge --json`` lists one by one at most (its members are lists)


_SCHEDULER_TYPES: Dict[str, type] = {"kind": str, "rank": int, "job": str, "step": str, "node": str,
                                     "local_rank": int, "pod": str, "world_size": int}


def _check_scheduler(sched: Any, i: int) -> None:
    """``docschema.check_scheduler``, at once where every value is an ASCII string or an integer of its type."""
    if isinstance(sched, dict) and all(type(v) is _SCHEDULER_TYPES.get(k) and (type(v) is int or str(v).isascii())
                                       for k, v in sched.items()):
        return
    try:
        check_scheduler(sched)
    except SchemaError as e:
        raise SchemaError("processes[%d].scheduler%s" % (i, "." + e.where if e.where else ""),
                          str(e).split(": ", 1)[-1]) from None


def _one(members: Any) -> Optional[str]:
    """A text that stands for MEMBERS of one label or one [PREFIX, RANGES] (RANGES has no NUL), else None."""
    if type(members) is not list or len(members) != 1:
        return None
    item = members[0]
    if type(item) is str:
        return "L" + item
    if type(item) is list and len(item) == 2 and type(item[0]) is str and type(item[1]) is str:
        return "R%s\x00%s" % (item[0], item[1])
    return None


class TreeDoc:
    """A ``merge --tree`` document, its nodes checked in shape (their frames and members are checked when
    they are merged: ``Reducer.add_tree``); ``where``: its source, for messages."""

    __slots__ = ("processes", "nodes", "where")

    def __init__(self, processes: List[Dict[str, Any]], nodes: List[List[Any]], where: str) -> None:
        self.processes, self.nodes, self.where = processes, nodes, where

    @classmethod
    def from_json(cls, d: Dict[str, Any], where: str) -> TreeDoc:
        """Raises SchemaError naming the value that is wrong."""
        if d.get("tfnative_tree") != TREE_VERSION:
            raise SchemaError("tfnative_tree", "a tree of version %d expected (this tfnative's 'merge --tree'), "
                                               "got %s" % (TREE_VERSION, json.dumps(d.get("tfnative_tree"))[:40]))
        processes, nodes = d.get("processes"), d.get("nodes")
        if not isinstance(processes, list):
            raise SchemaError("processes", "expected a list, got %s" % kind_of(processes))
        for i, p in enumerate(processes):
            if not isinstance(p, dict) or not isinstance(p.get("label"), str):
                raise SchemaError("processes[%d]" % i, "expected {\"label\": str, ...}, got %s" % kind_of(p))
            for key in ("label", "host"):  # lone surrogates escaped (docschema.clean_string): printable
                if isinstance(p.get(key), str) and not p[key].isascii():
                    p[key] = clean_string(p[key])
            for key, kind in (("pid", int), ("host", str)):
                if p.get(key) is not None and type(p[key]) is not kind:
                    raise SchemaError("processes[%d].%s" % (i, key), "expected %s, got %s"
                                      % (kind_of(kind()), kind_of(p[key])))
            if p.get("scheduler") is not None:
                _check_scheduler(p["scheduler"], i)
        if not isinstance(nodes, list) or not nodes:
            raise SchemaError("nodes", "expected a list of nodes (the root first), got %s"
                              % ("an empty list" if nodes == [] else kind_of(nodes)))
        return cls(processes, nodes, where)

    @classmethod
    def from_merge_json(cls, d: Dict[str, Any], where: str) -> TreeDoc:
        """A ``merge --json`` document (``{"tfnative_merge": 1, "processes", "tree"}``, its members lists of
        labels) as the flat tree; walked without recursion.  Raises SchemaError."""
        if d.get("tfnative_merge") != 1:
            raise SchemaError("tfnative_merge", "version 1 expected, got %s" % json.dumps(d.get("tfnative_merge"))[:40])
        nodes: List[List[Any]] = []
        todo: List[Tuple[Any, int, str]] = [(d.get("tree"), -1, "tree")]
        while todo:
            n, up, at = todo.pop()
            if not isinstance(n, dict) or not isinstance(n.get("children"), list):
                raise SchemaError(at, "expected a NODE {\"frame\", \"members\", \"threads\", \"children\"}, "
                                      "got %s" % kind_of(n))
            frame = n.get("frame")
            key = ""
            if up >= 0:
                if not isinstance(frame, dict):
                    raise SchemaError(at + ".frame", "expected an object, got %s" % kind_of(frame))
                try:
                    check_frame(frame)
                    key = frame_text(frame_from_json(frame))
                except SchemaError as e:
                    raise SchemaError("%s.frame%s" % (at, "." + e.where if e.where else ""),
                                      str(e).split(": ", 1)[-1]) from None
                except (ValueError, KeyError, TypeError) as e:
                    raise SchemaError(at + ".frame", "not a frame tfnative reads (%s)" % e) from None
            else:
                frame = None
            index = len(nodes)
            nodes.append([up, key, n.get("members"), n.get("threads"), frame])
            kids = n["children"]
            todo.extend((kids[i], index, "%s.children[%d]" % (at, i)) for i in range(len(kids) - 1, -1, -1))
        return cls.from_json({"tfnative_tree": TREE_VERSION, "processes": d.get("processes"), "nodes": nodes},
                             where)


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


Input = Union[Document, TreeDoc]


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
        if isinstance(item, TreeDoc):
            self.add_tree(item)
        else:
            self.processes.append(self.add_document(item))

    def add_tree(self, tree: TreeDoc) -> None:
        """Merge a ``merge --tree`` document, checking each node as it comes (the root first, each node after
        its parent); raises TfnativeError naming the node that is wrong."""
        self.trees += 1
        if tree.processes:
            self.processes.append((json.dumps(tree.processes, separators=(",", ":")), len(tree.processes)))
        at: List[Node] = []
        seen: Dict[str, Members] = {}  # the members of this tree read so far, by their text: nodes repeat them
        for i, n in enumerate(tree.nodes):
            try:
                if not (type(n) is list and len(n) == 5):
                    raise SchemaError("", "expected [UP, KEY, MEMBERS, THREADS, FRAME], got %s" % kind_of(n))
                up, key, members, threads, frame = n
                if type(key) is str and not key.isascii():
                    key = clean_string(key)
                if type(up) is not int or not -1 <= up < i or (up == -1) != (i == 0):
                    raise SchemaError("", "the root first (UP -1), each node after its parent (UP its index)")
                if type(threads) is not int or threads < 0 or type(key) is not str:
                    raise SchemaError("", "expected [UP, KEY (a string), MEMBERS, THREADS (a count), FRAME]")
                if up < 0:
                    if frame is not None:
                        raise SchemaError("", "the root's FRAME is null")
                    node = self.root
                else:
                    parent = at[up]
                    found = parent.children.get(key)
                    if found is None:
                        if not isinstance(frame, dict):
                            raise SchemaError("", "expected a FRAME, got %s" % kind_of(frame))
                        try:
                            check_frame(frame)
                        except SchemaError as e:
                            raise SchemaError("", "frame.%s" % e) from None
                        found = parent.children[key] = Node(frame_from_json(frame), key)
                    node = found
                text = _one(members)
                m = seen.get(text) if text is not None else None
                if m is None:
                    m = Members()
                    m.update_json(members)
                    if text is not None and len(seen) < 256:
                        seen[text] = m
                node.members.update(m)
            except SchemaError as e:
                raise TfnativeError("%s: nodes[%d]%s%s" % (tree.where, i, "." if e.where else ": ", e)) from None
            except (ValueError, KeyError, TypeError) as e:
                raise TfnativeError("%s: nodes[%d]: not a frame tfnative reads (%s)" % (tree.where, i, e)) from None
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
    head = '{"tfnative_tree": %d, "kind": "tree", "processes": %s,\n "nodes": [\n' % (
        TREE_VERSION, processes.json_text() if isinstance(processes, Processes)
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


def iter_inputs(sources: Iterable[Tuple[str, Iterable[str]]]) -> Iterator[Any]:
    """``merge.iter_document_chunks``, with merged trees beside the documents: a ``merge --tree`` or ``merge
    --json`` document is a ``TreeDoc``."""
    return inputs_of(sources, _load_tree)


def _load_tree(doc: Dict[str, Any], where: str) -> TreeDoc:
    return TreeDoc.from_json(doc, where) if "tfnative_tree" in doc else TreeDoc.from_merge_json(doc, where)


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
