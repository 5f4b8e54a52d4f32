"""The documents ``merge`` reads, read and checked before anything renders them: ``stack --json`` documents
(JSON Lines, one document, several concatenated, ``host: `` prefixes as pdsh prints them) and the merged trees
of ``merge --tree`` and ``merge --json`` (``TreeDoc``).

Bounded whatever the input: a document is parsed once its last line has come; JSON nested deeper than
``MAX_DEPTH`` or a document bigger than ``MAX_DOCUMENT_MB`` is an error before anything is parsed; each
document is checked against the schema (``docschema``: the message names the value that is wrong) before it
is read; a tree's nodes are checked as they are merged (``TreeDoc.checked_nodes``, ``frame``, ``members``).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate, repeat
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from ..errors import TfnativeError
from .docschema import SchemaError, check_document, check_frame, check_scheduler, clean_string, kind_of
from .model import Document, EventFrame, frame_from_json
from .rankset import NO_DOCUMENTS, TREE_VERSION, Members

_PDSH_LINES = re.compile(r"(?m)^[A-Za-z0-9_.\-]+: ")  # pdsh's "host: " at a line's start
_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')  # a JSON string (never over a line's end)
_NOT_BRACKET = {c: None for c in range(128) if chr(c) not in "[]{}\n"}  # str.translate: ASCII but brackets out
_NOT_BRACKET_OR_QUOTE = {c: None for c in range(128) if chr(c) not in '[]{}"\n'}
_SPACE = re.compile(r"\s*")
_DELTA = {"{": 1, "[": 1, "}": -1, "]": -1, "\n": 0}

MAX_DEPTH = 64  # how deep a document's JSON may nest (schema v1 needs about 10): checked before it is parsed
MAX_DOCUMENT_MB = 64  # how big one document may be (a 100,000-frame stack is about 13 MiB)
TOO_BIG = ("a document bigger than %d MiB (merge reads 'tfnative stack --json' documents up to that size)"
           % MAX_DOCUMENT_MB)

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


# How a merged tree is read where one may come (``mergetree.iter_inputs`` passes ``TreeDoc``): None, a
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
        chunk = _without_pdsh(chunk)
        if not pending and depth == 0:
            _garbage_first(name, chunk, line, count)
        # The structure alone: strings out, then all but brackets and line ends.  The depth after each of them:
        brackets = _brackets(chunk)
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


def _without_pdsh(chunk: str) -> str:
    """``chunk`` without pdsh's ``host: `` prefixes; where every line begins with ``{`` (JSON Lines, as ``stack
    --json`` writes them), none can have one: the text as it is, without a pass of the pattern over it."""
    if chunk.startswith("{") and chunk.count("\n{") == chunk.count("\n", 0, len(chunk) - 1):
        return chunk
    return _PDSH_LINES.sub("", chunk)


def _brackets(text: str) -> str:
    """``text``'s brackets and line ends, its strings left out (and with them the brackets in them), as the
    pattern of a string (``_STRING``) leaves them.  Where ``text`` has no backslash (no escape), in fewer steps:
    every character but quotes, brackets and line ends out, then what is between two quotes, unless that pairs
    quotes across a line's end (no JSON string does: broken input, where the pattern says as the parser will)."""
    if "\\" not in text:
        parts = text.translate(_NOT_BRACKET_OR_QUOTE).split('"')
        if len(parts) % 2 and "\n" not in "".join(parts[1::2]):
            return "".join(parts[0::2])
    return _STRING.sub("", text).translate(_NOT_BRACKET)


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
    brackets = _brackets(text)
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
    (``trees``: merged trees too, as ``TreeDoc``; ``parsed``: ``text``'s one value, parsed already)."""
    dec = json.JSONDecoder()
    pos = 0
    counted, start = 0, first_line  # line ends counted up to ``counted``: each once, however many documents
    while True:
        match = _SPACE.match(text, pos)
        pos = match.end() if match else pos
        if pos >= len(text):
            return
        start += text.count("\n", counted, pos)
        counted = pos
        try:
            if parsed is not None:
                doc, pos, parsed = parsed, len(text), None
            else:
                doc, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise TfnativeError("%s: not JSON at line %d, column %d (%s)" % (
                name, start + text.count("\n", pos, e.pos), e.pos - text.rfind("\n", 0, e.pos), e.msg)) from None
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


def parse_documents(texts: Iterable[Tuple[str, str]]) -> List[Document]:
    """Every document in ``texts`` as a list (see ``iter_documents``); an empty input is an error."""
    docs = list(iter_documents(texts))
    if not docs:
        raise TfnativeError(NO_DOCUMENTS)
    return docs


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

    __slots__ = ("processes", "nodes", "where", "keyed", "_seen")

    def __init__(self, processes: List[Dict[str, Any]], nodes: List[List[Any]], where: str,
                 keyed: bool = True) -> None:
        self.processes, self.nodes, self.where = processes, nodes, where
        self.keyed = keyed  # False: a ``merge --json`` tree, its KEYs "" (the frame's text is the key)
        self._seen: Dict[str, Members] = {}  # MEMBERS read so far, by their text: nodes repeat them

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
                    frame_from_json(frame)
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
        tree = cls.from_json({"tfnative_tree": TREE_VERSION, "processes": d.get("processes"), "nodes": nodes},
                             where)
        tree.keyed = False
        return tree

    def checked_nodes(self) -> Iterator[Tuple[int, int, str, Any, int, Any]]:
        """(index, UP, KEY, MEMBERS, THREADS, FRAME) of each node, in order, its shape checked as it comes (the
        root first, each node after its parent; MEMBERS and FRAME as written: ``members`` and ``frame`` read
        them); raises TfnativeError naming the node that is wrong."""
        for i, n in enumerate(self.nodes):
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
                if up < 0 and frame is not None:
                    raise SchemaError("", "the root's FRAME is null")
            except SchemaError as e:
                raise self._error(i, e) from None
            yield i, up, key, members, threads, frame

    def frame(self, i: int, frame: Any) -> EventFrame:
        """Node ``i``'s FRAME, checked (``docschema.check_frame``) and read; raises TfnativeError."""
        try:
            if not isinstance(frame, dict):
                raise SchemaError("", "expected a FRAME, got %s" % kind_of(frame))
            try:
                check_frame(frame)
            except SchemaError as e:
                raise SchemaError("", "frame.%s" % e) from None
            return frame_from_json(frame)
        except (SchemaError, ValueError, KeyError, TypeError) as e:
            raise self._error(i, e) from None

    def members(self, i: int, members: Any) -> Members:
        """Node ``i``'s MEMBERS as a rank set (the same text read once per tree); raises TfnativeError."""
        text = _one(members)
        m = self._seen.get(text) if text is not None else None
        if m is None:
            m = Members()
            try:
                m.update_json(members)
            except (SchemaError, ValueError, KeyError, TypeError) as e:
                raise self._error(i, e) from None
            if text is not None and len(self._seen) < 256:
                self._seen[text] = m
        return m

    def _error(self, i: int, e: Exception) -> TfnativeError:
        if isinstance(e, SchemaError):
            return TfnativeError("%s: nodes[%d]%s%s" % (self.where, i, "." if e.where else ": ", e))
        return TfnativeError("%s: nodes[%d]: not a frame tfnative reads (%s)" % (self.where, i, e))


def iter_inputs(sources: Iterable[Tuple[str, Iterable[str]]]) -> Iterator[Any]:
    """``iter_document_chunks``, with merged trees beside the documents: a ``merge --tree`` or ``merge
    --json`` document is a ``TreeDoc``."""
    return inputs_of(sources, _load_tree)


def _load_tree(doc: Dict[str, Any], where: str) -> TreeDoc:
    return TreeDoc.from_json(doc, where) if "tfnative_tree" in doc else TreeDoc.from_merge_json(doc, where)
