"""Fitting text to a terminal (``output/fit.py``) at its edges: text exactly as wide as the width and one wider,
the widths too narrow for an ellipsis, the default width of a terminal that gives none, and the C++ names'
brackets, operators and ABI namespaces; properties over generated text where one fits."""

import fcntl
import io
import os
import struct
import termios

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfnative.output import fit

text = st.text(alphabet="ab:/<>(){} .-_xyz", max_size=60)


@settings(max_examples=300, deadline=None)
@given(text, st.integers(0, 70))
def test_cut_middle_keeps_both_ends_within_the_width(s, width):
    out = fit.cut_middle(s, width)
    if len(s) <= width:
        assert out == s
    elif width <= 3:
        assert out == s[:width]
    else:
        head = width // 3
        assert len(out) == width and out[:head] == s[:head] and out[head:head + 3] == "..."
        assert s.endswith(out[head + 3:]) and len(out) - head - 3 == width - head - 3


def test_cut_middle_exact_values():
    assert fit.cut_middle("abcdefghij", 10) == "abcdefghij"  # exactly the width: whole
    assert fit.cut_middle("abcdefghij", 9) == "abc...hij"
    assert fit.cut_middle("abcdefghij", 4) == "a..."
    assert fit.cut_middle("abcdefghij", 3) == "abc" and fit.cut_middle("abcdefghij", 0) == ""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["ns", "a<b::c>", "f(x::y)", "{l::m}", "Cls", "x"]), min_size=1, max_size=8),
       st.integers(4, 60))
def test_cut_name_within_the_width(parts, width):
    name = "::".join(parts)
    out = fit.cut_name(name, width)
    assert len(out) <= width and (out == name) == (len(name) <= width)


def test_cut_name_drops_leading_namespaces_at_the_top_level_only():
    name = "a::b::C::m()"
    assert fit.cut_name(name, 12) == name  # exactly the width
    assert fit.cut_name(name, 11) == "...C::m()"
    assert fit.cut_name(name, 9) == "...C::m()"  # "...C::m()" is exactly 9
    assert fit.cut_name(name, 8) == fit.cut_middle(name, 8)  # the method alone says too little: the middle goes
    # "::" inside <...>, (...) and {...} is no place to cut; the class before the method stays
    assert fit.cut_name("ns::A<x::y>::f(a::b)", 19) == "...A<x::y>::f(a::b)"
    assert fit.cut_name("ns::A<x::y>::f(a::b)", 18) == fit.cut_middle("ns::A<x::y>::f(a::b)", 18)
    assert fit.cut_name("ns::{l::m}::f()", 14) == "...{l::m}::f()"
    assert fit.cut_name("ns::(x::y)::f()", 14) == "...(x::y)::f()"


def test_cut_path_drops_leading_directories():
    path = "/a/bb/ccc/d.py"
    assert fit.cut_path(path, 14) == path
    assert fit.cut_path(path, 13) == ".../ccc/d.py"
    assert fit.cut_path(path, 12) == ".../ccc/d.py"  # exactly 12
    assert fit.cut_path(path, 11) == ".../d.py"
    assert fit.cut_path(path, 7) == fit.cut_middle(path, 7)  # not even the file name fits
    assert fit.cut_path("a/b/c.py", 7) == "a/...py"
    assert fit.cut_path("relative/dir/file.py", 14) == ".../file.py"
    assert fit.cut_path("/toolong_filename.py", 10) == fit.cut_middle("/toolong_filename.py", 10)


def test_cut_line_keeps_its_mark_where_it_can():
    line = "x" * 40 + "  <-- op A"  # 50 long; the mark 10
    assert fit.cut_line(line, 50, keep_end="  <-- op A") == line  # exactly the width
    out = fit.cut_line(line, 49, keep_end="  <-- op A")
    assert out == fit.cut_middle("x" * 40, 39) + "  <-- op A" and len(out) == 49
    assert fit.cut_line(line, 20, keep_end="  <-- op A").endswith("  <-- op A")  # the mark is half the width
    assert fit.cut_line(line, 19, keep_end="  <-- op A") == "x" * 16 + "..."  # more than half: cut at the end
    assert fit.cut_line(line, 20, keep_end="  <-- op B") == "x" * 17 + "..."  # not its mark
    assert fit.cut_line(line, 20) == "x" * 17 + "..."
    assert fit.cut_line(line, None, keep_end="  <-- op A") == line


@pytest.mark.parametrize("name,compact", [
    ("std::map<int, int>::operator[](unsigned long)", "std::map<...>::operator[](unsigned long)"),
    ("Foo::operator()(int) const", "Foo::operator()(int) const"),
    ("Foo::operator<<(std::ostream&)", "Foo::operator<<(std::ostream&)"),
    ("Foo::operator<< <int>(int)", "Foo::operator<< <...>(int)"),
    ("Foo::operator->() const", "Foo::operator->() const"),
    ("Foo<int>::operator new(unsigned long)", "Foo<...>::operator new(unsigned long)"),
    ("myoperator<int>(int)", "myoperator<...>(int)"),  # "operator" inside a name is the name
    ("my_operator<int>(int)", "my_operator<...>(int)"),
    ("A<B<int>, C<int> >::f(int)", "A<...>::f(int)"),
    ("A<decltype(x->y)>::f()", "A<...>::f()"),  # "->" inside the brackets is no closing bracket
    ("f(a->b)", "f(a->b)"),
    ("std::__1::vector<int>::size()", "std::vector<...>::size()"),
    ("std::__cxx11::basic_string<char>::c_str()", "std::basic_string<...>::c_str()"),
    ("absl::lts_20250814::Mutex::Lock()", "absl::Mutex::Lock()"),
    ("x__1::y()", "x__1::y()"),  # only a whole ABI namespace goes
    ("A<int>>::f()", "A<int>>::f()"),  # unbalanced: as it was
    ("A<<int>::f()", "A<<int>::f()"),
    ("a > b", "a > b"),
])
def test_compact_cpp_brackets_operators_and_abi_namespaces(name, compact):
    assert fit.compact_cpp(name) == compact


@pytest.mark.parametrize("name,compact", [
    ("f(int, char const*) const", "f(...) const"),
    ("f()", "f()"),  # nothing to drop
    ("f(x)", "f(...)"),
    ("(anonymous namespace)::g(int)", "(anonymous namespace)::g(...)"),
    ("(anonymous namespace)::g", "(anonymous namespace)::g"),  # the namespace's parentheses are not parameters
    ("h(int)::{lambda(long)#1}::operator()(long) const", "h(int)::{lambda(long)#1}::operator()(...) const"),
    ("f(a(b))", "f(...)"),
    ("f(a", "f(a"),
    ("k", "k"),
])
def test_compact_cpp_drops_the_last_parameters(name, compact):
    assert fit.compact_cpp(name, params=True) == compact


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="abcdefgh ", min_size=0, max_size=30), min_size=1, max_size=8).filter(
    lambda ps: any(p.strip() for p in ps)),
       st.integers(1, 60), st.sampled_from(["; ", " "]), st.sampled_from(["", "  "]))
def test_wrap_keeps_every_word_within_the_width(pieces, width, sep, lead):
    s = lead + sep.join(pieces)
    lines = fit.wrap(s, width, indent="    ", sep=sep)
    limit = max(width, 14)
    if len(s) <= width:
        assert lines == [s]
        return
    assert all(len(ln) <= limit for ln in lines)
    assert "".join("".join(ln.split()) for ln in lines) == "".join(s.replace(";", ";").split())
    assert all(ln.startswith("    ") for ln in lines[1:]) and lines[0].startswith(lead)


def test_wrap_exact_width_and_its_floor():
    assert fit.wrap("aaaaaaaaaa; bbbbbbbb", 20) == ["aaaaaaaaaa; bbbbbbbb"]  # exactly the width: one line
    assert fit.wrap("aaaaaaaaaa; bbbbbbbb", 19) == ["aaaaaaaaaa;", "    bbbbbbbb"]
    assert fit.wrap("aaaaaaaaaa; bbbbbbbb", None) == ["aaaaaaaaaa; bbbbbbbb"]
    # the width is never below the indent plus 10 (14 here): a line of 14 after the cut
    assert fit.wrap("aaaaaaa; bbbbbbbbbbbb", 5) == ["aaaaaaa;", "    bbbbbbbbbb", "    bb"]
    assert fit.wrap("aaaaaaa; bbbbbbb", 5) == fit.wrap("aaaaaaa; bbbbbbb", 14) == ["aaaaaaa;", "    bbbbbbb"]
    assert fit.wrap("aaaaaaa; bbbbbbb", 16) == ["aaaaaaa; bbbbbbb"]
    assert fit.wrap("aaaaaaaaaaaaa; b", 14) == ["aaaaaaaaaaaaa;", "    b"]  # 14 and 5 long
    # an empty piece (two separators in a row) adds nothing but its separator
    assert fit.wrap("aaaaaaaaaa; ; bbbbbbbb", 14) == ["aaaaaaaaaa; ;", "    bbbbbbbb"]
    assert fit.wrap("  aaaaaaaaaa; bbbbbbbb", 14) == ["  aaaaaaaaaa;", "    bbbbbbbb"]  # the first line's spaces stay
    # a piece longer than a line is broken between its words, then inside a word
    assert fit.wrap("x; aaa bbb ccc ddd eee", 14) == ["x;", "    aaa bbb", "    ccc ddd", "    eee"]
    assert fit.wrap("x; " + "a" * 30, 14) == ["x;", "    aaaaaaaaaa", "    aaaaaaaaaa", "    aaaaaaaaaa"]
    assert fit.wrap("aaaaaaaaaaaa bbbbbbbbbbbb", 14, sep=" ") == ["aaaaaaaaaaaa", "    bbbbbbbbbb", "    bb"]


class _Tty(io.StringIO):
    """A stream that says it is a terminal but has no descriptor (no size to ask for)."""

    def isatty(self):
        return True


def _pty(cols: int):
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    return master, slave


def test_terminal_width_default_floor_and_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert fit.terminal_width(_Tty()) == 80  # a terminal whose size cannot be read: 80
    closed = io.StringIO()
    closed.close()
    assert fit.terminal_width(closed) is None
    assert fit.terminal_width(object()) is None  # no isatty at all
    for cols, want in ((0, 80), (39, 40), (40, 40), (41, 41), (200, 200)):
        master, slave = _pty(cols)
        try:
            with os.fdopen(os.dup(slave), "w") as tty:
                assert fit.terminal_width(tty) == want, cols
                for columns, with_env in (("0", want), ("-3", want), ("abc", want), ("", want), ("1", 40),
                                          ("41", 41), ("120", 120)):
                    monkeypatch.setenv("COLUMNS", columns)
                    assert fit.terminal_width(tty) == with_env, (cols, columns)
                monkeypatch.delenv("COLUMNS")
        finally:
            os.close(master)
            os.close(slave)


def test_more_edges_of_names_and_paths():
    # capital X is no bracket; a template's nesting is counted, not just noted
    assert fit.cut_name("Xa::Xb::Xc::m()", 12) == "...Xc::m()"
    assert fit.cut_name("ns::A<B<c>>::f()", 15) == "...A<B<c>>::f()"
    # a doubled slash: the cut is at the slash after it
    assert fit.cut_path("/aaaa//b/cc.py", 11) == ".../b/cc.py"
    assert fit.cut_path("/aaaaaaa//cc.py", 9) == ".../cc.py"
    assert fit.cut_line("x" * 50, 50) == "x" * 50  # exactly the width, no mark
    assert fit.cut_line("abcdef", 3) == "..."  # no room for any of the line
    assert fit.cut_line("a" * 30 + "XXXX", 20) == "a" * 17 + "..."  # no mark given: none kept


@pytest.mark.parametrize("name,compact,params", [
    ("operator<<(Foo<int> const&) const", "operator<<(Foo<...> const&) const", "operator<<(...) const"),
    ("bool operator<(A<int> const&)", "bool operator<(A<...> const&)", "bool operator<(...)"),
    ("Foo::operator()<int>(int)", "Foo::operator()<...>(int)", "Foo::operator()<...>(...)"),
    ("Foo::operator<", "Foo::operator<", "Foo::operator<"),  # an operator at the very end
    ("Xf(int)", "Xf(int)", "Xf(...)"),
    ("f(int)::{lambda()#1}", "f(int)::{lambda()#1}", "f(int)::{lambda()#1}"),  # a qualifier's parameters stay
    ("(int, long)", "(int, long)", "(...)"),  # a group at the very start
])
def test_compact_cpp_more_operators_and_groups(name, compact, params):
    assert fit.compact_cpp(name) == compact
    assert fit.compact_cpp(name, params=True) == params


def test_wrap_a_line_exactly_as_wide_and_spaces_that_wrap_away():
    assert fit.wrap("aaaa; bbbbbbb; cc", 14) == ["aaaa; bbbbbbb;", "    cc"]  # the first line is 14
    assert fit.wrap("a" * 13 + "; " + " " * 16, 14) == ["a" * 13 + ";"]  # trailing spaces: no line of their own
