"""Merge many ``stack`` documents into one STAT-style prefix tree (pure).

Input: schema-v1 documents (JSON Lines, one document, several concatenated, ``host: `` prefixes as pdsh
prints them).  Output: a tree, outermost frame first; each node a frame rendered as ``stack`` renders it
(glue hidden, ``[py]``, user marks, ``<-- op X``), the members (processes) and threads that share it.
The child with the fewest members, where siblings differ, is the outlier.  Memory is linear in the input.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate, repeat
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from ..core import ranks
from ..core.docschema import SchemaError, check_document
from ..core.model import Document, Frame, Thread
from ..core.rankset import Members, compress
from ..errors import TfnativeError
from . import render
from .threadgroups import frame_text

_PDSH_LINES = re.compile(r"(?m)^[A-Za-z0-9_.\-]+: ")  # pdsh's "host: " at a line's start
_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')  # a JSON string (never over a line's end)
_NOT_BRACKET = {c: None for c in range(128) if chr(c) not in "[]{}\n"}  # str.translate: ASCII but brackets out
_SPACE = re.compile(r"\s*")
_DELTA = {"{": 1, "[": 1, "}": -1, "]": -1, "\n": 0}

MAX_DEPTH = 64  # how deep a document's JSON may nest (schema v1 needs about 10): checked before it is parsed
MAX_DOCUMENT_MB = 64  # how big one document may be (a 100,000-frame stack is about 13 MiB)
TOO_BIG = ("a document bigger than %d MiB (merge reads 'tfnative stack --json' documents up to that size)"
           % MAX_DOCUMENT_MB)
DEEP = 256  # tree levels indented in the text and in --json; the deeper ones are not indented any further


def iter_documents(texts: Iterable[Tuple[str, str]]) -> Iterator[Document]:
    """Every document in ``texts`` ((source name, text) pairs), in order, one at a time.  Raises
    TfnativeError on garbage or a document that is not tfnative schema v1 (an empty input yields none)."""
    return iter_document_chunks((name, (text,)) for name, text in texts)


def iter_document_chunks(sources: Iterable[Tuple[str, Iterable[str]]]) -> Iterator[Document]:
    """``iter_documents`` of inputs read in pieces: (source name, its text in chunks that end at a line's end).

    Bounded whatever the input: a document is parsed once its last line has come (JSON Lines, one document
    spread over lines, several on a line); JSON nested deeper than ``MAX_DEPTH`` or a document bigger than
    ``MAX_DOCUMENT_MB`` is an error before anything is parsed; each document is checked against the schema
    (``docschema``: the message names the value that is wrong) before it is read."""
    for item in inputs_of(sources, None):
        assert isinstance(item, Document)
        yield item


# How a merged tree is read where one may come (``mergetree.iter_inputs`` passes ``TreeDoc.load``): None, a
# tree is refused.
TreeLoader = Optional[Callable[[Dict[str, Any], str], Any]]


def inputs_of(sources: Iterable[Tuple[str, Iterable[str]]], trees: TreeLoader) -> Iterator[Any]:
    """``iter_document_chunks``, with merged trees beside the documents where ``trees`` reads them."""
    for name, chunks in sources:
        yield from _documents_of(name, chunks, trees)


def _documents_of(name: str, chunks: Iterable[str], trees: TreeLoader) -> Iterator[Any]:
    pending: List[str] = []  # the text of a document begun, not ended yet
    size = 0
    depth = 0  # its JSON's nesting at its end
    line = 1  # the line it starts on
    count = [0]  # documents read
    for chunk in chunks:
        if trees and not pending and depth == 0 and chunk.startswith('{"tfnative_tree"'):
            whole = _tree_alone(chunk)  # a merged tree, its input to itself: parsed without the scan
            if whole is not None:
                yield from _parse(name, chunk, line, count, trees, whole)
                line += chunk.count("\n")
                continue
        chunk = _PDSH_LINES.sub("", chunk)
        if not pending and depth == 0:
            _garbage_first(name, chunk, line, count)
        # The structure alone: strings out, then all but brackets and line ends.  The depth after each of them:
        brackets = _STRING.sub("", chunk).translate(_NOT_BRACKET)
        levels = list(accumulate(map(_DELTA.get, brackets, repeat(0)), initial=depth))
        top = max(levels)
        if top > MAX_DEPTH:
            at = line + "".join(pending).count("\n") + brackets.count("\n", 0, levels.index(top))
            raise TfnativeError("%s: JSON nested more than %d deep at line %d (a 'tfnative stack --json' document "
                                "nests about 10 deep)" % (name, MAX_DEPTH, at))
        if min(levels) < 0:  # more closed than opened: not JSON, which the parser says where
            end = len(chunk)
        elif min(levels[1:], default=1) > 0:
            end = -1
        else:  # the last line end where the depth is back to 0: what comes before it is whole documents
            i = brackets.rfind("\n")
            while i >= 0 and levels[i + 1] != 0:
                i = brackets.rfind("\n", 0, i)
            end = -1
            if i >= 0:
                end = len(chunk)
                for _ in range(brackets.count("\n", i + 1) + 1):
                    end = chunk.rfind("\n", 0, end)
                end += 1
        if end > 0:
            pending.append(chunk[:end])
            text = "".join(pending)
            yield from _parse(name, text, line, count, trees)
            line += text.count("\n")
            depth = 0 if end == len(chunk) else levels[-1]
            pending, size, chunk = [], 0, chunk[end:]
        else:
            depth = levels[-1]
        if chunk:
            pending.append(chunk)
            size += len(chunk)
            if size > MAX_DOCUMENT_MB << 20:
                raise TfnativeError("%s: %s" % (name, TOO_BIG))
    if pending:
        yield from _parse(name, "".join(pending), line, count, trees)


def _tree_alone(chunk: str) -> Optional[Any]:
    """The document ``chunk`` is, where it is one JSON value alone (a ``merge --tree`` file read in one piece;
    its nodes flat, it nests 5 deep); None otherwise (then the scan reads it, and says what is wrong)."""
    try:
        doc, end = json.JSONDecoder().raw_decode(chunk)
    except (ValueError, RecursionError):
        return None
    return doc if not chunk[end:].strip() else None


def _depth(text: str) -> int:
    """How deep ``text``'s JSON nests (its strings left out), without parsing it."""
    brackets = _STRING.sub("", text).translate(_NOT_BRACKET)
    return max(accumulate(map(_DELTA.get, brackets, repeat(0)), initial=0))


def _garbage_first(name: str, chunk: str, line: int, count: List[int]) -> None:
    """Where a document should begin and no ``{`` does: the error its first line gives, at once (random bytes
    are not read on until they happen to close what they opened)."""
    match = _SPACE.match(chunk)
    start = match.end() if match else 0
    if start >= len(chunk) or chunk[start] == "{":
        return
    end = chunk.find("\n", start)
    first = chunk[:end if end >= 0 else len(chunk)]
    if _depth(first) > MAX_DEPTH:
        raise TfnativeError("%s: JSON nested more than %d deep at line %d (a 'tfnative stack --json' document "
                            "nests about 10 deep)" % (name, MAX_DEPTH, line + chunk.count("\n", 0, start)))
    for _ in _parse(name, first, line, count, None):  # raises: no document begins without "{"
        pass


def _parse(name: str, text: str, first_line: int, count: List[int], trees: TreeLoader,
           parsed: Optional[Any] = None) -> Iterator[Any]:
    """The documents in ``text`` (whole ones: JSON values one after the other), checked, one at a time
    (``trees``: merged trees too, as ``mergetree.TreeDoc``; ``parsed``: ``text``'s one value, parsed already)."""
    dec = json.JSONDecoder()
    pos = 0
    while True:
        match = _SPACE.match(text, pos)
        pos = match.end() if match else pos
        if pos >= len(text):
            return
        start = first_line + text.count("\n", 0, pos)
        try:
            if parsed is not None:
                doc, pos, parsed = parsed, len(text), None
            else:
                doc, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise TfnativeError("%s: not JSON at line %d, column %d (%s)" % (
                name, first_line + text.count("\n", 0, e.pos), e.pos - text.rfind("\n", 0, e.pos), e.msg)) from None
        except (ValueError, RecursionError) as e:  # a number of more digits than Python converts
            raise TfnativeError("%s: not JSON at line %d (%s)" % (name, start, str(e).split(":")[0])) from None
        count[0] += 1
        where = name if count[0] == 1 else "%s (document %d, line %d)" % (name, count[0], start)
        if isinstance(doc, dict) and ("tfnative_tree" in doc or "tfnative_merge" in doc) and "tfnative" not in doc:
            if trees is None:
                raise TfnativeError("%s: a merged tree (from 'tfnative merge'): only 'tfnative merge' reads "
                                    "these" % where)
            try:
                yield trees(doc, where)
            except SchemaError as e:
                raise TfnativeError("%s: %s" % (where, e)) from None
            del doc
            continue
        if not isinstance(doc, dict) or doc.get("tfnative") != 1:
            raise TfnativeError("%s: a document that is not tfnative schema 1 (from 'tfnative stack "
                                "--json')" % where)
        try:
            check_document(doc)
            yield Document.from_json(doc)
        except (SchemaError, ValueError) as e:
            raise TfnativeError("%s: %s" % (where, e)) from None
        del doc


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
    """``{"tfnative_merge": 1, "processes": [...], "tree": NODE}``."""
    return {"tfnative_merge": 1, "processes": list(root.processes), "tree": root.to_json()}


def merge_json_text(root: Node) -> str:
    """``merge_json(root)`` as ``json.dumps(..., indent=1)`` writes it, written without recursion: the same
    text for a tree of up to ``DEEP`` levels; the nodes below are written on one line each (as ``json.dumps``
    without ``indent``), so that the text grows with the tree, not with the square of its depth."""

    def value(v: Any, level: int) -> str:  # a small value (a frame, members) at an indentation level
        if level < 0:
            return json.dumps(v)
        return json.dumps(v, indent=1).replace("\n", "\n" + " " * level)

    head = '{\n "tfnative_merge": 1,\n "processes": %s,\n "tree": ' % value(list(root.processes), 1)
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
