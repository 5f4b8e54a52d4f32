"""Every user string that goes into an MI command is one MI c-string: gdb's own unescaping gives it back.

pygdbmi's ``gdbescapes.unescape`` implements gdb's c-string rules (the ones gdb applies to MI
arguments); a string that could end the argument early (a quote, a backslash, a newline) must come
back whole, so no user text can add an MI command or option.
"""

import pytest
from pygdbmi import gdbescapes

from tfnative.gdb.mi import mi_quote

NASTY = ['plain', 'a"b', 'c:\\x', 'ends with \\', 'x\ny\tz', '\x01\x1f\x7f', 'é漢字', '"; -exec-run',
         '" -i "\\"', 'tensorflow::OpKernel::Compute(tensorflow::OpKernelContext*)', '/tmp/my dir/f.py:12', '']


@pytest.mark.parametrize("text", NASTY)
def test_round_trip(text):
    quoted = mi_quote(text)
    assert quoted.startswith('"') and quoted.endswith('"')
    assert gdbescapes.unescape(quoted[1:-1]) == text


@pytest.mark.parametrize("text", NASTY)
def test_one_token(text):
    """No unescaped quote inside, and no raw newline: the argument cannot end early or start a new command."""
    body = mi_quote(text)[1:-1]
    assert "\n" not in body and "\r" not in body
    i = 0
    while i < len(body):
        if body[i] == "\\":
            i += 2
            continue
        assert body[i] != '"'
        i += 1
