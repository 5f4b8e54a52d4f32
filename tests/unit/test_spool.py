"""Inputs larger than ``--repro`` reads whole (issue #45, ``core/tensorflow/spool.py``): copied from the target's
memory a chunk at a time, written into the data file a chunk at a time, refused beyond the cap in one line that
names the input's dtype and shape."""

import io
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
    got = spool.copy(mem, 0x10000, len(raw), "float32", [len(values)], "f")
    assert got is not None and len(got) == len(values) and max(mem.reads) == 64
    assert list(got)[:1000] == values[:1000] and got[-1] == "nan" and got[3:6] == [3.0, 4.0, 5.0]
    out = io.BytesIO()
    entry = {"dtype": "float32", "shape": [len(values)]}
    write_npz(out, {"x": dict(entry, values=got)})
    member = zipfile.ZipFile(io.BytesIO(out.getvalue())).read("x.npy")
    small = zipfile.ZipFile(io.BytesIO(npz({"x": dict(entry, values=list(got))}))).read("x.npy")
    assert member == small and member.endswith(raw)  # the .npy of the values read whole, byte for byte


def test_an_input_over_the_cap_is_refused_in_one_line_naming_its_dtype_and_shape(monkeypatch):
    monkeypatch.setattr(spool, "SPOOL_MAX", 1 << 20)
    mem = Memory(0x10000, b"")
    assert spool.copy(mem, 0x10000, 2 << 20, "float64", [512, 512], "d") is None and not mem.reads
    op = Op(type="Reshape", inputs=[{"dtype": "float64", "shape": [512, 512]}], attrs={})
    with pytest.raises(NoRepro) as exc:
        model_of(Document(pid=7, argv=["x.py"], triage=CrashSummary(signal="SIGFPE", op=op)))
    assert str(exc.value) == ("op Reshape: input 0, float64[512,512], is 2.0 MiB, more than tfnative copies "
                              "(1.0 MiB): its values were not read")


def test_an_unreadable_input_is_refused_and_leaves_no_file():
    mem = Memory(0x10000, b"\0" * 100)
    assert spool.copy(mem, 0x10000, 200, "int8", [200], "b") is None
    assert spool.refusal("int8", [200]) == "200 bytes, not copied: 0x10000 is not readable"


def test_the_copy_is_kept_beside_its_entry_and_gives_the_models_values():
    """The document holds the entry alone (it stays JSON); the reproducer's model finds the copy beside it."""
    mem = Memory(0x10000, bytes(range(100)))
    got = spool.copy(mem, 0x10000, 100, "uint8", [10, 10], "B")
    entry = {"dtype": "uint8", "shape": [10, 10]}
    spool.keep(entry, got)
    op = Op(type="Reshape", inputs=[entry], attrs={})
    model = model_of(Document(pid=7, argv=["x.py"], triage=CrashSummary(signal="SIGFPE", op=op)))
    assert model["inputs"][0]["values"] is got and list(got) == list(range(100)) and "values" not in entry
    assert spool.spooled(dict(entry)) is None  # an equal entry is not the one


def test_a_released_copy_leaves_no_file():
    mem = Memory(0x10000, b"\1" * 100)
    got = spool.copy(mem, 0x10000, 100, "int8", [100], "b")
    entry = {"dtype": "int8", "shape": [100]}
    spool.keep(entry, got)
    spool.release(entry)
    assert spool.spooled(entry) is None and not os.path.exists(got.path)
