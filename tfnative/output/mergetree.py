"""Merged trees that merge again, as LLNL STAT does it, written (pure): ``merge --tree FILE`` and the merged tree
shown once for ``merge`` and ``stack --slurm-job`` (``show``).

``merge --tree FILE`` writes the tree of ``merge`` as one document, ``{"tfnative_tree": 1, "processes": [...],
"nodes": [[UP, KEY, MEMBERS, THREADS, FRAME]...]}`` (docs/json-schema.md): the nodes flat, each after its
parent (``UP``: the parent's index), so that the JSON nests a few levels deep whatever the stacks' depth, and
the members as rank sets (``[["rank", "0-7,9"], "host:4242"]``: ranges per label prefix, the other labels as
they are), so that a node of 80,000 ranks in one range takes a few bytes.  ``merge`` reads such documents
beside ``stack --json`` documents (read and checked by ``core/docread.py``) and merges them into one tree
(``analysis/tree.py``: ``Reducer``, ``reduce``).
"""

from __future__ import annotations

import json
from typing import Callable, List, Optional, Tuple

from .. import __version__
from ..core.rankset import TREE_VERSION
from ..core.treemodel import Node, Processes
from ..errors import TfnativeError
from ..files import is_stdout, write_output
from .merge import merge_json_text, text_lines

MAX_LISTED = 1_000_000  # members ``merge --json`` lists one by one at most (its members are lists)


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
