"""Whether a file on this host is the one a crashed process mapped, from what its core recorded.

In this order, the first that the core allows:

1. the build-id: the ``NT_GNU_BUILD_ID`` note in the core's copy of the
   file's first page (the default ``coredump_filter`` keeps the first page of
   every ELF mapping) against the file's own;
2. for a file without a build-id (many wheels' ``.so``): the ELF header and
   program headers in that copy against the file's (any rebuild that moves a
   segment or changes its size changes them);
3. without that copy: the size: the file must hold every page the process
   mapped from it (``NT_FILE``: offset and extent of each mapping).

Reads only what the core itself holds, never the file in the core's stead.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from ..core.binary.elf import ElfError, Segment, elf_header, note_build_id, program_headers, read_build_id
from ..core.binary.mapfile import FileUnusable, read_head
from .reader import PT_NOTE, Core, Mapping

PAGE = 4096
MAX_PHNUM = 64


def _headers(core: Core, start: int) -> Optional[Tuple[bytes, List[Segment]]]:
    """The ELF header and program header table of the file mapped at ``start`` as the core holds them, and
    its program headers."""
    head = core.dumped(start, 64)
    try:
        hdr = elf_header(head or b"", "the core's copy")
    except ElfError:
        return None
    if not hdr.is64 or hdr.phnum > MAX_PHNUM or hdr.phentsize < 56 or hdr.phoff != 64:
        return None
    table = core.dumped(start + hdr.phoff, hdr.phentsize * hdr.phnum)
    if table is None or head is None:
        return None
    try:
        return head + table, program_headers(head + table, hdr, "the core's copy")
    except ElfError:
        return None


def build_id_in_core(core: Core, start: int) -> Optional[str]:
    """The build-id of the ELF file mapped at ``start``, from the core's copy of its first page."""
    headers = _headers(core, start)
    if headers is None:
        return None
    endian = "<" if headers[0][5] == 1 else ">"
    for seg in headers[1]:
        if seg.type != PT_NOTE or seg.offset + seg.filesz > PAGE:
            continue
        found = note_build_id(core.dumped(start + seg.offset, seg.filesz) or b"", endian)
        if found is not None:
            return found
    return None


def mismatch(core: Core, mappings: List[Mapping], host: str) -> Optional[str]:
    """Why ``host`` is not the file the process mapped as ``mappings`` (None: no sign that it differs).

    The phrase fits "PATH: <phrase>: not the file the process ran".
    """
    first = next((m.start for m in mappings if m.offset == 0), None)
    want = build_id_in_core(core, first) if first is not None else None
    if want is not None:
        try:
            have = read_build_id(host)
        except FileUnusable as exc:
            return "cannot be read (%s)" % exc.reason
        except ElfError:
            return "not an ELF file that can be read"
        return None if have == want else "build-id %s, the core's is %s" % (have, want)
    both = _headers(core, first) if first is not None else None
    if both is not None:
        headers = both[0]
        try:
            mine = read_head(host, len(headers))
        except FileUnusable as exc:
            return "cannot be read (%s)" % exc.reason
        if mine != headers:
            return "no build-id, and its ELF and program headers differ from the core's copy"
        return None
    try:
        size = os.stat(host).st_size
    except OSError as exc:
        return "cannot be read (%s)" % (exc.strerror or exc)
    extent = max(m.offset + m.end - m.start for m in mappings)
    if extent > (size + PAGE - 1) // PAGE * PAGE:
        return "no build-id, and %d bytes where the process mapped %d" % (size, extent)
    return None
