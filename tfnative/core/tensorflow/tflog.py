"""TensorFlow's own fatal log line (``F... file.cc:N] Check failed: ...``), read from a stopped process's memory.

A ``CHECK`` failure in TensorFlow logs one line through absl and aborts.  That
line is the most useful sentence of a bug report, and it went to the script's
stderr, which tfnative leaves alone (a terminal stays a terminal).  At the
SIGABRT the message is still in memory, reachable from the aborting thread's
stack: absl's ``LogMessage`` keeps it encoded (protobuf wire format: field 2
the source file, 3 the line, then field-7 values whose string leaves are the
text), and a formatted line (``F... file.cc:N] text``) may be there too.  This
module looks for either: the stack words above the stack pointer, then the
memory they point to, then the stack just below the pointer, all bounded.
Where TensorFlow logs through its own tsl logger instead of absl (as 2.18
does), only the formatted line is in memory
(``2026-11-25 13:22:13.876844: F file.cc:N] text``), in the buffer glibc's
``fprintf`` to unbuffered stderr used below the aborting frame; its
``file.cc:N] text`` is taken.  Nothing beyond these forms is taken.
"""

from __future__ import annotations

import re
import struct
from typing import Callable, List, Optional, Tuple

from ..memory import USER_SPACE_END

STACK_BYTES = 64 * 1024
# Below the stack pointer: what the calls just returned from left there.  tsl formats its line with
# ``fprintf(stderr, ...)``, which glibc writes through an 8 KiB buffer on the stack of the logging thread
# (stderr is unbuffered); the abort comes right after, from a shallower frame, so the line is still there.
BELOW_SP_BYTES = 32 * 1024
POINTED_BYTES = 4096
MAX_POINTERS = 1024
# absl's prefix: severity, MMDD, time, thread id, file:line]
_ENCODED = re.compile(rb"\x12([\x01-\x7f])([\w./+-]{1,127}\.(?:cc|h|cpp|cu|c))\x18")
_LINE = re.compile(rb"[FE]\d{4} [\d:.]{8,32} +\d+ [\w./-]+:\d+\] [^\x00\n]{1,2000}")
# TensorFlow's own (tsl) log line, where absl does not log for it (TF 2.16-2.20):
# ``2026-11-25 13:22:13.876844: F tensorflow/core/framework/tensor_shape.cc:357] Check failed: ...``
_TSL_LINE = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{1,9}: F ([\w./+-]+:\d+\] [^\x00\n]{1,2000})")

Read = Callable[[int, int], bytes]


def _read(read: Read, addr: int, size: int) -> bytes:
    """As much of [addr, addr+size) as is readable, page by page (b"" when none)."""
    out = bytearray()
    while size > 0:
        chunk = min(size, 4096 - addr % 4096)
        try:
            out += read(addr, chunk)
        except (MemoryError, OSError, ValueError):
            break
        addr += chunk
        size -= chunk
    return bytes(out)


def _read_below(read: Read, sp: int, size: int) -> bytes:
    """The readable pages of [sp-size, sp) that run up to ``sp`` without a gap (b"" when none)."""
    out = bytearray()
    addr = sp - size
    while addr < sp:
        chunk = min(sp - addr, 4096 - addr % 4096)
        try:
            data = read(addr, chunk)
        except (MemoryError, OSError, ValueError):
            data = None
        if data is None or len(data) != chunk:
            out.clear()  # a gap: only what touches sp is kept
        else:
            out += data
        addr += chunk
    return bytes(out)


def _varint(buf: bytes, i: int) -> Tuple[int, int]:
    value = shift = 0
    while i < len(buf) and shift < 64:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
    raise ValueError("truncated varint")


def _strings(buf: bytes, depth: int = 0) -> List[bytes]:
    """The string leaves of a protobuf message, in order (nested messages tried first)."""
    out: List[bytes] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            _, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated field")
            item = buf[i:i + n]
            i += n
            try:
                out.extend(_strings(item, depth + 1) if depth < 2 and (key >> 3) == 7 else [item])
            except ValueError:
                out.append(item)
        else:
            raise ValueError("unexpected wire type")
    return out


def _decoded(chunk: bytes) -> Optional[str]:
    """``file:line] text`` of an absl-encoded log message in ``chunk``, or None."""
    for m in _ENCODED.finditer(chunk):
        if len(m.group(2)) != m.group(1)[0]:
            continue
        text: List[bytes] = []
        try:
            line, i = _varint(chunk, m.end())
            while i < len(chunk):
                key, i = _varint(chunk, i)
                if key >> 3 == 0:
                    break  # field 0 does not exist: the message has ended
                if key & 7 == 0:
                    _, i = _varint(chunk, i)
                    continue
                if key != (7 << 3 | 2):
                    break
                n, i = _varint(chunk, i)
                text += _strings(chunk[i:i + n])
                i += n
        except ValueError:
            if not text:
                continue
        message = b"".join(text).decode("utf-8", "replace").strip()
        if message and all(c.isprintable() for c in message):
            return "%s:%d] %s" % (m.group(2).decode(), line, message)
    return None


def fatal_line(read: Read, sp: int) -> Optional[str]:
    """The fatal log message found from the stack at ``sp``: ``file:line] text`` or absl's formatted line."""
    stack = _read(read, sp, STACK_BYTES)
    chunks = [stack]
    seen = set()
    for (word,) in struct.iter_unpack("<Q", stack[: len(stack) // 8 * 8]):
        if word in seen or word % 8 or not 0x10000 <= word < USER_SPACE_END or sp <= word < sp + len(stack):
            continue
        seen.add(word)
        if len(seen) > MAX_POINTERS:
            break
        chunks.append(_read(read, word, POINTED_BYTES))
    if sp >= 0x10000 + BELOW_SP_BYTES:
        chunks.append(_read_below(read, sp, BELOW_SP_BYTES))
    for chunk in chunks:
        found: List[bytes] = [m for m in _LINE.findall(chunk) if m.startswith(b"F")]
        if found:
            return found[-1].decode("utf-8", "replace").rstrip()
        decoded = _decoded(chunk)
        if decoded:
            return decoded
        tsl: List[bytes] = _TSL_LINE.findall(chunk)
        if tsl:
            return tsl[-1].decode("utf-8", "replace").rstrip()
    return None
