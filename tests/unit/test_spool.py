"""Inputs larger than ``--repro`` reads whole (issue #45, ``core/tensorflow/spool.py``): copied from the target's
memory a chunk at a time, written into the data file a chunk at a time, refused beyond the cap in one line that
names the input's dtype and shape."""

import io
import itertools
import json
import os
import struct
import zipfile

import pytest

from tfnative.analysis.reproducer import NoRepro, model_of
from tfnative.core.model import CrashSummary, Document, Op
from tfnative.core.tensorflow import spool
from tfnative.output.reprotext import npz, write_npz


class Memory:
    """A target's memory: ``data`` at ``base``; records the size of each read."""

    def __init__(self, base, data):
        self.base, self.data, self.reads = base, data, []

    def read(self, addr, size):
        self.reads.append(size)
        at = addr - self.base
        if not 0 <= at <= at + size <= len(self.data):
            raise MemoryError("0x%x" % addr)
        return self.data[at:at + size]


def test_an_input_is_copied_and_written_a_chunk_at_a_time(monkeypatch):
    monkeypatch.setattr(spool, "CHUNK", 64)
    values = [float(i) for i in range(1000)] + [float("nan")]
    raw = struct.pack("<%df" % len(values), *values)
    mem = Memory(0x10000, raw)
    got = spool.copy(mem, 0x10000, len(raw), "f")
    assert len(got) == len(values) and max(mem.reads) == 64
    assert list(got)[:1000] == values[:1000] and got[-1] == "nan" and got[3:6] == [3.0, 4.0, 5.0]
    out = io.BytesIO()
    entry = {"dtype": "float32", "shape": [len(values)]}
    write_npz(out, {"x": dict(entry, values=got)})
    member = zipfile.ZipFile(io.BytesIO(out.getvalue())).read("x.npy")
    small = zipfile.ZipFile(io.BytesIO(npz({"x": dict(entry, values=list(got))}))).read("x.npy")
    assert member == small and member.endswith(raw)  # the .npy of the values read whole, byte for byte
    os.unlink(got.path)


def _refused(entry, mem, nbytes, fmt):
    try:
        return spool.Entry(entry, spooled=spool.copy(mem, 0x10000, nbytes, fmt))
    except spool.Refused as exc:
        return spool.Entry(entry, refused=str(exc))


def test_an_input_over_the_cap_is_refused_in_one_line_naming_its_dtype_and_shape(monkeypatch):
    monkeypatch.setattr(spool, "SPOOL_MAX", 1 << 20)
    mem = Memory(0x10000, b"")
    entry = _refused({"dtype": "float64", "shape": [512, 512]}, mem, 2 << 20, "d")
    assert entry.spooled is None and not mem.reads
    op = Op(type="Reshape", inputs=[entry], attrs={})
    with pytest.raises(NoRepro) as exc:
        model_of(Document(pid=7, argv=["x.py"], triage=CrashSummary(signal="SIGFPE", op=op)))
    assert str(exc.value) == ("op Reshape: input 0, float64[512,512], is 2.0 MiB, more than tfnative copies "
                              "(1.0 MiB): its values were not read")


def test_an_unreadable_input_is_refused_and_leaves_no_file():
    mem = Memory(0x10000, b"\0" * 100)
    where = os.path.dirname(spool.copy(mem, 0x10000, 1, "b").path)
    before = set(os.listdir(where))
    entry = _refused({"dtype": "int8", "shape": [200]}, mem, 200, "b")
    assert spool.refusal(entry) == "200 bytes, not copied: 0x10000 is not readable"
    assert set(os.listdir(where)) == before


def test_the_copy_travels_with_its_entry_which_stays_json():
    """The document holds the entry (JSON as it is: the copy is a typed field beside its keys); the reproducer's
    model takes the copy from it, and a copy of the entry's keys alone has none."""
    mem = Memory(0x10000, bytes(range(100)))
    got = spool.copy(mem, 0x10000, 100, "B")
    entry = spool.Entry({"dtype": "uint8", "shape": [10, 10]}, spooled=got)
    op = Op(type="Reshape", inputs=[entry], attrs={})
    doc = Document(pid=7, argv=["x.py"], triage=CrashSummary(signal="SIGFPE", op=op))
    model = model_of(doc)
    assert model["inputs"][0]["values"] is got and list(got) == list(range(100)) and "values" not in entry
    assert json.loads(json.dumps(entry)) == {"dtype": "uint8", "shape": [10, 10]}
    assert spool.spooled(dict(entry)) is None
    spool.release(entry)


def test_a_released_copy_leaves_no_file():
    mem = Memory(0x10000, b"\1" * 100)
    got = spool.copy(mem, 0x10000, 100, "b")
    entry = spool.Entry({"dtype": "int8", "shape": [100]}, spooled=got)
    spool.release(entry)
    assert spool.spooled(entry) is None and not os.path.exists(got.path)


def _spooled(values, fmt):
    raw = struct.pack("<%d%s" % (len(values), fmt), *values)
    return spool.copy(Memory(0x10000, raw), 0x10000, len(raw), fmt)


def test_a_smaller_shape_of_a_copy_is_read_where_its_runs_lie(monkeypatch):
    """Cropping a copy keeps the first values along every axis, as a list's crop does, read a run at a time
    (never more than CHUNK bytes at once), a crop of a crop the crop of the copy; fills are their bytes."""
    monkeypatch.setattr(spool, "CHUNK", 16)
    shape = [3, 4, 5]
    values = [float(i) for i in range(60)]
    got = _spooled(values, "f")
    try:
        for new in ([3, 2, 1], [1, 4, 5], [3, 4, 2], [2, 1, 5], [3, 4, 5], [0, 4, 5]):
            crop = got.cropped(shape, new)
            want = [values[(i * 4 + j) * 5 + k] for i, j, k in itertools.product(*(range(n) for n in new))]
            assert list(crop) == want and len(crop) == len(want), new
            assert all(len(c) <= 16 for c in crop.chunks())
            assert crop[1:3] == want[1:3] and (not want or crop[-1] == want[-1])
        twice = got.cropped(shape, [3, 2, 5]).cropped([3, 2, 5], [2, 2, 2])
        assert list(twice) == [values[(i * 4 + j) * 5 + k] for i, j, k in itertools.product(range(2), range(2),
                                                                                          range(2))]
        zeros = got.filled(False)
        assert list(zeros) == [0.0] * 60 and zeros.uniform() == "zeros" and got.uniform() is None
        assert list(zeros.cropped(shape, [1, 2, 3])) == [0.0] * 6
        assert _spooled([1.0] * 9, "f").uniform() == "ones" and _spooled([0.0, -0.0], "f").uniform() is None
    finally:
        os.unlink(got.path)
