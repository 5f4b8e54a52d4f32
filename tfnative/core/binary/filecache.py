"""What was read from a file, kept once per file: the one bounded cache of the per-file readers.

A file is known by its path, size, mtime, inode and device: a file rewritten or replaced at the same path is
read again.  At most ``size`` entries are kept (all are dropped when it is full: the readers' files are a
process's libraries, a few hundred at most); lookups and stores are locked, the read itself is not (two
threads may read one file at once, and both keep the same answer).
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Dict, Generic, Tuple, TypeVar

T = TypeVar("T")
Key = Tuple[str, int, int, int, int]


class FileCache(Generic[T]):
    """``get(path, read, missing)``: ``read()``'s answer for the file at ``path``, read once per file."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: Dict[Key, T] = {}
        self._lock = threading.Lock()

    def get(self, path: str, read: Callable[[], T], missing: Callable[[], T]) -> T:
        """The kept answer, else ``read()`` (kept); ``missing()`` (not kept) where the file cannot be stat'ed."""
        try:
            st = os.stat(path)
        except OSError:
            return missing()
        key = (path, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
        with self._lock:
            if key in self._entries:
                return self._entries[key]
        result = read()
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.clear()
            self._entries[key] = result
        return result
