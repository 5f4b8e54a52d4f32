"""The changes ``--repro-minimize`` tries (``analysis/shrink.py``), on calls as ``call_of`` makes them."""

import io
import itertools
import struct
import tracemalloc
import zipfile

from tfnative.analysis import shrink


def _call(*inputs):
    return {"op": "X", "inputs": [{"dtype": d, "shape": s, "values": v} for d, s, v in inputs]}


def test_a_smaller_dimension_keeps_the_first_values_along_every_axis():
    shape = [3, 4, 5]
    values = [float(i) for i in range(60)]
    call = _call(("float32", shape, values))
    small = shrink.apply(call, [("half", 0, 1), ("one", 0, 2)])["inputs"][0]
    assert small["shape"] == [3, 2, 1]
    want = [values[(i * 4 + j) * 5 + k] for i, j, k in itertools.product(range(3), range(2), range(1))]
    assert small["values"] == want
    assert call["inputs"][0]["shape"] == shape and len(call["inputs"][0]["values"]) == 60  # the call is unchanged


def test_a_shape_or_size_input_is_never_changed():
    call = _call(("int32", [5], [0, 1879048192, 100000000, 1610612736, -1]), ("int64", [], [5]),
                 ("float32", [2, 3], [0.5] * 6), ("int32", [2, 3], [7] * 6))
    assert shrink.changes(call, "one") == [("one", 2, 0), ("one", 2, 1), ("zeros", 2, 0),
                                           ("one", 3, 0), ("one", 3, 1), ("zeros", 3, 0)]


def test_values_become_zeros_then_ones_of_their_dtype():
    call = _call(("float64", [2], [0.25, "nan"]), ("bool", [2], [True, False]))
    zeros = shrink.apply(call, [("zeros", 0, 0), ("zeros", 1, 0)])
    assert [e["values"] for e in zeros["inputs"]] == [[0.0, 0.0], [False, False]]
    assert shrink.changes(zeros, "half") == []  # all zeros: nothing simpler, no dimension over 3
    assert shrink.apply(call, [("ones", 0, 0)])["inputs"][0]["values"] == [1.0, 1.0]


def test_elements_count_every_input():
    assert shrink.elements(_call(("float32", [28, 29], [0.0] * 812), ("float32", [17], [0.0] * 17),
                                 ("float32", [0, 4], []))) == 829


def test_an_input_copied_to_a_file_is_shrunk_without_becoming_a_list(tmp_path):
    """A large input's values (a spool.Raw over its copy) stay raw through the changes: a smaller shape and a
    fill are Raw values, their elements those of the list path's, their data file written from their bytes."""
    from tfnative.core.tensorflow import spool
    from tfnative.output.reprotext import npz

    values = [float(i) for i in range(3 * 4 * 5)]
    path = tmp_path / "x.raw"
    path.write_bytes(struct.pack("<60f", *values))
    raw = spool.Spooled(str(path), "f", 60)
    call, listed = _call(("float32", [3, 4, 5], raw)), _call(("float32", [3, 4, 5], values))
    assert shrink.changes(call, "one") == shrink.changes(listed, "one")
    for made in ([("half", 0, 1), ("one", 0, 2)], [("one", 0, 0)], [("half", 0, 0), ("zeros", 0, 0)],
                 [("ones", 0, 0)]):
        small, want = shrink.apply(call, made)["inputs"][0], shrink.apply(listed, made)["inputs"][0]
        assert isinstance(small["values"], spool.Raw) and small["shape"] == want["shape"]
        assert list(small["values"]) == want["values"], made
        member = [zipfile.ZipFile(io.BytesIO(npz({"x": e}))).read("x.npy") for e in (small, want)]
        assert member[0] == member[1]  # the .npy written from the bytes is the list's
    zeros = shrink.apply(call, [("zeros", 0, 0)])
    assert ("zeros", 0, 0) not in shrink.changes(zeros, "one") and ("ones", 0, 0) not in shrink.changes(zeros, "half")
    assert ("ones", 0, 0) in shrink.changes(call, "half") == shrink.changes(listed, "half")
    one = [("one", 0, 0), ("one", 0, 1), ("one", 0, 2)]
    for fill in ("zeros", "ones"):  # one element, a fill: nothing simpler in any later round, as for a list
        made = [(fill, 0, 0)] + one
        assert shrink.changes(shrink.apply(call, made), "half") == [] == shrink.changes(shrink.apply(listed, made),
                                                                                         "half")


def test_a_try_on_a_copied_input_holds_a_chunk_not_the_input(tmp_path, monkeypatch):
    """One try's candidate of a 4 MB copied input (half its rows, then half its columns) made and written to its
    data file: Python's allocations peak at a few chunks (64 KiB here: 219 KiB measured), not at the candidate's
    size (made as a list of its values, as before, 14 MB)."""
    from tfnative.core.tensorflow import spool
    from tfnative.output.reprotext import write_npz

    monkeypatch.setattr(spool, "CHUNK", 64 << 10)
    n = 1024
    path = tmp_path / "x.raw"
    path.write_bytes(struct.pack("<%df" % n, *[float(i) for i in range(n)]) * n)
    call = _call(("float32", [n, n], spool.Spooled(str(path), "f", n * n)))
    tracemalloc.start()
    try:
        changes = shrink.changes(call, "half")
        small = shrink.apply(call, [c for c in changes if c[0] == "half"])["inputs"][0]
        with open(tmp_path / "x.npz", "wb") as f:
            write_npz(f, {"x": small})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert small["shape"] == [n // 2, n // 2] and peak < 512 << 10, peak
    with zipfile.ZipFile(tmp_path / "x.npz") as z:
        data = z.read("x.npy")
    assert data.endswith(struct.pack("<%df" % (n // 2), *[float(i) for i in range(n // 2)]) * (n // 2))
