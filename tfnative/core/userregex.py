"""A user's regular expression (``stack --match``, ``bazelrc --files``), compiled so that every way it can be
wrong is ``re.error``: Python's parser recurses once per nested group (thousands of ``(`` end in
``RecursionError``) and turns a huge repeat count into ``OverflowError``; the ``FutureWarning`` it prints for
a possible nested set is the user's pattern, not a line of ours."""

from __future__ import annotations

import re
import warnings
from typing import Pattern

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "brief", "compile_user", "nesting"]

MAX_LENGTH = 10000  # no command line needs a longer pattern; the parser's time and stack grow with it
MAX_DEPTH = 100  # groups in groups: the parser's recursion (its limit is the interpreter's, which callers change)


def compile_user(pattern: str) -> Pattern[str]:
    """``re.compile(pattern)``, or ``re.error`` saying in a few words why it is not one."""
    if len(pattern) > MAX_LENGTH:
        raise re.error("it is %d characters long (at most %d)" % (len(pattern), MAX_LENGTH))
    depth = nesting(pattern)
    if depth > MAX_DEPTH:
        raise re.error("its groups nest %d deep (at most %d)" % (depth, MAX_DEPTH))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return re.compile(pattern)
    except RecursionError:
        raise re.error("its groups nest too deeply") from None  # a limit lowered below MAX_DEPTH's needs
    except OverflowError as exc:
        raise re.error(str(exc)) from None


def brief(pattern: str, width: int = 60) -> str:
    """``pattern`` as an error line quotes it (``repr``), its middle cut where it is longer than ``width``."""
    if len(pattern) <= width:
        return repr(pattern)
    return "%r...%r (%d characters)" % (pattern[:width // 2], pattern[-(width // 2):], len(pattern))


def nesting(pattern: str) -> int:
    """How deep ``pattern``'s groups nest: ``(`` not escaped and not in a character class (where a ``]`` first
    is a literal), counted as the parser would recurse into it."""
    depth = deepest = 0
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth = max(0, depth - 1)
        i += 1
    return deepest
