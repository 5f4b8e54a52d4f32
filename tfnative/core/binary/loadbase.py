"""Where a library is loaded in a process: its load bias (``/proc/PID/maps`` and the file's first ``PT_LOAD``),
and the files a process maps."""

from __future__ import annotations

import os
from typing import List

from .. import procfs
from .elf import ElfFile
from .mapfile import map_file


def load_base(pid: int, path: str) -> int:
    """Load bias of ``path`` in process ``pid``: run-time address = file vaddr + load_base.

    Found in ``/proc/PID/maps`` as the start of the private mapping at file
    offset 0 (matched by inode and device, else by real path) minus the first
    PT_LOAD's page-aligned vaddr.  This is the OFFSET of
    ``add-symbol-file FILE -o OFFSET``.  Shared mappings (someone's mmap of
    the file, ElfIndex's own included) are not the loader's and are skipped.
    Raises LookupError when the library is not mapped.
    """
    st = os.stat(path)
    real = os.path.realpath(path)
    start = None
    for lo, _hi, perms, off, dev, inode, name in procfs.maps(pid):
        if off != 0 or not perms.endswith("p"):
            continue
        major, minor = (int(x, 16) for x in dev.split(":"))
        same_file = inode == st.st_ino and inode != 0 and os.makedev(major, minor) == st.st_dev
        if same_file or (name and name == real):
            start = lo
            break
    if start is None:
        raise LookupError(f"{path} is not mapped in process {pid}")
    with map_file(path) as mm:
        first = ElfFile(mm, path).first_load_vaddr()
    return start - first


def mapped_libraries(pid: int) -> List[str]:
    """Paths of the files mapped at offset 0 in process ``pid`` (from /proc/PID/maps), in map order."""
    seen: List[str] = []
    for _lo, _hi, perms, off, _dev, inode, name in procfs.maps(pid):
        if off == 0 and perms.endswith("p") and inode and name.startswith("/") and name not in seen:
            seen.append(name)
    return seen
