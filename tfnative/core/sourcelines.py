"""The text of a source file's line, read once per file (the user's Python files, named by frames)."""

from __future__ import annotations

from typing import Dict, List, Optional

from .binary.mapfile import read_file

MAX_FILES = 512  # files kept at once
MAX_BYTES = 16 << 20  # a larger "source file" is not one
_CACHE: Dict[str, Optional[List[str]]] = {}


def line(path: Optional[str], number: Optional[int]) -> Optional[str]:
    """The text of ``path:number`` (stripped), when the file is there to read."""
    if not number or number < 1:
        return None
    lines = text_lines(path)
    if lines is None or number > len(lines):
        return None
    return lines[number - 1].strip()


def text_lines(path: Optional[str]) -> Optional[List[str]]:
    """The lines of ``path`` (not stripped), None where it cannot be read."""
    if not path:
        return None
    if path not in _CACHE:
        if len(_CACHE) >= MAX_FILES:
            _CACHE.clear()
        try:
            # Through the one checked opener: a frame may name a FIFO, /dev/zero or a sparse 100 GB file
            _CACHE[path] = read_file(path, MAX_BYTES).decode("utf-8", "replace").splitlines()
        except OSError:
            _CACHE[path] = None
    return _CACHE[path]
