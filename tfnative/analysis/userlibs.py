"""The user's own native code: which frames' libraries are the user's (``frameclass.library_class``'s rule
on each library's path, with the one fact it reads from the file: does it link TensorFlow), and which of
those carry no debug info, with the rebuild that gives it (the event's ``no_debug_info``).

The capture's ``libraries`` (each frame's library by name -> its path, as every capture path records it:
gdb's, tfnative's unwinder's, a core's) is all it needs: ``stack``, ``core`` and ``attach`` class a frame
alike.
"""

from __future__ import annotations

from typing import Any, Dict, List

from ..core.binary import libfacts
from ..core.model import EventThread, NativeFrame


def library_classes(libraries: Dict[str, str]) -> Dict[str, str]:
    """The class of each library whose path decides it, by its name (``libfacts.library_classes``)."""
    return libfacts.library_classes(libraries)


def without_debug_info(threads: List[EventThread], libraries: Dict[str, str]) -> List[Dict[str, Any]]:
    """The user's libraries on ``threads``' frames that give no file:line (no DWARF of their own, no separate
    debug file gdb would find), each once: ``{"library", "path", "built_by", "rebuild"}``."""
    out: List[Dict[str, Any]] = []
    seen = set()
    for t in threads:
        for f in t.frames:
            if not isinstance(f, NativeFrame) or f.frame_class != "user" or f.library in seen or not f.library:
                continue
            seen.add(f.library)
            path = libraries.get(f.library)
            facts = libfacts.facts(path) if path else None
            if facts is None or not facts.readable or facts.lines:
                continue
            out.append({"library": f.library, "path": path, "built_by": "bazel" if facts.bazel else facts.compiler,
                        "rebuild": libfacts.rebuild_advice(facts)})
    return out
