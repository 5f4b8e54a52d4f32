"""Eliding the middle of deep stacks, and how the text numbers the frames around the cut."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from tfnative.analysis.frames import mark_thread
from tfnative.core.elide import elide, elided_text
from tfnative.core.model import EventNativeFrame, EventPythonFrame, EventThread
from tfnative.output.render import thread_block


def _py(name, line):
    return EventPythonFrame(function=name, file="/src/app.py", line=line)


def test_short_stack_untouched():
    frames = [_py("f", i) for i in range(11)]
    assert elide(frames, inner=5, outer=5) == frames


def test_middle_elided_outermost_kept():
    frames = [_py("leaf", 1)] + [_py("recurse", 2)] * 100 + [_py("main", 3), _py("<module>", 4)]
    out = elide(frames, inner=3, outer=3)
    assert len(out) == 7
    assert [f.function for f in out[:3]] == ["leaf", "recurse", "recurse"]
    marker = out[3]
    assert marker.kind == "elided" and marker.count == len(frames) - 6 and marker.functions == ["recurse"]
    assert marker.to_json() == {"kind": "elided", "count": 97, "functions": ["recurse"], "function": "recurse",
                                "file": None, "line": None}
    assert [f.function for f in out[4:]] == ["recurse", "main", "<module>"]
    assert elided_text(marker) == "... 97 frames of recurse() ..."


def test_mixed_names_most_frequent_first():
    frames = [_py("a", 1)] * 2 + [_py("x", 1), _py("y", 1), _py("y", 1)] * 10 + [_py("z", 1)] * 2
    marker = elide(frames, inner=2, outer=2)[2]
    assert marker.functions == ["y", "x"]
    assert elided_text(marker) == "... 30 frames of y(), x() and others ..."


def test_text_numbers_frames_by_their_depth():
    frames = elide([_py("leaf", 1)] + [_py("recurse", 2)] * 50 + [_py("<module>", 9)], inner=2, outer=2)
    thread = EventThread(tid=1, name="t", frames=frames)
    mark_thread(thread)  # analysis marks the user's frames
    lines = thread_block(thread)
    assert lines[3].strip() == "... 48 frames of recurse() ..."
    assert lines[-1].startswith("> #51  [py] <module> at /src/app.py:9")  # the user's frame: ">" in the margin


def test_long_names_cut_in_the_middle():
    from tfnative.output.render import frame_line

    name = "std::_Function_handler<void (int, int), dnnl::impl::cpu::x64::" + "x" * 200 + ">::_M_invoke(int, int)"
    line = frame_line(3, EventNativeFrame(function=name, library="libtensorflow_cc.so.2", address="0x1"), name_width=80)
    assert "std::_Function_handler" in line and line.split(" in libtensorflow")[0].endswith("::_M_invoke(int, int)")
    assert len(line.split(" in libtensorflow")[0].split(None, 1)[1]) == 80


def test_source_line_under_the_frame_line():
    from tfnative.output.render import frame_line

    line = frame_line(0, EventNativeFrame(function="tfn_block", file="block.cc", line=4, source="    usleep(20000);",
                                     library="libblock_g.so", address="0x10"))
    first, second = line.split("\n")
    assert first.endswith("tfn_block at block.cc:4 in libblock_g.so [0x10]")
    assert second.strip() == "| usleep(20000);"


# The edges: where eliding starts, the default bounds, unnamed frames, at most three names.

def test_one_frame_more_than_inner_plus_outer_plus_one_is_elided():
    """``inner + outer + 1`` frames stay whole (cutting one frame would say nothing); one more is cut to two."""
    frames = [_py("f%d" % i, i) for i in range(7)]
    assert elide(frames, inner=3, outer=3) == frames
    out = elide(frames + [_py("g", 8)], inner=3, outer=3)
    assert [f.function for f in out] == ["f0", "f1", "f2", "f3, f4", "f5", "f6", "g"]
    assert out[3].count == 2 and out[3].functions == ["f3", "f4"]


def test_default_bounds_keep_500_frames_at_each_end():
    frames = [_py("f", i) for i in range(1001)]
    assert elide(frames) == frames
    longer = frames + [_py("g", 0)]
    out = elide(longer)
    assert len(out) == 1001 and out[500].kind == "elided" and out[500].count == 2
    assert out[:500] == longer[:500] and out[501:] == longer[-500:]


def test_unnamed_frames_are_counted_as_question_marks():
    frames = [_py("a", 1)] + [EventNativeFrame(function=None, address="0x1")] * 5 + [_py("b", 1)]
    marker = elide(frames, inner=1, outer=1)[1]
    assert marker.functions == ["??"] and elided_text(marker) == "... 5 frames of ??() ..."
    assert elided_text(type(marker)(count=3)) == "... 3 frames of ??() ..."  # a marker read without names


def test_at_most_three_names_most_frequent_first():
    middle = [_py("d", 1)] + [_py("c", 1)] * 2 + [_py("b", 1)] * 3 + [_py("a", 1)] * 4
    marker = elide([_py("in", 1)] + middle + [_py("out", 1)], inner=1, outer=1)[1]
    assert marker.functions == ["a", "b", "c"] and marker.count == 10
    assert elided_text(marker) == "... 10 frames of a(), b(), c() and others ..."


def test_names_that_carry_their_parameters_are_not_given_more():
    marker = elide([_py("x", 1)] + [_py("operator()(int)", 1)] * 3 + [_py("y", 1)], inner=1, outer=1)[1]
    assert elided_text(marker) == "... 3 frames of operator()(int) ..."


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.integers(0, 8), st.integers(0, 8))
def test_elided_stack_keeps_both_ends_and_counts_the_rest(n, inner, outer):
    frames = [_py("f%d" % (i % 5), i) for i in range(n)]
    out = elide(frames, inner=inner, outer=outer)
    if n <= inner + outer + 1:
        assert out == frames
        return
    assert out[:inner] == frames[:inner] and out[inner + 1:] == frames[n - outer:]
    marker = out[inner]
    assert marker.kind == "elided" and marker.count == n - inner - outer
    middle = Counter(f.function for f in frames[inner:n - outer])
    assert len(marker.functions) == min(3, len(middle)) and set(marker.functions) <= set(middle)
    counts = [middle[name] for name in marker.functions]
    assert counts == sorted(middle.values(), reverse=True)[:len(counts)]  # the commonest, commonest first
