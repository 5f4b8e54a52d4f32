"""Files tfnative writes: the cache directory, and atomic writes (cache entries, JSON reports)."""

from __future__ import annotations

import os
import tempfile
from typing import Iterable


def cache_dir() -> str:
    """``$TFNATIVE_CACHE_DIR``, else ``$XDG_CACHE_HOME/tfnative``, else ``~/.cache/tfnative``."""
    d = os.environ.get("TFNATIVE_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "tfnative")
    return d


def atomic_write(path: str, chunks: Iterable[bytes]) -> None:
    """Write ``path`` through a temporary file in the same directory and ``os.replace``.

    Readers see either the old file or the complete new one, never a partial
    one, however many processes write the same entry at the same time.
    """
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
