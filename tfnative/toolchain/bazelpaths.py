"""Map the file names a Bazel build records in DWARF back to files on disk.

Bazel compiles in the execroot (``<output_base>/execroot/<workspace>``, or a
sandbox copy of it) and runs the compiler with ``PWD=/proc/self/cwd``, so gcc and
clang record ``DW_AT_comp_dir = /proc/self/cwd`` and file names relative to the
execroot: ``tensorflow/core/...`` (the main repository), ``external/<repo>/...``
(other repositories), ``bazel-out/<config>/bin/...`` (generated files, ``.dwo``).
For gdb, ``/proc/self/cwd`` is gdb's own working directory: wrong.

``substitutions(source_dirs)`` turns the directories a user passes with
``--source-dir`` (a workspace, an execroot or an output base; anything else is
ignored) into ``set substitute-path FROM TO`` pairs, most specific first, because
gdb applies the first rule whose FROM is a prefix of the path (whole components).
It only looks at the file system (the ``bazel-out`` / ``bazel-<name>``
convenience links of a workspace); it never runs Bazel.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

BAZEL_CWD = "/proc/self/cwd"
WORKSPACE_FILES = ("WORKSPACE", "WORKSPACE.bazel", "MODULE.bazel")


def _is_workspace(d: str) -> bool:
    return any(os.path.isfile(os.path.join(d, f)) for f in WORKSPACE_FILES)


def execroot_of(directory: str) -> Optional[str]:
    """The execroot (``<output_base>/execroot/<name>``) for a workspace, an execroot or an output base."""
    d = os.path.abspath(directory)
    parts = d.split(os.sep)
    if "execroot" in parts:
        i = len(parts) - 1 - parts[::-1].index("execroot")
        if i + 1 < len(parts):
            return os.sep.join(parts[:i + 2])
    out = os.path.join(d, "bazel-out")
    if os.path.islink(out):
        return os.path.dirname(os.path.realpath(out))
    if os.path.isdir(os.path.join(d, "execroot")):
        roots = [os.path.join(d, "execroot", n) for n in sorted(os.listdir(os.path.join(d, "execroot")))]
        roots = [r for r in roots if os.path.isdir(r)]
        if len(roots) == 1:
            return roots[0]
    if _is_workspace(d):
        for name in sorted(os.listdir(d)):
            link = os.path.join(d, name)
            if name.startswith("bazel-") and os.path.islink(link):
                target = os.path.realpath(link)
                if os.path.basename(os.path.dirname(target)) == "execroot":
                    return target
    return None


def _workspace_of(directory: str, execroot: Optional[str]) -> Optional[str]:
    d = os.path.abspath(directory)
    if _is_workspace(d) and "execroot" not in d.split(os.sep):
        return d
    return None


def substitutions(source_dirs: List[str]) -> List[Tuple[str, str]]:
    """``set substitute-path FROM TO`` pairs for Bazel-built objects, most specific first.

    For a workspace W whose execroot is E (found through W's ``bazel-out`` link) and
    output base B = E/../..:

    - ``/proc/self/cwd/external`` and ``external`` -> ``B/external`` (other repositories)
    - ``/proc/self/cwd/bazel-out`` and ``bazel-out`` -> ``E/bazel-out`` (generated files, ``.dwo``)
    - ``/proc/self/cwd`` -> W (sources, as you edit them), or E when only an execroot is given
    - ``E`` -> W (objects built outside the ``PWD=/proc/self/cwd`` convention)

    Directories that are neither a workspace nor part of an output base give no pair
    (they stay plain ``directory`` entries).  Duplicates are dropped, first one wins.
    """
    pairs: List[Tuple[str, str]] = []
    for sd in source_dirs:
        if not sd or not os.path.isdir(sd):
            continue
        execroot = execroot_of(sd)
        workspace = _workspace_of(sd, execroot)
        if execroot is None and workspace is None:
            continue
        if execroot is not None:
            output_base = os.path.dirname(os.path.dirname(execroot))
            external = os.path.join(output_base, "external")
            if not os.path.isdir(external):
                external = os.path.join(execroot, "external")
            for prefix in (BAZEL_CWD + "/external", "external"):
                pairs.append((prefix, external))
            for prefix in (BAZEL_CWD + "/bazel-out", "bazel-out"):
                pairs.append((prefix, os.path.join(execroot, "bazel-out")))
        root = workspace or execroot
        assert root is not None
        pairs.append((BAZEL_CWD, root))
        if execroot is not None and workspace is not None:
            pairs.append((execroot, workspace))
    seen = set()
    out: List[Tuple[str, str]] = []
    for frm, to in pairs:
        if frm in seen:
            continue
        seen.add(frm)
        out.append((frm, to))
    return out


def gdb_commands(source_dirs: List[str]) -> List[str]:
    """The gdb CLI commands for ``substitutions(source_dirs)`` (paths with spaces are not quotable)."""
    return ["set substitute-path %s %s" % (frm, to) for frm, to in substitutions(source_dirs)]


def gdb_cwd(source_dirs: List[str]) -> Optional[str]:
    """A directory for gdb's own working directory (``cd DIR`` before the libraries load), or None.

    Split DWARF (``tfn_split``): gdb looks for a ``.dwo`` only at ``DW_AT_comp_dir/DW_AT_dwo_name``
    = ``/proc/self/cwd/bazel-out/...`` and relative to its cwd; ``substitute-path`` and
    ``debug-file-directory`` are not consulted for a relative name with a ``/`` (gdb 13).  So
    gdb must run in the execroot (which also holds ``external/`` and links to the sources).
    """
    for sd in source_dirs:
        if sd and os.path.isdir(sd):
            execroot = execroot_of(sd)
            if execroot is not None and os.path.isdir(execroot):
                return execroot
    return None
