"""``attach --break-throw [TYPE]``: the mangled type names its gdb condition compares, and bad values."""

from __future__ import annotations

import pytest

from tfnative.errors import TfnativeError
from tfnative.gdb.breakpoints import PYBIND_ERROR, Breakpoints, mangled_type, throw_condition

from ..utils import run_tfnative, script


@pytest.mark.parametrize("name,mangled", [
    ("std::out_of_range", "St12out_of_range"), ("::std::length_error", "St12length_error"),
    ("pybind11::error_already_set", PYBIND_ERROR), ("MyError", "7MyError"), ("my::ns::Error", "N2my2ns5ErrorE"),
    ("std::regex_constants::error", "NSt15regex_constants5errorE"),
])
def test_mangled_type_spells_the_type_info_name(name, mangled):
    assert mangled_type(name) == mangled


@pytest.mark.parametrize("name", ["std::vector<int>", "int*", "a b", "std::", "", "x::9y"])
def test_mangled_type_refuses_what_is_no_class_name(name):
    with pytest.raises(TfnativeError, match="give a class name such as std::out_of_range"):
        mangled_type(name)


def test_the_condition_and_the_location():
    assert throw_condition("std::out_of_range") == (
        '$_streq(*(char**)($rsi+8), "St12out_of_range") || $_streq(*(char**)($rsi+8), "*St12out_of_range")')
    assert throw_condition(None) == ('!$_streq(*(char**)($rsi+8), "N8pybind1117error_already_setE") && '
                                     '!$_streq(*(char**)($rsi+8), "*N8pybind1117error_already_setE")')
    bps = Breakpoints()
    text = bps.add_throw("std::out_of_range")
    loc = bps.locations[text]
    assert (text, loc.spec) == ("throw std::out_of_range", "__cxa_throw")
    assert Breakpoints._insert(loc, '"__cxa_throw"') == (
        '-break-insert -f -c "$_streq(*(char**)($rsi+8), \\"St12out_of_range\\") || '
        '$_streq(*(char**)($rsi+8), \\"*St12out_of_range\\")" "__cxa_throw"')


@pytest.mark.parametrize("value,message", [
    ("std::vector<int>", "tfnative: error: --break-throw std::vector<int>: give a class name such as "
                         "std::out_of_range (no templates, pointers or spaces)"),
    (script("kernel_throw.py"), "tfnative: error: --break-throw %s: that is a file, not a C++ type; give a type "
                                "(--break-throw std::out_of_range SCRIPT) or, for any type, --break-throw=any "
                                "SCRIPT" % script("kernel_throw.py")),
])
def test_a_bad_value_gets_one_line(value, message):
    """(An empty value is a usage error of every option, checked before.)"""
    r = run_tfnative(["attach", "--break-throw", value, script("kernel_throw.py")], timeout=60)
    assert r.returncode not in (0, 70) and r.stderr.strip() == message, r.stderr
