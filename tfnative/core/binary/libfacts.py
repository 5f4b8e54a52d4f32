"""What one library file says about itself: whom it links (an op library links TensorFlow's framework), how
it was built (Bazel or a plain compiler command), whether gdb gets file:line for it, its symbols, build-id and
separate debug file.  Read from the file only (its section headers, ``.dynamic``, ``.comment``, ``.symtab``'s
file symbols; DWARF through ``dwarfcover``), bounded, and cached per file (path, size, mtime, inode).

Used by the analysis (is a frame's library the user's own, and has it debug info: ``analysis/userlibs.py``)
and by ``tfnative doctor --pid`` (the op libraries a process loads).
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from dataclasses import dataclass, field
from functools import partial
from typing import Dict, List, Optional

from .. import frameclass
from ..record import Record
from . import dwarfcover
from .elf import ElfError, ElfFile
from .filecache import FileCache
from .mapfile import map_file

SHT_SYMTAB = 2
SHT_DYNAMIC = 6
DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 14, 15, 29
STT_FILE = 4
MAX_DYNAMIC = 4096  # .dynamic entries read
MAX_SYMBOLS = 1 << 20  # .symtab entries looked at for file symbols
MAX_SCAN = 256 << 20  # a file larger than this is not searched for Bazel's output tree
# TensorFlow's libraries an op library links (tf.sysconfig.get_link_flags: -l:libtensorflow_framework.so.2)
_TF_LINKED_RE = re.compile(r"^lib(tensorflow_framework|tensorflow_cc|tensorflow)\.so(\.\d+)*$")
_SOURCE_RE = re.compile(r"\.(cc|cpp|cxx|c\+\+|cu|c)$")


@dataclass(repr=False, eq=False)
class LibraryFacts(Record):
    """What ``facts(path)`` read; ``readable`` False: the file was not there or no ELF file (nothing known)."""

    path: str
    readable: bool = True
    needed: List[str] = field(default_factory=list)  # DT_NEEDED
    runpath: List[str] = field(default_factory=list)  # DT_RUNPATH / DT_RPATH entries
    links_tensorflow: bool = False  # an op library: links libtensorflow_framework (or _cc)
    bazel: bool = False  # built by Bazel: its runpath names Bazel's _solib_ tree, or it names bazel-out/
    compiler: Optional[str] = None  # "g++" | "clang++", from .comment
    symtab: bool = False
    build_id: Optional[str] = None
    lines: bool = False  # gdb gives file:line: its own DWARF describes its code, or its debug file's does
    debug_file: Optional[str] = None  # the separate debug file gdb would read
    sources: List[str] = field(default_factory=list)  # C/C++ sources named by .symtab's file symbols

    def to_json(self) -> Dict[str, object]:
        return {"path": self.path, "op_library": self.links_tensorflow, "dwarf": self.lines,
                "symtab": self.symtab, "build_id": self.build_id, "debug_file": self.debug_file,
                "built_by": "bazel" if self.bazel else self.compiler, "sources": self.sources}


def _dynamic(elf: ElfFile, mm: mmap.mmap, out: LibraryFacts) -> None:
    dyn = next((s for s in elf.sections if s.type == SHT_DYNAMIC), None)
    if dyn is None or not 0 < dyn.link < len(elf.sections):
        return
    strtab = elf.sections[dyn.link]
    fmt = elf.endian + ("qQ" if elf.is64 else "iI")
    size = struct.calcsize(fmt)
    for i in range(min(dyn.size // size, MAX_DYNAMIC)):
        tag, val = struct.unpack_from(fmt, mm, dyn.offset + i * size)
        if tag == 0:
            break
        if tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH) and val < strtab.size:
            text = elf.cstr(strtab.offset + val).decode("utf-8", "replace")
            if tag == DT_NEEDED:
                out.needed.append(text)
            elif tag in (DT_RPATH, DT_RUNPATH):
                out.runpath.extend(p for p in text.split(":") if p)


def _file_symbols(elf: ElfFile, mm: mmap.mmap, out: LibraryFacts) -> None:
    symtab = next((s for s in elf.sections if s.type == SHT_SYMTAB), None)
    out.symtab = symtab is not None and symtab.size > 0
    if symtab is None or not 0 < symtab.link < len(elf.sections) or not symtab.entsize:
        return
    strtab = elf.sections[symtab.link]
    info_at = 4 if elf.is64 else 12
    for i in range(min(symtab.size // symtab.entsize, MAX_SYMBOLS)):
        at = symtab.offset + i * symtab.entsize
        name, = struct.unpack_from(elf.endian + "I", mm, at)
        info = mm[at + info_at]
        if info & 0xF == STT_FILE and name < strtab.size:
            text = elf.cstr(strtab.offset + name).decode("utf-8", "replace")
            if _SOURCE_RE.search(text) and text not in out.sources and not text.startswith(("crt", "/")):
                out.sources.append(text)


def read(path: str) -> LibraryFacts:
    """The facts of one file, uncached.  Raises OSError, ElfError."""
    out = LibraryFacts(path)
    mm = map_file(path)
    try:
        try:
            elf = ElfFile(mm, path)
            _dynamic(elf, mm, out)
            _file_symbols(elf, mm, out)
        except (struct.error, IndexError) as exc:
            raise ElfError("%s: %s" % (path, exc)) from None
        comment = next((s for s in elf.sections if s.name == ".comment"), None)
        if comment is not None and comment.offset + comment.size <= len(mm):
            text = bytes(mm[comment.offset:comment.offset + min(comment.size, 4096)])
            out.compiler = "clang++" if b"clang version" in text else "g++" if b"GCC:" in text else None
        out.bazel = any("_solib_" in p for p in out.runpath) or (
            len(mm) <= MAX_SCAN and mm.find(b"bazel-out/") >= 0)
    finally:
        try:
            mm.close()
        except BufferError:
            pass
    out.links_tensorflow = any(_TF_LINKED_RE.match(os.path.basename(n)) for n in out.needed)
    cov = dwarfcover.cover(path)
    out.build_id = cov.build_id
    out.debug_file = cov.debug_file()
    out.lines = dwarfcover.gdb_gives_lines(path)
    return out


TF_FLAGS = ("$(python -c 'import tensorflow as tf; print(\" \".join(tf.sysconfig.get_compile_flags()"
            " + tf.sysconfig.get_link_flags()))')")


def rebuild_advice(facts: LibraryFacts) -> str:
    """The rebuild that gives the library debug info: Bazel's preset, or -g on the compiler's command."""
    name = os.path.basename(facts.path)
    source = facts.sources[0] if facts.sources else None
    if facts.bazel:
        if facts.sources:
            files = " ".join("--files '%s'" % os.path.splitext(os.path.basename(s))[0] for s in facts.sources[:3])
            return ("tfnative bazelrc tfn_targeted %s >> .bazelrc, then bazel build --config=tfn_targeted "
                    "<its target>" % files)
        return "tfnative bazelrc >> .bazelrc, then bazel build --config=tfn_symbols <its target>"
    source = source or ("YOUR_KERNEL.cc" if facts.links_tensorflow else "YOUR_SOURCE.cc")
    compiler = facts.compiler or "g++"
    if source.endswith(".c"):  # a C library (a ctypes one): the C driver, no C++ standard
        return "%s -shared -fPIC -g -O1 %s -o %s" % ("clang" if compiler == "clang++" else "gcc", source, name)
    flags = " " + TF_FLAGS if facts.links_tensorflow else ""
    return "%s -std=c++17 -shared -fPIC -g -O1 %s%s -o %s" % (compiler, source, flags, name)


_FACTS: FileCache[LibraryFacts] = FileCache(256)
_LINKS: FileCache[bool] = FileCache(256)


def links_tensorflow(path: str) -> bool:
    """Whether the file at ``path`` is an op library (its DT_NEEDED names TensorFlow's framework library):
    the dynamic section alone is read, once per file; a file that cannot be read does not."""
    return _LINKS.get(path, lambda: _links_tensorflow(path), lambda: False)


def _links_tensorflow(path: str) -> bool:
    out = LibraryFacts(path)
    try:
        mm = map_file(path)
        try:
            _dynamic(ElfFile(mm, path, sections=True), mm, out)
        finally:
            try:
                mm.close()
            except BufferError:
                pass
    except (OSError, ElfError, ValueError, struct.error, IndexError):
        pass
    return any(_TF_LINKED_RE.match(os.path.basename(n)) for n in out.needed)


def facts(path: str) -> LibraryFacts:
    """``read(path)`` once per file; a file that cannot be read gives ``readable=False``."""
    def read_or_unreadable() -> LibraryFacts:
        try:
            return read(path)
        except (OSError, ElfError, ValueError):
            return LibraryFacts(path, readable=False)

    return _FACTS.get(path, read_or_unreadable, lambda: LibraryFacts(path, readable=False))


def library_classes(libraries: Dict[str, str]) -> Dict[str, str]:
    """The class of each library whose path decides it (``frameclass.library_class``, with the interpreter's
    prefixes from ``libraries`` and the op-library fact read here), by its name: what the analysis and gdb's
    ``tf-bt`` give each native frame.  ``libraries``: a capture's (a library's name -> its path)."""
    prefixes = frameclass.interpreter_prefixes(libraries.values())
    out: Dict[str, str] = {}
    for name, path in libraries.items():
        cls = frameclass.library_class(path, partial(links_tensorflow, path), prefixes)
        if cls is not None:
            out[name] = cls
    return out
