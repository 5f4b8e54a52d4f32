"""Where a stripped file's separate debug file is: the one search rule (pure; the standard library alone).

gdb's default order, over every debug root: the build-id
(``<root>/.build-id/xx/yyyy.debug``), then the ``.gnu_debuglink`` name (next to
the file, in its ``.debug`` directory, then ``<root>/<the file's directory>/``).

The roots: the system's ``/usr/lib/debug``, then the one under the file's own
prefix.  An interpreter unpacked into a private root (``dpkg -x`` of
``python3.14`` and ``python3.14-dbg``, as ``.ci/pythons`` does) keeps its debug
file under that root, ``<root>/usr/lib/debug``, next to ``<root>/usr/bin`` and
``<root>/usr/lib/<triplet>``; there the debuglink's directory is the file's,
relative to ``<root>``.  ``tfnative doctor`` (``dwarfcover.find_debug_file``),
``stack`` and ``core`` (``sources/modules.py``'s symbol indexes) and ``attach``
(``gdb/symbols.py``; ``Objfile.add_separate_debug_file`` in the gdb-side
capture) all look here.
"""

import os
from typing import List, Optional, Tuple

DEBUG_DIR = "/usr/lib/debug"
DEBUG_ROOT = DEBUG_DIR + "/.build-id"
PREFIX_LEVELS = 3  # directories above the file's own where its prefix may be (usr/lib/x86_64-linux-gnu)


def debug_dirs(path: str) -> List[Tuple[str, str]]:
    """(debug directory, the filesystem root it serves) to look in for ``path``: the system's, then its prefix's.

    A prefix's ``lib/debug`` counts where it has a ``.build-id`` directory or holds the file's own directory
    (a debuglink's place); its root is the directory above the prefix (``<root>`` of ``<root>/usr``).
    """
    out = [(DEBUG_DIR, "/")]
    real_dir = os.path.dirname(os.path.realpath(path))
    here = real_dir
    for _ in range(PREFIX_LEVELS):
        here = os.path.dirname(here)
        candidate = os.path.join(here, "lib", "debug")
        if candidate == DEBUG_DIR or any(candidate == d for d, _r in out):
            continue
        root = os.path.dirname(here)
        if os.path.isdir(os.path.join(candidate, ".build-id")) or \
                os.path.isdir(os.path.join(candidate, os.path.relpath(real_dir, root))):
            out.append((candidate, root))
    return out


def debug_roots(path: str) -> List[str]:
    """The ``.build-id`` directories to look in for ``path``: the system's, then its prefix's."""
    return [DEBUG_ROOT] + [os.path.join(d, ".build-id") for d, _root in debug_dirs(path)[1:]
                           if os.path.isdir(os.path.join(d, ".build-id"))]


def candidates(path: str, build_id: Optional[str], debuglink: Optional[str] = None) -> List[str]:
    """Every place, in gdb's order, where the separate debug file of ``path`` may be (existing or not)."""
    dirs = debug_dirs(path)
    out: List[str] = []
    if build_id and len(build_id) > 2:
        out += [os.path.join(d, ".build-id", build_id[:2], build_id[2:] + ".debug") for d, _root in dirs]
    if debuglink:
        here = [os.path.dirname(os.path.abspath(path))]
        real = os.path.dirname(os.path.realpath(path))
        if real not in here:
            here.append(real)
        for h in here:
            out += [os.path.join(h, debuglink), os.path.join(h, ".debug", debuglink)]
        for d, root in dirs:
            for h in here:
                rel = os.path.relpath(h, root)
                if not rel.startswith(".."):
                    out.append(os.path.join(d, rel, debuglink))
    return list(dict.fromkeys(out))  # each place once, in order


def find_debug_files(path: str, build_id: Optional[str], debuglink: Optional[str] = None) -> List[str]:
    """The existing separate debug files of ``path`` (build-id, then debuglink), most likely first."""
    out = []
    try:
        own = os.path.realpath(path)
    except (OSError, ValueError):
        return []
    for c in candidates(path, build_id, debuglink):
        try:
            if os.path.isfile(c) and os.path.realpath(c) != own:
                out.append(c)
        except (OSError, ValueError):
            continue
    return out


def find_debug_file(path: str, build_id: Optional[str], debuglink: Optional[str] = None) -> Optional[str]:
    """The separate debug file gdb would read for ``path``, or None."""
    found = find_debug_files(path, build_id, debuglink)
    return found[0] if found else None


def separate_debug_files(path: str, build_id: str) -> List[str]:
    """The existing debug files for ``path`` with build-id ``build_id`` (hex), most likely first."""
    if len(build_id) < 3:
        return []
    return find_debug_files(path, build_id)


def separate_debug_file(path: str, build_id: str) -> Optional[str]:
    found = separate_debug_files(path, build_id)
    return found[0] if found else None
