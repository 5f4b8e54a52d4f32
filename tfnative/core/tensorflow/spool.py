"""Inputs too large to read whole into memory (issue #45, ``--repro``): their bytes are copied from the target's
memory (a live process's ``/proc/PID/mem``, a core's file) into a temporary file, ``CHUNK`` bytes at a time,
while the capture still holds the memory; the reproducer's data file is then written from that file, again a
chunk at a time (``output/reprotext.py``'s ``write_npz``).  ``Spooled`` stands for the values of such an input:
a read-only sequence of its elements that reads them from the file a chunk at a time, never all at once; it is
kept beside the input's entry (``keep``, ``spooled``), not in it, so that the document stays JSON.

An input of more than ``SPOOL_MAX`` bytes, or more than the free space where the file would go, is not copied:
``refusal`` says why, in the words of the one line that refuses the reproducer."""

from __future__ import annotations

import atexit
import math
import os
import shutil
import struct
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union, overload

from ..memory import Memory

CHUNK = 4 << 20  # bytes read from the target, and from the spool file, at a time
DECODE_BYTES = 64 << 10  # bytes decoded into Python values at a time (iterating a Spooled)
SPOOL_MAX = 4 << 30  # the largest input copied
FREE_MARGIN = 256 << 20  # the free space left beside a copy (the data file needs as much again)
_dir: List[str] = []
_refused: Dict[Tuple[str, Tuple[int, ...]], str] = {}  # (dtype, shape) -> why its values were not copied
_kept: Dict[int, Tuple[Dict[str, Any], Spooled]] = {}  # id(entry) -> (the entry, held so the id stays its own; values)


def size_text(n: int) -> str:
    """``n`` bytes in the largest binary unit that keeps it at least 1 (``100.0 MiB``)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return "%.1f %s" % (n / (1 << shift), unit)
    return "%d bytes" % n


def refusal(dtype: str, shape: Sequence[int]) -> Optional[str]:
    """Why the values of an input of ``dtype`` and ``shape`` were not copied, None where nothing was refused."""
    return _refused.get((dtype, tuple(shape)))


def keep(entry: Dict[str, Any], values: Spooled) -> None:
    """``values`` are those of the input ``entry`` (a capture's ``{"dtype", "shape"}``): kept beside it, so that
    the document, which holds the entry, stays JSON."""
    _kept[id(entry)] = (entry, values)


def spooled(entry: Dict[str, Any]) -> Optional[Spooled]:
    """The values ``keep`` kept for ``entry``, None where none were."""
    kept = _kept.get(id(entry))
    return kept[1] if kept is not None and kept[0] is entry else None


def release(entry: Dict[str, Any]) -> None:
    """The copy kept for ``entry``, if any, is no longer needed (its data file is written): its file goes."""
    kept = _kept.pop(id(entry), None)
    if kept is not None:
        try:
            os.unlink(kept[1].path)
        except OSError:
            pass


def _spool_dir() -> str:
    if not _dir:
        _dir.append(tempfile.mkdtemp(prefix="tfnative-inputs-"))
        atexit.register(shutil.rmtree, _dir[0], True)
    return _dir[0]


def copy(mem: Memory, addr: int, nbytes: int, dtype: str, shape: Sequence[int], fmt: str) -> Optional[Spooled]:
    """The ``nbytes`` at ``addr`` copied to a spool file, a chunk at a time, as a ``Spooled`` of ``fmt``
    elements; None where refused (too large, no room, unreadable: ``refusal`` says which)."""
    key = (dtype, tuple(shape))
    try:
        where = _spool_dir()
        free = shutil.disk_usage(where).free
    except OSError as exc:
        _refused[key] = "no temporary directory to copy it to (%s)" % (exc.strerror or exc)
        return None
    if nbytes > SPOOL_MAX:
        _refused[key] = "%s, more than tfnative copies (%s)" % (size_text(nbytes), size_text(SPOOL_MAX))
        return None
    if nbytes + FREE_MARGIN > free:
        _refused[key] = "%s, more than the free space in %s (%s)" % (size_text(nbytes), where, size_text(free))
        return None
    fd, path = tempfile.mkstemp(dir=where, suffix=".raw")
    try:
        with os.fdopen(fd, "wb") as f:
            for at in range(0, nbytes, CHUNK):
                f.write(mem.read(addr + at, min(CHUNK, nbytes - at)))
    except (MemoryError, OSError) as exc:
        os.unlink(path)
        why = "0x%x is not readable" % addr if isinstance(exc, MemoryError) else (exc.strerror or str(exc))
        _refused[key] = "%s, not copied: %s" % (size_text(nbytes), why)
        return None
    return Spooled(path, fmt, nbytes // struct.calcsize(fmt))


class Spooled(Sequence[Any]):
    """The elements of a spooled input, row-major, as ``kernelinputs`` decodes them (a bool's ``bool``, a float
    that is not finite its JSON spelling: ``"nan"``, ``"inf"``), read from ``path`` a chunk at a time."""

    def __init__(self, path: str, fmt: str, elements: int) -> None:
        self.path, self.fmt, self.elements = path, fmt, elements
        self.itemsize = struct.calcsize(fmt)

    def __len__(self) -> int:
        return self.elements

    def chunks(self, start: int = 0, stop: Optional[int] = None) -> Iterator[bytes]:
        """The raw bytes of elements ``start`` to ``stop``, at most ``CHUNK`` at a time."""
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
