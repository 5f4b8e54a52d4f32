"""Eliding the middle of deep stacks, and how the text numbers the frames around the cut."""

from tfnative.core.model import NativeFrame, PythonFrame, Thread
from tfnative.output.elide import elide, elided_text
from tfnative.output.render import thread_block


def _py(name, line):
    return PythonFrame(function=name, file="/src/app.py", line=line)


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
    lines = thread_block(Thread(tid=1, name="t", frames=frames))
    assert lines[3].strip() == "... 48 frames of recurse() ..."
    assert lines[-1].startswith("> #51  [py] <module> at /src/app.py:9")  # the user's frame: ">" in the margin


def test_long_names_cut_in_the_middle():
    from tfnative.output.render import frame_line

    name = "std::_Function_handler<void (int, int), dnnl::impl::cpu::x64::" + "x" * 200 + ">::_M_invoke(int, int)"
    line = frame_line(3, NativeFrame(function=name, library="libtensorflow_cc.so.2", address="0x1"), name_width=80)
    assert "std::_Function_handler" in line and line.split(" in libtensorflow")[0].endswith("::_M_invoke(int, int)")
    assert len(line.split(" in libtensorflow")[0].split(None, 1)[1]) == 80


def test_source_line_under_the_frame_line():
    from tfnative.output.render import frame_line

    line = frame_line(0, NativeFrame(function="tfn_block", file="block.cc", line=4, source="    usleep(20000);",
                                     library="libblock_g.so", address="0x10"))
    first, second = line.split("\n")
    assert first.endswith("tfn_block at block.cc:4 in libblock_g.so [0x10]")
    assert second.strip() == "| usleep(20000);"
