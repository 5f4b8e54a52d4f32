"""A core through gdb: ``file:line`` and inlined frames where a library has DWARF, without the full load.

gdb opens the core with ``set auto-solib-add off`` (no library's symbols are
read by themselves) and gets symbols only for the libraries that the
threads' pcs and stacks point into (``-tfnative-stack-code``), each with
``add-symbol-file HOST -o BIAS`` from the file ``corefile/source.py`` checked
(so ``--sysroot``, the venv rule and the build-id check hold for gdb too);
a huge library without DWARF (TensorFlow's) gets its CFI-only surrogate
(``surrogate.py``) and its frames are named from our symbol index.  Then
the same ``-tfnative-capture`` as ``stack --with-gdb``.

This is what ``tfnative core --with-gdb`` does, and what ``tfnative core``
does by itself where its own unwinder steps aside (a library on a stack has
DWARF: gdb gives its source lines).
"""

from __future__ import annotations

import json
import os
from typing import List, TextIO, Tuple

from ..core.binary.elf import ElfError, ElfFile
from ..core.binary.mapfile import map_file
from ..core.binary.symindex import ElfIndex
from ..core.model import Capture
from ..core.threads import Threads
from ..errors import GdbDied, GdbError, TfnativeError
from ..gdb import ops as tfops
from ..gdb.control import CAPTURE_TIMEOUT, capture, start_gdb
from ..gdb.options import GdbOptions
from ..gdb.surrogate import build_surrogate
from ..gdb.symbols import HUGE_BYTES, IndexedLibrary, SymbolLoader, wants_surrogate
from .source import CoreSource


def _first_vaddr(path: str) -> int:
    with map_file(path) as mm:
        return ElfFile(mm, path, sections=False).first_load_vaddr()


def _gdb_path(text: str) -> str:
    """A file name for a gdb console command; names gdb cannot take as they are are refused."""
    if any(c in text for c in "\n\r\"'\\ "):
        raise TfnativeError("%s: a path with blanks or quotes cannot be handed to gdb; copy the file elsewhere"
                            % text)
    return text


def stacks_with_gdb(source: CoreSource, which: Threads, opts: GdbOptions, err: TextIO) -> Capture:
    """``snapshot.stacks``'s result for every thread of the core of ``source``, taken by gdb (``"via":
    "gdb"``); ``source.finish`` keeps the threads asked for."""
    core = source.core
    notes = core.notes
    gdb = start_gdb(opts)
    try:
        if source.executable:
            gdb.console_command("file %s" % _gdb_path(source.executable), timeout=CAPTURE_TIMEOUT)
        gdb.console_command("core-file %s" % _gdb_path(core.file_path), timeout=CAPTURE_TIMEOUT)
        # the libraries a stack meets: the code ranges that the pcs and stack words point into
        libs: List[Tuple[str, int, List[Tuple[int, int]]]] = []  # (host path, load bias, code ranges)
        for m in notes.files:
            host = source.host_of(m.path)
            if m.offset == 0 and host and host != source.executable:
                try:
                    bias = m.start - _first_vaddr(host)
                except (OSError, ElfError, ValueError):
                    continue
                libs.append((host, bias, [(x.start, x.end) for x in notes.files
                                          if x.path == m.path and x.executable]))
        code = [(i, r) for i, (_h, _b, ranges) in enumerate(libs) for r in ranges]
        stacks = []
        for t in notes.threads:
            span = core.mapping_of(t.regs.get("rsp", 0))
            if span is not None:
                stacks.append((t.regs["rsp"], span[1]))
        args = ["c:%x:%x" % r for _i, r in code] + ["s:%x:%x" % s for s in stacks]
        try:
            hit = json.loads(gdb.command("-tfnative-stack-code " + " ".join(args), timeout=CAPTURE_TIMEOUT)["json"])
            wanted = {code[k][0] for k in hit}
        except (GdbError, KeyError, ValueError):
            wanted = set(range(len(libs)))
        loader = SymbolLoader(gdb, notes.pid or 0, [], False, err)  # names surrogate libraries' frames
        for i, (host, bias, _ranges) in enumerate(libs):
            if i not in wanted and "libpython" not in os.path.basename(host):
                continue
            path = host
            if os.path.getsize(host) >= HUGE_BYTES and wants_surrogate(host):
                try:
                    path = build_surrogate(host)
                    loader.indexed[os.path.basename(host)] = IndexedLibrary(host, bias, ElfIndex.open(host),
                                                                            os.path.getsize(host))
                except (ElfError, OSError, ValueError) as exc:
                    err.write("tfnative: warning: fast symbols unavailable for %s (%s)\n" % (host, exc))
                    continue
            try:
                gdb.console_command("add-symbol-file %s -o 0x%x" % (_gdb_path(path), bias), timeout=CAPTURE_TIMEOUT)
            except GdbError as exc:
                err.write("tfnative: warning: gdb refused the symbols of %s (%s)\n" % (host, exc))
        # every thread: the crashed one is kept even when it runs no Python
        result = capture(gdb, True, variables=source.variables)
        # a library the program named by a relative path (``tf.load_op_library("./op.so")``): gdb names it so;
        # the core's file notes have the path the kernel mapped
        seen = {os.path.basename(m.path): m.path for m in notes.files if m.path.startswith("/")}
        result.libraries = {name: path if path.startswith("/") else seen.get(name, path)
                            for name, path in result.libraries.items()}
        loader.symbolize(result)
        tfops.annotate(gdb, result)
        result.via = "gdb"
        return result
    except GdbDied:
        raise TfnativeError("gdb exited unexpectedly while reading %s" % core.path, exit_code=3) from None
    finally:
        gdb.close()

