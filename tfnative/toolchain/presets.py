"""Bazel presets for TensorFlow builds that keep what a debugger needs.

One table (``PRESETS``) is the source of truth: ``build/tfnative.bazelrc`` is
``render_bazelrc()`` written to disk (a test checks they agree), ``tfnative
presets`` prints the table, ``tfnative bazelrc`` prints snippets from it.

Bazel facts the presets rely on (Bazel's user manual, TF's ``.bazelrc``):

- ``-c opt`` adds ``-g0``; a later ``--copt=-g`` or ``--per_file_copt=...@-g`` wins
  (gcc and clang take the last ``-g`` flag).
- ``--per_file_copt=[+-]regex,...@opt,...``: each regex is an *unanchored*
  (substring) match against the source's exec path (``tensorflow/core/...``,
  ``external/<repo>/...``); a ``-`` regex excludes; ``,`` separates regexes and
  options, ``@`` separates the two lists, so neither may appear inside a regex.
  Later flags win: a ``--per_file_copt=...@-g0`` after yours silently removes the
  debug info again (xla 3381), and a ``--config=mkl``/``--config=opt`` after
  ``--config=dbg`` puts ``-c opt`` back.  Hence: tfnative's configs go last.
- ``--strip=sometimes`` (the default) strips only in fastbuild; ``--strip=never``
  is a top-level flag (TF 27495: put inside ``--copt`` or ``@...`` it does nothing).
- ``--fission=yes`` makes ``.dwo`` files only with ``--features=per_object_debug_info``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..core.userregex import brief, compile_user
from ..errors import TfnativeError

BAZELRC_NAME = "tfnative.bazelrc"


@dataclass(frozen=True)
class Preset:
    name: str
    kind: str  # "debug-info": use one of these; "modifier": add to a debug-info preset
    gives: str
    costs: str
    flags: Tuple[str, ...]

    def to_json(self) -> Dict[str, object]:
        return {"name": self.name, "kind": self.kind, "gives": self.gives, "costs": self.costs,
                "flags": list(self.flags)}


PRESETS: Tuple[Preset, ...] = (
    Preset(
        "tfn_symbols", "debug-info",
        "full DWARF (-g) for every target file: break on FILE:LINE, file:line in every frame, locals, "
        "arguments, inlined frames; still -O2, so some locals are <optimized out>",
        "the biggest build: a full TF's libtensorflow_cc grows from ~0.8 GB to several GB (>15 GB reported, "
        "TF 40130/27744/62871), links take hours and tens of GB of RAM, .debug_info can pass 4 GiB and fail "
        "the link with 'relocation truncated to fit' (TF 48919: add tfn_dwarf64), and gdb needs minutes to "
        "load it without tfn_index; recompiles everything",
        ("-c opt", "--copt=-g", "--strip=never"),
    ),
    Preset(
        "tfn_lines", "debug-info",
        "line tables (-g1; clang: -gline-tables-only) for every target file: break on FILE:LINE, "
        "file:line in every frame (and inlined frames with clang); no locals, no types",
        "recompiles everything; debug sections several times smaller than tfn_symbols and no DWARF32 "
        "overflow in practice; the cheapest way to get lines everywhere",
        ("-c opt", "--copt=-g1", "--strip=never"),
    ),
    Preset(
        "tfn_targeted", "debug-info",
        "full DWARF only for the files matching your regexes (like PyTorch's USE_CUSTOM_DEBINFO): "
        "locals where you look, symbols (.symtab) everywhere; fill the regexes in with "
        "'tfnative bazelrc tfn_targeted --files REGEX'",
        "after a plain -c opt build Bazel recompiles only the matching files and relinks: minutes, not hours; "
        "the library grows by the debug info of those files only",
        ("-c opt", "--strip=never"),
    ),
    Preset(
        "tfn_split", "debug-info",
        "full DWARF kept out of the link (-gsplit-dwarf): the library carries skeleton units and "
        "addresses, the rest stays in one .dwo per object under bazel-out (or a .dwp: "
        "'bazel build TARGET.dwp'); gdb finds the .dwo through DW_AT_comp_dir=/proc/self/cwd, so pass "
        "--source-dir WORKSPACE (tfnative maps /proc/self/cwd to it)",
        "compile time of tfn_symbols but a much smaller, faster link; the .dwo files live in the output base "
        "(a clean or another config's build removes them) unless you build and keep the .dwp",
        ("-c opt", "--copt=-g", "--strip=never", "--fission=yes", "--features=per_object_debug_info"),
    ),
    Preset(
        "tfn_dbg", "debug-info",
        "TF's own build:dbg recipe: -c dbg (-O0 -g), so no <optimized out> and exact stepping; third-party "
        "code under external/ (except XLA/TSL) at -g0, and tensorflow/core/kernels at -g0 because its full "
        "DWARF overflowed DWARF32 (TF 48919) -- put your own kernels elsewhere or override with "
        "tfn_targeted",
        "every op runs unoptimized (often 10x slower or more), recompiles everything, TF says --config=dbg "
        "is not officially supported; any --config=opt/mkl* placed after it silently restores -c opt; "
        "add --copt=-DDEBUG_BUILD for TF's DCHECKs (only when all of TF is built that way)",
        ("-c dbg", "--strip=never",
         "--per_file_copt=+external/.*,-external/.*xla.*,-external/.*tsl.*,-external/org_tensorflow/.*@-g0",
         "--per_file_copt=+tensorflow/core/kernels.*@-g0"),
    ),
    Preset(
        "tfn_index", "modifier",
        "a .gdb_index written by the linker (gold or lld): gdb opens a multi-GB DWARF in seconds instead of "
        "minutes (TF 18176); add it to a debug-info preset",
        "a slower link (the linker reads all the DWARF names) and a few % more size; needs gold or lld "
        "(GNU ld.bfd rejects --gdb-index; Bazel's Linux autoconfig picks gold, TF's clang builds lld)",
        ("--linkopt=-Wl,--gdb-index",),
    ),
    Preset(
        "tfn_compressed", "modifier",
        "zlib-compressed debug sections in the objects (-gz) and in the library: DWARF 3-5x smaller on "
        "disk and in the output base; add it to a debug-info preset",
        "compile and link CPU time; gdb decompresses at load (slower start, more memory); every tool that "
        "reads the file must support SHF_COMPRESSED (binutils >= 2.26, gdb >= 7.10)",
        ("--copt=-gz", "--linkopt=-Wl,--compress-debug-sections=zlib"),
    ),
    Preset(
        "tfn_dwarf64", "modifier",
        "64-bit DWARF offsets (-gdwarf64): no 4 GiB limit on .debug_info/.debug_str, the fix for "
        "'relocation truncated to fit: R_X86_64_32 against .debug_info' (TF 48919, jax 23564) when "
        "tfn_symbols or tfn_dbg covers all of TF",
        "debug sections a few % bigger; needs gcc >= 11 or clang >= 14, gdb >= 11; x86-64 / AArch64 only",
        ("--copt=-gdwarf64",),
    ),
)

BY_NAME: Dict[str, Preset] = {p.name: p for p in PRESETS}

ORDER_RULE = ("put tfnative's --config=tfn_* LAST on the command line: a later --config=opt/mkl*/dbg or "
              "--per_file_copt=...@-g0 silently undoes them")


def get(name: str) -> Preset:
    key = name if name.startswith("tfn_") else "tfn_" + name
    if key not in BY_NAME:
        raise TfnativeError("unknown preset %r (known: %s)" % (name, ", ".join(BY_NAME)))
    return BY_NAME[key]


def wrap(text: str, prefix: str, width: int = 100) -> List[str]:
    """``text`` in lines of at most ``width`` characters, each starting with ``prefix``."""
    words = text.split()
    lines: List[str] = []
    cur = prefix
    for w in words:
        if len(cur) + len(w) + 1 > width and cur.strip() != prefix.strip():
            lines.append(cur.rstrip())
            cur = prefix
        cur += w + " "
    if cur.strip() != prefix.strip():
        lines.append(cur.rstrip())
    return lines


def preset_block(p: Preset, extra_flags: Sequence[str] = ()) -> List[str]:
    lines = ["# %s (%s)" % (p.name, p.kind)]
    lines += wrap("gives: " + p.gives, "#   ")
    lines += wrap("costs: " + p.costs, "#   ")
    for f in tuple(p.flags) + tuple(extra_flags):
        lines.append("build:%s %s" % (p.name, f))
    return lines


HEADER = """\
# tfnative.bazelrc: presets for TensorFlow builds that keep debug info.
# Generated by tfnative/toolchain/presets.py (tfnative bazelrc > tfnative.bazelrc); do not edit by hand.
#
# Use: copy this file next to TensorFlow's .bazelrc and add to .bazelrc (or .bazelrc.user)
#     try-import %workspace%/tfnative.bazelrc
# then build with the preset LAST, after TF's own configs:
#     bazel build --config=opt --config=tfn_lines //tensorflow/tools/pip_package:wheel
#     bazel build --config=opt --config=tfn_symbols --config=tfn_index --config=tfn_dwarf64 ...
# Why last: a later --config=opt/mkl*/dbg or --per_file_copt=...@-g0 silently wins
# (xla 3381, and --config=mkl after --config=dbg puts -c opt back).
# Presets of kind "modifier" add to one of kind "debug-info".
# tfn_targeted needs your file regexes: 'tfnative bazelrc tfn_targeted --files REGEX'
# prints the line to add (e.g. to .bazelrc.user).  Check a result with 'tfnative doctor FILE.so'.
"""


def render_bazelrc() -> str:
    out = [HEADER]
    for p in PRESETS:
        out.append("\n".join(preset_block(p)) + "\n")
    return "\n".join(out)


# ---------------------------------------------------------------- tfn_targeted regexes

SOURCE_EXTS = (".cc", ".cpp", ".cxx", ".c", ".cu.cc", ".S")
SKIP_DIRS = {".git", "node_modules", "__pycache__"}
TOO_MANY = 2000


def _java_regex_problems(regex: str) -> Optional[str]:
    """Problems of a --per_file_copt regex that Python's re would not report the same way."""
    if not regex:
        return "is empty"
    if "," in regex:
        return "contains ',' (it separates regexes in --per_file_copt; use [,] or \\x2c)"
    if "@" in regex:
        return "contains '@' (it separates the regexes from the options in --per_file_copt)"
    if regex[0] in "+-":
        return "starts with '%s' (read by Bazel as include/exclude; write \\%s)" % (regex[0], regex[0])
    if re.search(r"\s", regex):
        return "contains white space"
    try:
        compile_user(regex)
    except re.error as exc:
        hint = " (a glob? --per_file_copt takes regexes: '.*\\.cc' not '*.cc')" if regex.startswith("*") else ""
        return "is not a valid regex: %s%s" % (exc, hint)
    return None


def source_files(workspace: str, limit: int = 200000) -> List[str]:
    """Workspace-relative paths of C/C++ sources, as Bazel spells them (no bazel-* trees)."""
    out: List[str] = []
    for root, dirs, files in os.walk(workspace):
        rel_root = os.path.relpath(root, workspace)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("bazel-")
                         and not (rel_root == "." and d == "external"))
        for f in sorted(files):
            if f.endswith(SOURCE_EXTS):
                out.append(os.path.normpath(os.path.join(rel_root, f)))
                if len(out) >= limit:
                    return out
    return out


@dataclass
class TargetedCheck:
    regexes: List[str]
    flag: str
    matches: Dict[str, List[str]]
    notes: List[str]


def check_regexes(regexes: Sequence[str], workspace: Optional[str]) -> TargetedCheck:
    """Validate the tfn_targeted regexes and, given a workspace, say which sources they select."""
    if not regexes:
        raise TfnativeError("tfn_targeted needs at least one --files REGEX (e.g. --files 'core/kernels/matmul')")
    notes: List[str] = []
    for r in regexes:
        problem = _java_regex_problems(r)
        if problem:
            raise TfnativeError("--files %s %s" % (brief(r), problem))
        if r.startswith("^"):
            notes.append("%r is anchored: it will not match the same files when TensorFlow is an external "
                         "repository (external/org_tensorflow/...)" % r)
        if re.search(r"(?<!\\)\.(cc|cpp|h)$", r):
            notes.append("%r: '.' matches any character; write '\\.%s' to be exact (harmless here)"
                         % (r, r.rsplit(".", 1)[1]))
    flag = "--per_file_copt=%s@-g" % ",".join(regexes)
    matches: Dict[str, List[str]] = {}
    if workspace:
        files = source_files(workspace)
        for r in regexes:
            rx = compile_user(r)
            matches[r] = [f for f in files if rx.search(f)]  # unanchored, like Bazel
            if not matches[r]:
                notes.append("%r matches none of the %d C/C++ sources under %s (it may still match "
                             "external/... or generated files)" % (r, len(files), workspace))
            elif len(matches[r]) > TOO_MANY:
                notes.append("%r matches %d files: that is close to tfn_symbols' cost" % (r, len(matches[r])))
    return TargetedCheck(list(regexes), flag, matches, notes)


def snippet(name: Optional[str], files: Sequence[str], workspace: Optional[str]) -> str:
    """Text for ``tfnative bazelrc [PRESET] [--files REGEX]...``."""
    if name is None:
        if files:
            check = check_regexes(files, workspace)
            return render_bazelrc() + "\n" + "\n".join(_targeted_lines(check)) + "\n"
        return render_bazelrc()
    p = get(name)
    extra: List[str] = []
    lines: List[str] = []
    if p.name == "tfn_targeted":
        check = check_regexes(files, workspace)
        extra = [check.flag]
        lines = _match_lines(check)
    elif files:
        raise TfnativeError("--files goes with tfn_targeted only (not %s)" % p.name)
    block = preset_block(p, extra)
    usage = "# use: bazel build <your configs> --config=%s%s TARGET   (%s)" % (
        p.name, "" if p.kind == "debug-info" else "  # with a debug-info preset before it", ORDER_RULE)
    return "\n".join(block + lines + [usage]) + "\n"


def _match_lines(check: TargetedCheck) -> List[str]:
    lines = []
    for r, m in check.matches.items():
        shown = ", ".join(m[:5]) + (" (+%d more)" % (len(m) - 5) if len(m) > 5 else "")
        lines.append("# %r (unanchored) selects %d file(s)%s" % (r, len(m), ": " + shown if m else ""))
    for n in check.notes:
        lines.append("# note: " + n)
    return lines


def _targeted_lines(check: TargetedCheck) -> List[str]:
    return ["build:tfn_targeted %s" % check.flag] + _match_lines(check)
