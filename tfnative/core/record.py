"""``Record``: a dataclass's ``__repr__`` and ``__eq__`` written once, for the dataclasses every command imports.

``@dataclass`` writes each class's ``__init__``, ``__repr__`` and ``__eq__`` as source and compiles it when the
module is imported (``exec``, once per method and class); on Python 3.11 that is 0.1 to 0.2 ms a method.  The
model's classes (threads, frames, the capture, the event, the document) and the options are imported by every
command, and the split of the model into capture and event types (issue #43) added five of them: ``stack``
started 5-7 ms slower.  A class declared ``@dataclass(repr=False, eq=False)`` over ``Record`` keeps its
generated ``__init__`` and gets these two from here, with the behaviour ``@dataclass`` gives them:

* ``repr``: ``ClassName(field=value, ...)`` over the fields whose ``repr`` is true, in order, a recursive
  reference shown as ``...``;
* ``==``: equal where the other is of the same class and the fields whose ``compare`` is true are equal, in order
  (``NotImplemented`` for another class); and so, as a ``@dataclass`` with ``eq`` is, unhashable.

A frozen one (``@dataclass(frozen=True, repr=False, eq=False)``) over ``FrozenRecord`` gets its ``hash`` here too:
of the fields whose ``hash`` is true, or unset and ``compare`` true, as ``@dataclass`` hashes a frozen class.
``tests/unit/test_record.py`` checks all three against ``@dataclass``'s own, on generated classes and values.
"""

from __future__ import annotations

import dataclasses
import reprlib
from operator import attrgetter
from typing import Any, Callable, ClassVar, Dict, Tuple

_Getter = Callable[[Any], Tuple[Any, ...]]


def _getter(names: Tuple[str, ...]) -> _Getter:
    """A function of an object: the tuple of its attributes ``names`` (as ``@dataclass``'s ``__eq__`` builds)."""
    if not names:
        return lambda _obj: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return attrgetter(*names)


class Record:
    """The base of the model's dataclasses: ``__repr__`` and ``__eq__`` as ``@dataclass`` writes them (the
    module)."""

    __slots__ = ()
    # per class, made once from its fields: the names ``repr`` shows, the getters of what ``==`` compares and
    # of what a frozen one's ``hash`` hashes
    _shapes: ClassVar[Dict[type, Tuple[Tuple[str, ...], _Getter, _Getter]]] = {}

    @classmethod
    def _shape(cls) -> Tuple[Tuple[str, ...], _Getter, _Getter]:
        got = Record._shapes.get(cls)
        if got is None:
            fields = dataclasses.fields(cls)  # type: ignore[arg-type]
            got = (tuple(f.name for f in fields if f.repr),
                   _getter(tuple(f.name for f in fields if f.compare)),
                   _getter(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))))
            Record._shapes[cls] = got
        return got

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = self._shape()[0]
        return "%s(%s)" % (type(self).__qualname__,
                           ", ".join("%s=%r" % (name, getattr(self, name)) for name in shown))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        compared = self._shape()[1]
        return compared(self) == compared(other)

    __hash__ = None  # type: ignore[assignment]  # (as @dataclass makes a class with __eq__, not frozen)


class FrozenRecord(Record):
    """The base of frozen dataclasses: ``Record``'s, and ``hash`` as ``@dataclass`` writes it (the module)."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]  # (Record, as @dataclass with eq, is unhashable)
        return hash(self._shape()[2](self))
