"""``stack`` documents in speedscope's file format (https://www.speedscope.app/file-format-schema.json) (pure).

One "sampled" profile per process (document), named by its member label as ``merge`` names it; each
thread's stack is one sample of weight 1, outermost frame first, interpreter glue hidden as in the text (the
frames analysis marked ``glue``).
Frames are shared by all profiles: ``name`` (a Python function; a native function with the op it runs;
``?? in LIBRARY`` for a native frame without a name), ``file`` (a Python file, a native frame's source file,
else its library) and ``line`` where known.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import __version__
from ..core.model import Document, ElidedFrame, Frame, NativeFrame
from ..core.rankset import NO_DOCUMENTS
from ..core.treemodel import member_names
from ..errors import TfnativeError
from . import render

Json = Dict[str, Any]
SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"


def frame_info(frame: Frame) -> Json:
    """The speedscope ``Frame`` of one of ours: ``name``, and ``file`` and ``line`` where known."""
    if isinstance(frame, ElidedFrame):
        return {"name": "... %d frames elided ..." % frame.count}
    name = frame.function
    file = frame.file
    if isinstance(frame, NativeFrame):
        if not name:
            name = "?? in %s" % (frame.library or "??")
        if frame.op:
            name += " [op %s]" % render.op_label(frame.op)
        file = file or frame.library
    out: Json = {"name": name or "?"}
    if file:
        out["file"] = file
    if isinstance(frame.line, int):
        out["line"] = frame.line
    return out


class _Frames:
    """The shared frame table: one entry per distinct (name, file, line)."""

    def __init__(self) -> None:
        self.table: List[Json] = []
        self.index: Dict[Tuple[Any, ...], int] = {}

    def of(self, frame: Frame) -> int:
        info = frame_info(frame)
        key = (info["name"], info.get("file"), info.get("line"))
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.table)
            self.table.append(info)
        return found


def profile_name(doc: Document, label: str) -> str:
    """``worker:1 (pid 42 on vm)``; a process named by ``host:pid`` alone: ``pid 42 on vm``."""
    where = "pid %s on %s" % (doc.pid if doc.pid is not None else "?", doc.host or "localhost")
    return where if label == "%s:%s" % (doc.host or "localhost", doc.pid) else "%s (%s)" % (label, where)


def speedscope(docs: Sequence[Document], all_threads: bool = False, name: Optional[str] = None) -> Json:
    """The speedscope file of ``docs`` (each document's threads that run Python, or every one with
    ``all_threads``).  Raises TfnativeError when there is no document."""
    if not docs:
        raise TfnativeError(NO_DOCUMENTS)
    frames = _Frames()
    profiles: List[Json] = []
    for doc, label in zip(docs, member_names(list(docs))):
        samples: List[List[int]] = []
        for t in doc.threads():
            if not (all_threads or t.runs_python()):
                continue
            stack = [frames.of(f) for f in reversed(t.frames) if not (isinstance(f, NativeFrame) and f.glue)]
            if stack:
                samples.append(stack)
        profiles.append({"type": "sampled", "name": profile_name(doc, label), "unit": "none", "startValue": 0,
                         "endValue": len(samples), "samples": samples, "weights": [1] * len(samples)})
    return {"$schema": SCHEMA_URL, "shared": {"frames": frames.table}, "profiles": profiles,
            "name": name or "tfnative: %d process%s" % (len(docs), "" if len(docs) == 1 else "es"),
            "activeProfileIndex": 0, "exporter": "tfnative %s" % __version__}
