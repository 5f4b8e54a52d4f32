"""The merged tree of many ``stack`` documents as ``merge`` writes it (pure): indented text with the outlier
marked (``text_lines``), ``merge --json`` (``merge_json``, ``merge_json_text``), flamegraph "folded" stacks of
documents (``folded_lines``), a process of the tree in words (``where``).

The tree is analysis's (``analysis/tree.py``: ``build_tree``, ``reduce``; its outliers marked on each node,
``Node.outlier``); each node a frame rendered as ``stack`` renders it (``[py]``, user marks, ``<-- op X``),
the members (processes) and threads that share it.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .. import __version__
from ..core.model import Document, NativeFrame
from ..core.rankset import NO_DOCUMENTS, compress
from ..core.treemodel import Node
from ..errors import TfnativeError
from . import render
from .threadgroups import frame_text

DEEP = 256  # tree levels indented in the text and in --json; the deeper ones are not indented any further


def where(process: Dict[str, Any]) -> Optional[str]:
    """``rank 2 on node vm (slurm job 12, step 0), pid 4242``: a process of the root's ``processes`` in
    words, where a scheduler named its rank (None otherwise)."""
    text = render.describe_rank(process.get("scheduler"), process.get("host"))
    if text is None:
        return None
    return "%s, pid %s" % (text, process.get("pid"))


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
        odd = node.outlier
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
    """Flamegraph "folded" stacks: ``outer;...;inner COUNT`` per distinct stack (``docs`` marked by analysis:
    its glue hidden).  Raises TfnativeError when there is no document."""
    counts: Dict[str, int] = {}
    seen = 0
    for doc in docs:
        seen += 1
        for t in doc.threads():
            if not (all_threads or t.runs_python()):
                continue
            frames = reversed([f for f in t.frames if not (isinstance(f, NativeFrame) and f.glue)])
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
