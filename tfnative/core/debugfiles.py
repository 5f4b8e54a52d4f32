"""Where a stripped file's separate debug file is, by build-id (pure; the standard library alone).

Distributions put it at ``/usr/lib/debug/.build-id/xx/yyyy.debug``.  An
interpreter unpacked into a private root (``dpkg -x`` of ``python3.14`` and
``python3.14-dbg``, as ``.ci/pythons`` does) keeps it under that root instead:
``<root>/usr/lib/debug/.build-id``, next to ``<root>/usr/bin`` and
``<root>/usr/lib/<triplet>``.  Both tfnative's own symbol index and gdb (via
``Objfile.add_separate_debug_file``) look in both.
"""

import os
from typing import List, Optional

DEBUG_ROOT = "/usr/lib/debug/.build-id"
PREFIX_LEVELS = 3  # directories above the file's own where its prefix may be (usr/lib/x86_64-linux-gnu)


def debug_roots(path: str) -> List[str]:
    """The ``.build-id`` directories to look in for ``path``: the system's, then its prefix's."""
    roots = [DEBUG_ROOT]
    here = os.path.dirname(os.path.realpath(path))
    for _ in range(PREFIX_LEVELS):
        here = os.path.dirname(here)
        candidate = os.path.join(here, "lib", "debug", ".build-id")
        if candidate not in roots and os.path.isdir(candidate):
            roots.append(candidate)
    return roots


def separate_debug_files(path: str, build_id: str) -> List[str]:
    """The existing debug files for ``path`` with build-id ``build_id`` (hex), most likely first."""
    if len(build_id) < 3:
        return []
    out = []
    for root in debug_roots(path):
        candidate = os.path.join(root, build_id[:2], build_id[2:] + ".debug")
        if os.path.exists(candidate):
            out.append(candidate)
    return out


def separate_debug_file(path: str, build_id: str) -> Optional[str]:
    found = separate_debug_files(path, build_id)
    return found[0] if found else None
