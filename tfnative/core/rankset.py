"""A set of member labels as LLNL STAT keeps rank sets (the model of a merged tree's members): ``HEAD:N`` labels
as ranges of N per HEAD (``rank:0-7,9``), the other labels as they are.  ``compress`` writes any labels so; a
label's tail is a rank only where it is written as ``str(int)`` writes it (``7``, not ``07`` nor a non-ASCII
digit), so that no label is ever written as another one.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Iterator, List, Optional

from .docschema import SchemaError, clean_string, kind_of

_MAX_DIGITS = 18  # a rank of more digits is not a rank
TREE_VERSION = 1  # of the merged tree ``merge --tree`` writes and ``merge`` reads again: {"tfnative_tree": 1, ...}
NO_DOCUMENTS = "no documents in the input (expected 'tfnative stack --json' output)"


def _rank(tail: str) -> Optional[int]:
    """The integer a label's tail is, written as ``str(int)`` writes it (``7``, not ``07``); None otherwise."""
    if tail.isdigit() and tail.isascii() and len(tail) <= _MAX_DIGITS and (tail[0] != "0" or tail == "0"):
        return int(tail)
    return None


class Members:
    """A set of member labels, kept as STAT keeps rank sets: the ``HEAD:N`` labels as ranges of N per HEAD
    (``rank:0-7,9``), the others as they are, and (while documents are read) document numbers, named at the
    end.  Its size grows with the ranges, not with the labels in them."""

    __slots__ = ("groups", "labels", "docs", "_sorted")

    def __init__(self) -> None:
        self.groups: Dict[str, List[int]] = {}  # HEAD: [start, end, start, end, ...] (ends inclusive)
        self.labels: Dict[str, None] = {}
        self.docs: Dict[int, None] = {}
        self._sorted = True

    def add_label(self, label: str) -> None:
        head, _, tail = label.rpartition(":")
        n = _rank(tail) if head else None
        if n is None:
            self.labels[label] = None
        else:
            self.add_range(head, n, n)

    def add_range(self, head: str, start: int, end: int) -> None:
        """Add ``HEAD:start`` to ``HEAD:end``: joined to the last range where it touches it (ranks arrive in
        order, mostly), else a range of its own, put in order later (``_normalize``)."""
        spans = self.groups.get(head)
        if spans is None:
            self.groups[head] = [start, end]
        elif spans[-2] <= start <= spans[-1] + 1:
            if end > spans[-1]:
                spans[-1] = end
        else:
            if start < spans[-2]:
                self._sorted = False
            spans.append(start)
            spans.append(end)
            if not self._sorted and len(spans) > 512:  # out of order: kept as few as they can be
                self._normalize()

    def update(self, other: Members) -> None:
        for head, spans in other.groups.items():
            for i in range(0, len(spans), 2):
                self.add_range(head, spans[i], spans[i + 1])
        self.labels.update(other.labels)
        self.docs.update(other.docs)

    def update_json(self, value: Any) -> None:
        """Add MEMBERS as ``merge --tree`` writes them; raises SchemaError (``members[1]: ...``)."""
        if not isinstance(value, list):
            raise SchemaError("members", "expected a list, got %s" % kind_of(value))
        for i, item in enumerate(value):
            if isinstance(item, str):
                self.add_label(item if item.isascii() else clean_string(item))
                continue
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], str)):
                raise SchemaError("members[%d]" % i, "expected a label or [PREFIX, RANGES], got %s" % kind_of(item))
            head = item[0] if item[0].isascii() else clean_string(item[0])
            for part in item[1].split(","):
                a, dash, b = part.partition("-")
                start, end = _rank(a), _rank(b) if dash else _rank(a)
                if start is None or end is None or end < start:
                    raise SchemaError("members[%d]" % i, "ranges like \"0-7,9\" expected, got %s"
                                      % json.dumps(item[1][:80]))
                self.add_range(head, start, end)

    def _normalize(self) -> None:
        for head, spans in self.groups.items():
            pairs = sorted(zip(spans[::2], spans[1::2]))
            out: List[int] = []
            for start, end in pairs:
                if out and start <= out[-1] + 1:
                    if end > out[-1]:
                        out[-1] = end
                else:
                    out += [start, end]
            self.groups[head] = out
        self._sorted = True

    def __len__(self) -> int:
        self._normalize() if not self._sorted else None
        return len(self.labels) + len(self.docs) + sum(
            spans[i + 1] - spans[i] + 1 for spans in self.groups.values() for i in range(0, len(spans), 2))

    def __iter__(self) -> Iterator[str]:
        """Every label, one at a time (ranges spelled out: ``merge --json`` lists them)."""
        if not self._sorted:
            self._normalize()
        for head in sorted(self.groups):
            spans = self.groups[head]
            for i in range(0, len(spans), 2):
                for n in range(spans[i], spans[i + 1] + 1):
                    yield "%s:%d" % (head, n)
        yield from sorted(self.labels)

    def ranges(self, head: str) -> str:
        """``0-7,9``: HEAD's ranges as STAT writes them."""
        spans = self.groups[head]
        return ",".join(str(spans[i]) if spans[i] == spans[i + 1] else "%d-%d" % (spans[i], spans[i + 1])
                        for i in range(0, len(spans), 2))

    def text(self) -> str:
        """``rank:0-7,9 host:x``: as ``merge.compress`` writes the same labels."""
        if not self._sorted:
            self._normalize()
        return " ".join(["%s:%s" % (head, self.ranges(head)) for head in sorted(self.groups)] + sorted(self.labels))

    def to_json(self) -> List[Any]:
        if not self._sorted:
            self._normalize()
        return [[head, self.ranges(head)] for head in sorted(self.groups)] + sorted(self.labels)

    def name(self, names: List[str]) -> None:
        """Document numbers to the names ``names`` gives them."""
        for i in self.docs:
            self.add_label(names[i])
        self.docs = {}


def compress(labels: Iterable[str]) -> str:
    """``worker:0-6,8``: labels with the same prefix and integer suffixes as ranges (``Members.text``; a
    ``Members``: its own text)."""
    if isinstance(labels, Members):
        return labels.text()
    m = Members()
    for label in labels:
        m.add_label(label)
    return m.text()
