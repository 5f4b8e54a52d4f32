"""merge reading its input in pieces (``iter_document_chunks``, what ``tfnative merge`` gives it from a file, a
pipe or a FIFO): the same documents and the same errors whichever line ends the pieces end at; the nesting
bound and the size bound, with the line they name; garbage said at once, before the rest is read."""

from __future__ import annotations

import itertools
import json
from typing import Iterator, List

import pytest

from tfnative.core import docread
from tfnative.errors import TfnativeError

from .test_merge import WAIT, doc, th

NEST = "nested more than 64 deep at line %d (a 'tfnative stack --json' document nests about 10 deep)"


def _lines(text: str) -> List[str]:
    return text.splitlines(keepends=True)


def _chunkings(text: str) -> Iterator[List[str]]:
    """Every way of cutting ``text`` at its line ends into pieces of whole lines."""
    lines = _lines(text)
    for cuts in itertools.product((False, True), repeat=len(lines) - 1):
        pieces, piece = [], lines[0]
        for cut, line in zip(cuts, lines[1:]):
            if cut:
                pieces.append(piece)
                piece = line
            else:
                piece += line
        yield pieces + [piece]


def _pids(pieces: List[str], name: str = "in") -> List[int]:
    return [d.pid for d in docread.iter_document_chunks([(name, pieces)])]


def _error(pieces, name: str = "in") -> str:
    with pytest.raises(TfnativeError) as e:
        for _ in docread.iter_document_chunks([(name, pieces)]):
            pass
    return str(e.value)


def _small(pid: int) -> str:
    return json.dumps({"tfnative": 1, "pid": pid})


# JSON Lines, a pretty document, two on one line, one whose strings hold brackets and a line's end escaped
MIXED = (_small(1) + "\n" + json.dumps(doc(2, [th(1, WAIT)]), indent=1) + "\n\n" + _small(3) + " " + _small(4)
         + "\n" + json.dumps({"tfnative": 1, "pid": 5, "note": "}]{[ \\n ]]"}, indent=2) + "\n" + _small(6))


def test_every_cut_gives_the_same_documents():
    assert len(_lines(MIXED)) > 12
    lines = _lines(MIXED)
    # all cuts of the first lines (the pretty document), then the rest as one piece or line by line
    for head in _chunkings("".join(lines[:9])):
        for tail in (["".join(lines[9:])], lines[9:]):
            assert _pids(head + tail) == [1, 2, 3, 4, 5, 6]
    assert _pids(lines) == _pids([MIXED]) == [1, 2, 3, 4, 5, 6]
    assert _pids([MIXED + "\n"]) == _pids([MIXED, "\n", "  \n"]) == [1, 2, 3, 4, 5, 6]
    assert _pids(["", MIXED, ""]) == [1, 2, 3, 4, 5, 6] and _pids([]) == _pids(["\n\n"]) == []


def test_every_cut_of_the_end_gives_the_same_documents():
    lines = _lines(MIXED)
    at = lines.index(_small(3) + " " + _small(4) + "\n")
    tail = "".join(lines[at:])
    assert _pids([tail]) == [3, 4, 5, 6]
    for pieces in _chunkings(tail):
        assert _pids(["".join(lines[:at])] + pieces) == [1, 2, 3, 4, 5, 6]


def test_a_piece_that_ends_inside_a_document_and_begins_the_next():
    a, b = json.dumps({"tfnative": 1, "pid": 1}, indent=1), json.dumps({"tfnative": 1, "pid": 2}, indent=1)
    a_lines, b_lines = _lines(a + "\n"), _lines(b + "\n")
    pieces = ["".join(a_lines[:2]), "".join(a_lines[2:] + b_lines[:2]), "".join(b_lines[2:])]
    assert _pids(pieces) == [1, 2]
    # a document ends and another begins on the same line, inside a piece
    assert _pids(['{"tfnative": 1,\n', '"pid": 1} {"tfnative": 1,\n', '"pid": 2}\n']) == [1, 2]
    assert _pids(['{"tfnative": 1,\n"pid": 1}\n{"tfnative": 1,\n', '"pid": 2}\n', _small(3) + "\n"]) == [1, 2, 3]


def test_errors_name_the_same_line_whichever_the_cuts():
    bad = _small(1) + "\n" + json.dumps({"tfnative": 1, "pid": 2}, indent=1) + "\n" + '{"tfnative": 1,\n "pid": x}\n'
    whole = _error([bad])
    assert whole == "in: not JSON at line 7, column 9 (Expecting value)"
    for pieces in _chunkings(bad):
        assert _error(pieces) == whole
    wrong = bad.replace("x}", '"7"}')
    assert _error([wrong]) == "in (document 3, line 6): pid: expected an integer, got a string"
    for pieces in _chunkings(wrong):
        assert _error(pieces) == "in (document 3, line 6): pid: expected an integer, got a string"
    other = _small(1) + "\n\n" + '{"other":\n 1}\n'
    for pieces in _chunkings(other):
        assert _error(pieces) == ("in (document 2, line 3): a document that is not tfnative schema 1 "
                                  "(from 'tfnative stack --json')")


def test_more_closed_than_opened():
    assert _error(['{"tfnative": 1,\n', '"pid": 1}}\n', _small(2) + "\n"]) == (
        "in: not JSON at line 2, column 10 (Expecting value)")
    assert _error(['{"tfnative": 1,\n', '"pid": 1}\n]\n']) == "in: not JSON at line 3, column 1 (Expecting value)"
    assert _error([_small(1) + "\n", "}\n"]) == "in: not JSON at line 2, column 1 (Expecting value)"


def _nested(depth: int) -> str:
    return '{"tfnative": 1, "pid": 1, "x": %s1%s}' % ("[" * (depth - 1), "]" * (depth - 1))


def test_the_nesting_bound_and_the_line_it_names():
    assert _pids([_nested(64) + "\n"]) == [1]  # the document itself is the first level
    assert _error([_nested(65) + "\n"]) == "in: JSON " + NEST % 1
    assert _error([_small(2) + "\n\n" + _nested(65) + "\n"]) == "in: JSON " + NEST % 3
    # over several lines and pieces: a line deeper than the bound, not the one the document begins on (the
    # deepest of the piece that went past it: line 66 is the 65th level, line 72 the 71st and deepest)
    deep = '{"tfnative": 1,\n "x":\n' + "[\n" * 70 + "]\n" * 70 + "}\n"
    assert _error([deep]) == "in: JSON " + NEST % 72
    assert _error(_lines(deep)) == "in: JSON " + NEST % 66
    assert _error([_small(1) + "\n" + "".join(_lines(deep)[:30]), "".join(_lines(deep)[30:])]) == (
        "in: JSON " + NEST % 73)
    assert _error([_small(1) + "\n" + "".join(_lines(deep)[:67]), "".join(_lines(deep)[67:])]) == (
        "in: JSON " + NEST % 68)
    # brackets inside strings are text, not structure (escaped quotes included)
    text = '{"tfnative": 1, "pid": 9, "note": "%s \\" %s"}\n' % ("[" * 100, "{" * 100)
    assert _pids([text]) == [9] and _pids([_small(1) + "\n", text]) == [1, 9]


def test_garbage_is_said_at_once_and_the_rest_not_read():
    def then_fail(first: str) -> Iterator[str]:
        yield first
        raise AssertionError("read on after garbage")

    assert _error(then_fail("hello world\n")) == "in: not JSON at line 1, column 1 (Expecting value)"
    assert _error(then_fail("\n\n  [[[ 1,\n")) == "in: not JSON at line 3, column 9 (Expecting value)"
    assert _error(then_fail("[" * 70 + "\n")) == "in: JSON " + NEST % 1
    assert _error(then_fail("\n \n" + "[" * 70 + "\n")) == "in: JSON " + NEST % 3
    assert _error(then_fail("[1, 2]\n")) == (
        "in: a document that is not tfnative schema 1 (from 'tfnative stack --json')")
    assert _error([_small(1) + "\n", "oops [[\n", "]]\n"]) == "in: not JSON at line 2, column 1 (Expecting value)"
    assert _error([_small(1) + "\n", "\n", "7\n"]) == (
        "in (document 2, line 3): a document that is not tfnative schema 1 (from 'tfnative stack --json')")
    # a document's own lines after its first are not garbage, however they begin
    assert _pids(['{"tfnative": 1,\n', '"pid": 4,\n', '"argv": [\n', '"]"]}\n']) == [4]


def test_the_size_bound():
    line = "  " + '"%s",' % ("x" * 4093) + "\n"  # 4 KiB a line
    piece = line * 256  # 1 MiB a piece, the same string each time: no memory spent on the test's side

    def pieces(count: int) -> Iterator[str]:
        yield '{"tfnative": 1, "pid": 1, "x": [\n'
        for _ in range(count):
            yield piece
        yield '"end"]}\n'

    assert _error(pieces(docread.MAX_DOCUMENT_MB + 1)) == "in: " + docread.TOO_BIG
    assert docread.TOO_BIG == ("a document bigger than 64 MiB (merge reads 'tfnative stack --json' documents up to "
                             "that size)")
    assert _pids(pieces(2)) == [1]


def test_pdsh_prefixes_in_pieces():
    pretty = json.dumps(doc(8, [th(1, WAIT)]), indent=1) + "\n" + _small(9) + "\n"
    prefixed = "".join("host-1: " + ln for ln in _lines(pretty))
    lines = _lines(prefixed)
    assert _pids(lines) == _pids([prefixed]) == [8, 9]
    for at in range(1, len(lines)):
        assert _pids(["".join(lines[:at]), "".join(lines[at:])]) == [8, 9]
    assert _pids(["h: " + _small(1) + "\n", "h2: {\n", 'h2: "tfnative": 1, "pid": 2}\n']) == [1, 2]


def test_sources_one_after_the_other():
    docs = docread.iter_document_chunks([("a", [_small(1) + "\n{"]), ("b", [_small(2)])])
    assert next(docs).pid == 1
    with pytest.raises(TfnativeError) as e:
        next(docs)
    assert str(e.value).startswith("a: not JSON at line 2")  # a document left open at its source's end
    assert [d.pid for d in docread.iter_documents([("a", _small(1)), ("b", "\n" + _small(2))])] == [1, 2]
    assert _error([_small(1) + "\n", _small(2) + "\n", '{"tfnative": 2}\n'], name="b") == (
        "b (document 3, line 3): a document that is not tfnative schema 1 (from 'tfnative stack --json')")


def test_the_first_line_alone_is_read_for_garbage():
    def then_fail(first: str) -> Iterator[str]:
        yield first
        raise AssertionError("read on after garbage")

    # the first line, not the whole piece: its error is the first line's
    assert _error(then_fail("[1,\n2]\n")) == "in: not JSON at line 1, column 4 (Expecting value)"
    # exactly as deep as allowed: read as JSON (and refused as no document), not refused for its depth
    assert _error(then_fail("[" * 64 + "1" + "]" * 64 + "\n")) == (
        "in: a document that is not tfnative schema 1 (from 'tfnative stack --json')")
    assert _error(then_fail("[" * 65 + "\n")) == "in: JSON " + NEST % 1


def test_a_number_too_long_to_convert():
    text = _small(1) + "\n\n" + '{"tfnative": 1, "pid": %s}\n' % ("7" * 5000)
    for pieces in ([text], _lines(text)):
        message = _error(pieces)
        assert message.startswith("in: not JSON at line 3 (Exceeds the limit (") and message.endswith(
            " digits) for integer string conversion)")


def test_the_structure_without_strings_is_the_patterns_whatever_the_text():
    """The brackets of a piece (its strings left out) are those the string pattern leaves, whether the piece has
    escapes (the pattern's way) or none (the faster way), broken JSON (a string across a line's end, a lone
    quote) included: the same documents, ended at the same lines, the same errors."""
    import random

    rng = random.Random(43)
    texts = [MIXED, '{"a": "b\n', '"abc\n{"\n', '{"a": "[x]", "b": ["{"]}\n', '{"x": "é[ü"}\n{"y": [1]}\n']
    for alphabet in ('{}[]""\n a:é,1', '{}[]"\\\n a:é,1'):
        texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16))) for _ in range(20000)]
    for text in texts:
        assert docread._brackets(text) == docread._STRING.sub("", text).translate(docread._NOT_BRACKET), text


def test_json_lines_with_a_pdsh_prefix_on_one_line_only():
    """A piece of JSON Lines whose lines begin with ``{`` is taken as it is; one line with a ``host: `` prefix
    among them is read without it, as pdsh prints it."""
    lines = [_small(1) + "\n", "node7: " + _small(2) + "\n", _small(3) + "\n"]
    assert _pids(["".join(lines)]) == [1, 2, 3]
    assert _pids(["".join(lines[::2])]) == [1, 3]
