"""Inputs too large to read whole into memory (issue #45, ``--repro``): their bytes are copied from the target's
memory (a live process's ``/proc/PID/mem``, a core's file) into a temporary file, ``CHUNK`` bytes at a time,
while the capture still holds the memory; the reproducer's data file is then written from that file, again a
chunk at a time (``output/reprotext.py``'s ``write_npz``).  ``Spooled`` stands for the values of such an input:
a read-only sequence of its elements that reads them from the file a chunk at a time, never all at once.  The
input's entry is then an ``Entry``: the capture's ``{"dtype", "shape"}`` with the copy (or why there is none) in
typed fields beside its keys, so that it travels with the input and the document, which holds the entry, stays
JSON.

``--repro-minimize`` shrinks such an input without reading it whole either (``analysis/shrink.py``): a smaller
shape keeps the first values along each axis (``Raw.cropped``: the runs of the copy that it keeps, read where
they lie) and a fill is its bytes repeated (``Filled``); both are ``Raw`` values, written a chunk at a time.

An input of more than ``SPOOL_MAX`` bytes, or more than the free space where the file would go, is not copied:
``Refused`` says why, in the words of the one line that refuses the reproducer."""

from __future__ import annotations

import atexit
import itertools
import math
import os
import shutil
import struct
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union, overload

from ..memory import Memory

CHUNK = 4 << 20  # bytes read from the target, and from the spool file, at a time
DECODE_BYTES = 64 << 10  # bytes decoded into Python values at a time (iterating a Raw)
SPOOL_MAX = 4 << 30  # the largest input copied
FREE_MARGIN = 256 << 20  # the free space left beside a copy (the data file needs as much again)
_dir: List[str] = []


class Refused(Exception):
    """Why the values of an input were not copied (too large, no room, unreadable): the words of the line."""


class Entry(Dict[str, Any]):
    """An input's entry (``{"dtype", "shape"}``, JSON as it is) whose values are larger than ``--repro`` reads
    whole: ``spooled``, their copy, or ``refused``, why there is none."""

    __slots__ = ("spooled", "refused")

    def __init__(self, entry: Dict[str, Any], spooled: Optional[Spooled] = None,
                 refused: Optional[str] = None) -> None:
        super().__init__(entry)
        self.spooled, self.refused = spooled, refused


def spooled(entry: Dict[str, Any]) -> Optional[Spooled]:
    """The copy of the values of the input ``entry``, None where there is none."""
    return entry.spooled if isinstance(entry, Entry) else None


def refusal(entry: Dict[str, Any]) -> Optional[str]:
    """Why the values of the input ``entry`` were not copied, None where nothing was refused."""
    return entry.refused if isinstance(entry, Entry) else None


def release(entry: Dict[str, Any]) -> None:
    """The copy of ``entry``'s values, if any, is no longer needed (its data file is written): its file goes."""
    if isinstance(entry, Entry) and entry.spooled is not None:
        try:
            os.unlink(entry.spooled.path)
        except OSError:
            pass
        entry.spooled = None


def size_text(n: int) -> str:
    """``n`` bytes in the largest binary unit that keeps it at least 1 (``100.0 MiB``)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return "%.1f %s" % (n / (1 << shift), unit)
    return "%d bytes" % n


def _spool_dir() -> str:
    import tempfile  # here, not at the top: ``stack`` imports this module and never spools (tempfile: ~2 ms)

    if not _dir:
        _dir.append(tempfile.mkdtemp(prefix="tfnative-inputs-"))
        atexit.register(shutil.rmtree, _dir[0], True)
    return _dir[0]


def copy(mem: Memory, addr: int, nbytes: int, fmt: str) -> Spooled:
    """The ``nbytes`` at ``addr`` copied to a spool file, a chunk at a time, as a ``Spooled`` of ``fmt``
    elements; raises Refused (too large, no room, unreadable)."""
    try:
        where = _spool_dir()
        free = shutil.disk_usage(where).free
    except OSError as exc:
        raise Refused("no temporary directory to copy it to (%s)" % (exc.strerror or exc)) from None
    if nbytes > SPOOL_MAX:
        raise Refused("%s, more than tfnative copies (%s)" % (size_text(nbytes), size_text(SPOOL_MAX)))
    if nbytes + FREE_MARGIN > free:
        raise Refused("%s, more than the free space in %s (%s)" % (size_text(nbytes), where, size_text(free)))
    import tempfile

    fd, path = tempfile.mkstemp(dir=where, suffix=".raw")
    try:
        with os.fdopen(fd, "wb") as f:
            for at in range(0, nbytes, CHUNK):
                f.write(mem.read(addr + at, min(CHUNK, nbytes - at)))
    except (MemoryError, OSError) as exc:
        os.unlink(path)
        why = "0x%x is not readable" % addr if isinstance(exc, MemoryError) else (exc.strerror or str(exc))
        raise Refused("%s, not copied: %s" % (size_text(nbytes), why)) from None
    return Spooled(path, fmt, nbytes // struct.calcsize(fmt))


class Raw(Sequence[Any]):
    """Values held as raw little-endian bytes of ``fmt`` elements, given a chunk at a time (``chunks``): a
    read-only sequence of the elements, row-major, as ``kernelinputs`` decodes them (a bool's ``bool``, a float
    that is not finite its JSON spelling: ``"nan"``, ``"inf"``), never all decoded at once."""

    def __init__(self, fmt: str, elements: int) -> None:
        self.fmt, self.elements = fmt, elements
        self.itemsize = struct.calcsize(fmt)

    def chunks(self, start: int = 0, stop: Optional[int] = None) -> Iterator[bytes]:
        """The raw bytes of elements ``start`` to ``stop``, at most ``CHUNK`` at a time."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.elements

    def only(self, one: bool) -> bool:
        """Every element is exactly 0 (``one``: 1), by its bytes (a float's 0.0, not -0.0; a bool's False)."""
        value = struct.pack("<" + self.fmt, int(one))
        return all(raw == value * (len(raw) // self.itemsize) for raw in self.chunks())

    def uniform(self) -> Optional[str]:
        """``zeros`` or ``ones`` where every one of more than one element is exactly that; else None."""
        if self.elements < 2:
            return None
        return "zeros" if self.only(False) else "ones" if self.only(True) else None

    def filled(self, one: bool) -> Raw:
        """As many elements, each 0 (``one`` False) or 1."""
        return Filled(self.fmt, self.elements, one)

    def cropped(self, shape: Sequence[int], new: Sequence[int]) -> Raw:
        """The values of the first ``new[i]`` indices along each axis of these values as a row-major ``shape``."""
        raise NotImplementedError

    def _decoded(self, raw: bytes) -> List[Any]:
        out: List[Any] = list(struct.unpack("<%d%s" % (len(raw) // self.itemsize, self.fmt), raw))
        if self.fmt == "?":
            return out
        return [repr(v) if isinstance(v, float) and not math.isfinite(v) else v for v in out]

    def __iter__(self) -> Iterator[Any]:
        step = DECODE_BYTES - DECODE_BYTES % self.itemsize
        for raw in self.chunks():
            for at in range(0, len(raw), step):  # a few thousand Python objects at a time, not a chunk's million
                yield from self._decoded(raw[at:at + step])

    @overload
    def __getitem__(self, i: int) -> Any: ...

    @overload
    def __getitem__(self, i: slice) -> List[Any]: ...

    def __getitem__(self, i: Union[int, slice]) -> Any:
        if isinstance(i, slice):
            start, stop, step = i.indices(self.elements)
            out = [v for raw in self.chunks(start, max(start, stop)) for v in self._decoded(raw)]
            return out[::step] if step != 1 else out
        if i < 0:
            i += self.elements
        if not 0 <= i < self.elements:
            raise IndexError(i)
        return self._decoded(b"".join(self.chunks(i, i + 1)))[0]


class Spooled(Raw):
    """The elements of a spooled input, read from ``path`` a chunk at a time."""

    def __init__(self, path: str, fmt: str, elements: int) -> None:
        super().__init__(fmt, elements)
        self.path = path

    def chunks(self, start: int = 0, stop: Optional[int] = None) -> Iterator[bytes]:
        end = self.elements if stop is None else stop
        with open(self.path, "rb") as f:
            f.seek(start * self.itemsize)
            left = max(0, end - start) * self.itemsize
            while left > 0:
                data = f.read(min(CHUNK, left))
                if not data:
                    raise OSError("%s ends early" % self.path)
                left -= len(data)
                yield data

    def cropped(self, shape: Sequence[int], new: Sequence[int]) -> Raw:
        return Cropped(self, shape, new)


class Cropped(Raw):
    """The first ``new[i]`` indices along each axis of a spooled input of ``shape``: the runs of its file that
    they are, each read where it lies (a run: the elements contiguous in both, at most ``CHUNK`` bytes read at a
    time)."""

    def __init__(self, source: Spooled, shape: Sequence[int], new: Sequence[int]) -> None:
        super().__init__(source.fmt, math.prod(new))
        self.source, self.shape, self.new = source, list(shape), [min(a, b) for a, b in zip(new, shape)]

    def cropped(self, shape: Sequence[int], new: Sequence[int]) -> Raw:
        return Cropped(self.source, self.shape, [min(a, b) for a, b in zip(new, self.new)])

    def _runs(self) -> Iterator[Tuple[int, int]]:
        """(the first element in the source, how many) of each run, in order."""
        axis = max((a for a in range(len(self.shape)) if self.new[a] != self.shape[a]), default=-1)
        if axis < 0:
            yield 0, self.elements
            return
        strides = [math.prod(self.shape[a + 1:]) for a in range(len(self.shape))]
        run = self.new[axis] * strides[axis]
        if run == 0:
            return
        for index in itertools.product(*(range(n) for n in self.new[:axis])):
            yield sum(i * s for i, s in zip(index, strides)), run

    def chunks(self, start: int = 0, stop: Optional[int] = None) -> Iterator[bytes]:
        end = self.elements if stop is None else min(stop, self.elements)
        size, at, buf = self.itemsize, 0, bytearray()
        fd = os.open(self.source.path, os.O_RDONLY)
        try:
            for first, count in self._runs():
                lo, hi = max(start, at), min(end, at + count)  # the part of this run asked for
                at += count
                if lo >= hi:
                    if at >= end:
                        break
                    continue
                offset, left = (first + lo - (at - count)) * size, (hi - lo) * size
                while left > 0:
                    data = os.pread(fd, min(CHUNK, left), offset)
                    if not data:
                        raise OSError("%s ends early" % self.source.path)
                    if len(buf) + len(data) > CHUNK:
                        yield bytes(buf)
                        buf = bytearray()
                    buf += data
                    offset, left = offset + len(data), left - len(data)
        finally:
            os.close(fd)
        if buf:
            yield bytes(buf)


class Filled(Raw):
    """``elements`` values each 0 or 1 (``one``), made a chunk at a time."""

    def __init__(self, fmt: str, elements: int, one: bool) -> None:
        super().__init__(fmt, elements)
        self.one = one

    def only(self, one: bool) -> bool:
        return one == self.one or not self.elements

    def cropped(self, shape: Sequence[int], new: Sequence[int]) -> Raw:
        return Filled(self.fmt, math.prod(min(a, b) for a, b in zip(new, shape)), self.one)

    def chunks(self, start: int = 0, stop: Optional[int] = None) -> Iterator[bytes]:
        end = self.elements if stop is None else min(stop, self.elements)
        per = CHUNK // self.itemsize
        one = struct.pack("<" + self.fmt, int(self.one))
        for at in range(start, end, per):
            yield one * min(per, end - at)
