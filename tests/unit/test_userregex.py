"""A user's regular expression: every way it can be wrong is ``re.error`` with a few words, never another
exception (``tfnative/core/userregex.py``, used by ``stack --match`` and ``bazelrc --files``)."""

from __future__ import annotations

import re
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfnative.core.userregex import MAX_DEPTH, MAX_LENGTH, brief, compile_user, nesting
from tfnative.errors import TfnativeError
from tfnative.snapshot import many


@pytest.mark.parametrize("pattern,words", [
    ("(" * 5000 + ")" * 5000, "nest 5000 deep (at most 100)"),
    ("$(" * 4000, "nest 4000 deep"),
    ("a{99999999999999}", "repetition number is too large"),
    ("[", "unterminated character set"),
    ("x" * (MAX_LENGTH + 1), "at most %d" % MAX_LENGTH),
])
def test_every_bad_pattern_is_re_error(pattern, words):
    with pytest.raises(re.error, match=re.escape(words)):
        compile_user(pattern)


def test_nesting_counts_groups_not_escaped_parens_nor_those_in_a_class():
    assert nesting("a(b(c)d)(e)") == 2
    assert nesting(r"\(\(\(") == 0
    assert nesting("[(((]") == 0 and nesting("[]((]") == 0 and nesting("[^]((]") == 0
    assert nesting(r"[\](](") == 1
    assert nesting("(" * MAX_DEPTH) == MAX_DEPTH


def test_a_pattern_as_deep_as_the_bound_compiles_under_the_default_recursion_limit():
    import sys
    pattern = "(" * MAX_DEPTH + "x" + ")" * MAX_DEPTH
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # the interpreter's default
    try:
        assert compile_user(pattern).search("x")
    finally:
        sys.setrecursionlimit(old)


def test_a_good_pattern_compiles_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compile_user("[[a]").search("[a")  # Python warns of a possible nested set: not our line


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="()[]{}|*+?\\$^.,0123456789aP<>=!:#-", max_size=200))
def test_compile_user_raises_nothing_but_re_error(pattern):
    try:
        compile_user(pattern)
    except re.error:
        pass


def test_brief_keeps_short_patterns_and_cuts_long_ones():
    assert brief("ab") == "'ab'"
    long = "a" * 50 + "Z" * 50
    assert brief(long) == "'%s'...'%s' (100 characters)" % ("a" * 30, "Z" * 30)


def test_match_says_a_bad_pattern_in_one_short_line():
    with pytest.raises(TfnativeError) as bad:
        many.matching("(" * 20000)
    message = str(bad.value)
    assert "\n" not in message and len(message) < 200 and "--match" in message
