"""The link map's names for the libraries a snapshot maps, and the Python runtime found among them
(``snapshot/pipeline.py``'s part before the unwind).
"""

from __future__ import annotations

import os
import struct
from typing import List, Optional

from ..core import frameclass
from ..core.binary.datasyms import data_symbols
from ..core.binary.elf import ElfError
from ..core.memory import Memory
from ..core.python.pyframes import NO_RUNTIME, PythonReader, open_reader
from ..sources.modules import Library, segments, shared
from .naming import named_as

PY_SYMBOLS = ("_PyRuntime", "Py_Version", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type")


def link_map_names(memory: Memory, libs: List[Library], exe: Optional[str]) -> None:
    """Name each library as the dynamic loader (and gdb) does: by its ``link_map`` path.

    ``/proc/PID/maps`` shows the file behind the link (``libstdc++.so.6.0.30``);
    the loader's list has the name it was loaded by (``libstdc++.so.6``).  The
    list is found through the executable's (``exe``, its path on this host)
    ``DT_DEBUG`` entry (``r_debug``).
    """
    if exe is None:
        return
    main = next((lib for lib in libs if lib.path == exe), None)
    if main is None:
        return
    try:
        dynamic = next(vaddr for p_type, vaddr in segments(exe) if p_type == 2)  # PT_DYNAMIC
        addr = dynamic + main.bias
        r_debug = 0
        for _ in range(512):
            tag, value = struct.unpack("<qQ", memory.read(addr, 16))
            if tag == 0:
                break
            if tag == 21:  # DT_DEBUG
                r_debug = value
                break
            addr += 16
        if not r_debug:
            return
        by_bias = {lib.bias: lib for lib in libs}
        link = struct.unpack("<Q", memory.read(r_debug + 8, 8))[0]
        for _ in range(4096):
            if not link:
                break
            l_addr, l_name, _l_ld, l_next = struct.unpack("<QQQQ", memory.read(link, 32))
            lib = by_bias.get(l_addr)
            if lib is not None and l_name and lib is not main:
                raw = memory.read(l_name, 512)
                name = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
                if name:
                    lib.name = os.path.basename(name)
            link = l_next
    except (OSError, MemoryError, StopIteration, struct.error):
        return


def python_reader(memory: Memory, libs: List[Library], warnings: List[str]) -> Optional[PythonReader]:
    """The reader of the interpreter whose file (executable or libpython) defines ``_PyRuntime``."""
    for lib in libs:
        if not frameclass.may_hold_interpreter(lib.name):
            continue
        try:
            syms = shared(lib.path, "pysyms", lambda path: data_symbols(path, PY_SYMBOLS))
        except (OSError, ElfError, ValueError):
            continue
        if "_PyRuntime" not in syms:
            continue
        at = {k: v + lib.bias for k, v in syms.items()}
        reader, why = open_reader(memory, at.get, named_as(lib.name))
        if reader is None:
            warnings.append(why or "no Python runtime in %s" % lib.name)
        return reader
    warnings.append(NO_RUNTIME)
    return None
