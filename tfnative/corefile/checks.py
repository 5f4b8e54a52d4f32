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
import struct
from typing import List, Optional

from ..core.elfindex import ElfError, read_build_id
from ..core.mapfile import Unreadable, read_head
from .reader import PT_NOTE, Core, Mapping

NT_GNU_BUILD_ID = 3
PAGE = 4096
MAX_PHNUM = 64


def _headers(core: Core, start: int) -> Optional[bytes]:
    """The ELF header and program header table of the file mapped at ``start``, as the core holds them."""
    head = core.dumped(start, 64)
    if head is None or head[:4] != b"\x7fELF":
        return None
    phoff, = struct.unpack_from("<Q", head, 32)
    phentsize, phnum = struct.unpack_from("<HH", head, 54)
    if phnum > MAX_PHNUM or phentsize < 56:
        return None
    table = core.dumped(start + phoff, phentsize * phnum)
    return head + table if table is not None and phoff == 64 else None


def build_id_in_core(core: Core, start: int) -> Optional[str]:
    """The build-id of the ELF file mapped at ``start``, from the core's copy of its first page."""
    headers = _headers(core, start)
    if headers is None:
        return None
    phentsize, phnum = struct.unpack_from("<HH", headers, 54)
    for i in range(phnum):
        p_type, _f, p_offset, _v, _p, p_filesz = struct.unpack_from("<IIQQQQ", headers, 64 + i * phentsize)
        if p_type != PT_NOTE or p_offset + p_filesz > PAGE:
            continue
        buf = core.dumped(start + p_offset, p_filesz) or b""
        off = 0
        while off + 12 <= len(buf):
            namesz, descsz, ntype = struct.unpack_from("<III", buf, off)
            desc = off + 12 + ((namesz + 3) & ~3)
            if ntype == NT_GNU_BUILD_ID and buf[off + 12:off + 16] == b"GNU\0":
                return buf[desc:desc + descsz].hex()
            off = desc + ((descsz + 3) & ~3)
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
        except Unreadable as exc:
            return "cannot be read (%s)" % exc.reason
        except ElfError:
            return "not an ELF file that can be read"
        return None if have == want else "build-id %s, the core's is %s" % (have, want)
    headers = _headers(core, first) if first is not None else None
    if headers is not None:
        try:
            mine = read_head(host, len(headers))
        except Unreadable as exc:
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
