"""``tfnative doctor --pid PID``: the libraries of the user's a process maps, what each carries (``doctor.inspect``)
and how it was built, and that answer as text."""

from __future__ import annotations

import os
from functools import partial
from typing import Any, Dict, List, Optional, Tuple

from ..core import frameclass, procfs
from ..core.binary import libfacts
from ..errors import TfnativeError
from .doctor import Report, inspect


def process_libraries(pid: int) -> List[Tuple[str, str]]:
    """(the path process ``pid`` maps it at, the path to read it by) of each library of the user's it maps:
    op libraries and the others ``frameclass.library_class`` classes ``user`` (the rule every stack uses),
    in map order.  A process in another mount namespace (a container) is read through ``/proc/PID/root``.
    Raises TfnativeError when there is no such process or its map cannot be read."""
    try:
        rows = procfs.maps(pid)
    except FileNotFoundError:
        raise TfnativeError("no process %d" % pid) from None
    except OSError as exc:
        raise TfnativeError("cannot read the memory map of process %d: %s" % (pid, exc.strerror or exc)) from None
    paths: List[str] = []
    for _lo, _hi, _perms, off, _dev, inode, name in rows:
        if off == 0 and inode and name.startswith("/") and not name.endswith(" (deleted)") and name not in paths:
            paths.append(name)
    prefixes = frameclass.interpreter_prefixes(paths)
    out = []
    for path in paths:
        readable = path if os.path.exists(path) else "/proc/%d/root%s" % (pid, path)
        cls = frameclass.library_class(path, partial(libfacts.links_tensorflow, readable), prefixes)
        if cls == "user":
            out.append((path, readable))
    return out


def process_report(pid: int, source_dirs: Optional[List[str]] = None) -> Dict[str, Any]:
    """``doctor --pid PID``: the user's libraries the process maps, each with what it carries (``inspect``'s
    report) and how it was built, and the rebuild that gives one without debug info file:line."""
    libs = []
    for path, readable in process_libraries(pid):
        facts = libfacts.facts(readable)
        try:
            report: Optional[Report] = inspect(readable, source_dirs)
        except TfnativeError:
            report = None
        libs.append({"path": path, "op_library": facts.links_tensorflow,
                     "built_by": "bazel" if facts.bazel else facts.compiler,
                     "rebuild": None if facts.lines or not facts.readable else libfacts.rebuild_advice(facts),
                     "report": report.to_json() if report is not None else None})
    return {"pid": pid, "libraries": libs}


def render_process(doc: Dict[str, Any]) -> str:
    """``process_report``'s answer as text: one block a library, the op libraries first marked."""
    libs = doc["libraries"]
    if not libs:
        return ("process %d maps no library of your own (no op library, nothing outside the system's and "
                "installed packages' directories)" % doc["pid"])
    lines = ["process %d maps %d librar%s of your own:" % (doc["pid"], len(libs), "y" if len(libs) == 1 else "ies")]
    for lib in libs:
        kind = "op library (links TensorFlow)" if lib["op_library"] else "library"
        built = " built by %s" % lib["built_by"] if lib["built_by"] else ""
        lines.append("")
        lines.append("%s, %s%s" % (lib["path"], kind, built))
        rep = lib["report"]
        if rep is not None:
            dwarf = ("DWARF: file:line%s" % (" and locals" if rep["can_see_locals"] else "")
                     if rep["can_see_lines"] else "no DWARF: no file:line, no locals")
            lines.append("  carries     %s; .symtab: %s; build-id %s; debug file: %s" % (
                dwarf, "%d symbols" % rep["symtab_symbols"] if rep["symtab"] else "absent",
                rep["build_id"] or "none", rep["debuglink_found"] or "none"))
        if lib["rebuild"]:
            lines.append("  rebuild     %s" % lib["rebuild"])
    return "\n".join(lines)
