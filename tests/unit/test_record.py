"""``core/record.Record`` gives the model's dataclasses the ``repr`` and ``==`` that ``@dataclass`` writes: checked
against ``@dataclass``'s own on generated classes (fields shown or not, compared or not, slots or not, a
subclass adding fields) and values, and on the model's classes themselves."""

from dataclasses import field, make_dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfnative.core.framemodel import EventNativeFrame, NativeFrame
from tfnative.core.model import EventThread, Thread
from tfnative.core.record import FrozenRecord, Record

VALUES = st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=3), st.lists(st.integers(0, 2), max_size=2))
FIELDS = st.lists(st.tuples(st.booleans(), st.booleans()), max_size=6)  # (repr, compare) per field


def pair(spec, slots, extra=()):
    """The same class twice: by ``@dataclass`` alone, and over ``Record`` (``repr=False, eq=False``); with
    ``extra``, each a subclass adding those fields."""
    fields = [("f%d" % i, object, field(default=None, repr=r, compare=c)) for i, (r, c) in enumerate(spec)]
    plain = make_dataclass("C", fields, slots=slots)
    ours = make_dataclass("C", fields, bases=(Record,), slots=slots, repr=False, eq=False)
    if extra:
        more = [("g%d" % i, object, field(default=None, repr=r, compare=c)) for i, (r, c) in enumerate(extra)]
        plain = make_dataclass("C", more, bases=(plain,), slots=slots)
        ours = make_dataclass("C", more, bases=(ours,), slots=slots, repr=False, eq=False)
    return plain, ours


@given(FIELDS, FIELDS, st.booleans(), st.data())
def test_repr_and_eq_are_dataclass_own(spec, extra, slots, data):
    plain, ours = pair(spec, slots, extra)
    count = len(spec) + len(extra)
    first = data.draw(st.lists(VALUES, min_size=count, max_size=count))
    second = data.draw(st.lists(st.one_of(st.sampled_from(first or [None]), VALUES), min_size=count, max_size=count))
    a1, a2, b1, b2 = plain(*first), plain(*second), ours(*first), ours(*second)
    assert repr(b1) == repr(a1) and repr(b2) == repr(a2)
    assert (b1 == b2) == (a1 == a2) and (b1 != b2) == (a1 != a2)
    assert b1 == ours(*first) and not (b1 == a1) and b1 != 5
    with pytest.raises(TypeError):
        hash(b1)


@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.sampled_from([None, True, False])), max_size=5),
       st.data())
def test_a_frozen_record_hashes_as_dataclass_does(spec, data):
    """Frozen, with each field's repr, compare and hash: the same repr, ==, hash, and no assignment."""
    fields = [("f%d" % i, object, field(default=None, repr=r, compare=c, hash=h)) for i, (r, c, h) in enumerate(spec)]
    plain = make_dataclass("F", fields, frozen=True, slots=True)
    ours = make_dataclass("F", fields, bases=(FrozenRecord,), frozen=True, slots=True, repr=False, eq=False)
    hashable = st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=3), st.tuples(st.integers(0, 2)))
    first = data.draw(st.lists(hashable, min_size=len(spec), max_size=len(spec)))
    second = data.draw(st.lists(st.one_of(st.sampled_from(first or [None]), hashable), min_size=len(spec),
                                max_size=len(spec)))
    a1, a2, b1, b2 = plain(*first), plain(*second), ours(*first), ours(*second)
    assert repr(b1) == repr(a1) and hash(b1) == hash(a1) and hash(b2) == hash(a2)
    assert (b1 == b2) == (a1 == a2) and {b1, ours(*first)} == {b1}
    if spec:
        with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError
            b1.f0 = 1


def test_a_recursive_reference_is_shown_as_dots():
    plain, ours = pair([(True, True)], slots=False)
    a, b = plain(), ours()
    a.f0, b.f0 = [a], [b]
    assert repr(b) == repr(a) == "C(f0=[...])"


def test_the_model_classes_compare_and_show_as_before():
    frame = NativeFrame(function="f", file="x.cc", line=3, library="libx.so")
    assert repr(frame).startswith("NativeFrame(function='f', file='x.cc', line=3, library='libx.so', ")
    assert frame == NativeFrame(function="f", file="x.cc", line=3, library="libx.so") != NativeFrame(function="g")
    analysed = EventNativeFrame(function="f", file="x.cc", line=3, library="libx.so", glue=True)
    assert analysed == EventNativeFrame(function="f", file="x.cc", line=3, library="libx.so")  # glue: not compared
    assert analysed != frame and "glue" not in repr(analysed)  # another class; glue is not shown
    assert Thread(tid=1, name="main") == Thread(tid=1, name="main") != EventThread(tid=1, name="main")
    assert Thread(tid=1, frames=[frame]) != Thread(tid=1, frames=[NativeFrame(function="g")])
    with pytest.raises(TypeError):
        hash(Thread(tid=1, name="main"))
