"""Where a file a crashed process mapped may be on this host: the rules, in the order they are tried.

1. The executable given on the command line, for the core's executable.
2. ``--sysroot DIR`` prefixed to the path the process saw (gdb's ``set
   sysroot``), else that path itself.
3. The interpreter's prefix moved: with an executable given, a path under
   the core's interpreter prefix (``.../bin/python3.11`` -> ``...``:
   ``libpython``, ``lib-dynload``) is also looked for under the given
   interpreter's own prefix (its real path: a venv's ``bin/python`` leads to
   the interpreter it links to).
4. The venv: a path in a ``lib/python3.X/site-packages`` (or
   ``dist-packages``) tree is also looked for in the same place under the
   executable's own venv: the given executable's, else the core's
   ``argv[0]``'s (``--sysroot`` applied); a venv is a directory with a
   ``pyvenv.cfg``.

Each rule only proposes a path; whether it is the file the process ran is
``corefile/checks.py``'s question.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional

SITE_RE = re.compile(r"^.*?/lib/(python3\.\d+)/(?:site|dist)-packages(/.*)?$")


def venv_of(executable: Optional[str]) -> Optional[str]:
    """The venv whose ``bin/`` holds ``executable`` (not resolving its symlink), None when it is in none."""
    if not executable or not os.path.isabs(executable):
        return None
    root = os.path.dirname(os.path.dirname(executable))
    return root if os.path.isfile(os.path.join(root, "pyvenv.cfg")) else None


class PathRules:
    """``candidates(seen)``: the host paths to try for a path the process saw, best first."""

    def __init__(self, sysroot: Optional[str], exe_seen: Optional[str], executable: Optional[str],
                 argv0: Optional[str]) -> None:
        self.sysroot = sysroot
        self.exe_seen = exe_seen
        self.executable = os.path.abspath(executable) if executable else None
        self.moves = []
        if self.executable and exe_seen:
            self.moves.append((os.path.dirname(os.path.dirname(exe_seen)),
                               os.path.dirname(os.path.dirname(os.path.realpath(self.executable)))))
        self.venv = venv_of(self.executable) or venv_of(self.under_sysroot(argv0) if argv0 else None)

    def under_sysroot(self, seen: str) -> str:
        """``seen`` under ``--sysroot`` (itself without one)."""
        return os.path.join(self.sysroot, seen.lstrip("/")) if self.sysroot else seen

    def candidates(self, seen: str) -> List[str]:
        if self.executable and seen == self.exe_seen:
            return [os.path.realpath(self.executable)]  # a venv's bin/python: the interpreter it links to
        out = [self.under_sysroot(seen)]
        for old, new in self.moves:
            if seen.startswith(old + "/") and old != new:
                out.append(new + seen[len(old):])
        m = SITE_RE.match(seen)
        if m and self.venv:
            out.append(os.path.join(self.venv, "lib", m.group(1), "site-packages") + (m.group(2) or ""))
        return list(dict.fromkeys(out))
