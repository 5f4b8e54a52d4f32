"""A resource input of the crashing kernel (issue #45): the ``ResourceHandle`` a ``DT_RESOURCE`` tensor holds and,
for a variable, the value of the variable it points to, read from memory.

Nothing here comes from a table of TensorFlow versions; each object is found in the memory in front of us and
checked before it is trusted.  What TensorFlow's headers say (``resource_handle.h``, ``resource_var.h``, TF 2.16
to 2.22):

* **the handle**: a scalar ``DT_RESOURCE`` tensor's buffer holds one ``ResourceHandle``: ``std::string device_,
  container_, name_``, ``uint64 hash_code_``, ``std::string maybe_type_name_`` (the resource's C++ type as
  ``typeid`` names it: ``N10tensorflow3VarE`` for a variable), ``std::vector<DtypeAndPartialTensorShape>
  dtypes_and_shapes_`` (32 bytes each: a ``DataType``, then a ``PartialTensorShape``), then, in TF 2.x's eager
  handles, ``core::IntrusivePtr<ResourceBase> resource_``: the resource itself.  libstdc++'s ``std::string`` is
  ``{char* data, size_t size, union {size_t capacity; char local[16]}}``, ``data`` pointing into itself for a
  short one: three such strings in a row start the handle, a fourth after one word is the type name, and the
  vector after it is three pointers ``begin <= end <= capacity`` over whole elements, each of a known
  ``DataType``.
* **the variable** (``Var``, a ``ResourceBase``: vptr, reference count, ...): its ``Tensor tensor_`` is among its
  first words.  The resource is a word after the vector that points to an object with a vtable and a
  reference count, holding a tensor (``kernelinputs.InputsReader.tensor``'s checks) of the handle's dtype whose
  shape the handle's (partial) shape admits; the type name must be a ``Var``'s.

A handle that fails a check says why (``{"unread": reason}``); a resource that is not a variable (a queue, a
table, an iterator), or whose handle holds no pointer to it, is named with the reason it has no value here.
Every walk is bounded.  Standard library only: this also runs inside gdb's Python.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Protocol, Tuple, Type

from ..memory import aligned_pointer

VAR_TYPE = "N10tensorflow3VarE"  # typeid(tensorflow::Var).name(): a C++ type's name, not a version's
HANDLE_WORDS = 40  # a ResourceHandle is about 200 bytes; its fields are looked for in these words
STRING_MAX = 4096  # a device, container, name or type name longer than this is not one
MAX_SHAPES = 16  # dtypes_and_shapes_: a variable has one; a longer vector is not one
RESOURCE_WORDS = 8  # where resource_ may be, after dtypes_and_shapes_
VAR_WORDS = 16  # where tensor_ may be in a Var
_ELEMENT = 32  # sizeof(DtypeAndPartialTensorShape)


class Reader(Protocol):
    """What ``kernelinputs.InputsReader`` gives: words, bytes and a checked tensor; each raises its ``Unread``."""

    def words(self, addr: int, count: int) -> Tuple[int, ...]: ...

    def bytes_at(self, addr: int, size: int) -> bytes: ...

    def tensor(self, addr: int, want: Optional[int] = None, values: bool = False) -> Dict[str, Any]: ...


def read_resource(reader: Reader, handle: int, unread: Type[Exception]) -> Dict[str, Any]:
    """``{"device", "container", "name", "type", "variable"?: {"dtype", "shape", "values"...}, "unread"?}`` of the
    ``ResourceHandle`` at ``handle``; ``unread`` is the reader's failure (raised here where the handle itself fails
    a check).  ``unread`` in the answer: why the resource has no value here (not a variable, not reachable)."""
    words = reader.words(handle, HANDLE_WORDS)
    strings: List[str] = []
    at = 0
    while at + 4 <= HANDLE_WORDS and len(strings) < 3:
        text = _string(reader, handle, words, at, unread)
        if text is None:
            if strings:
                raise unread("no ResourceHandle: %d strings where it starts with 3" % len(strings))
            at += 1
            continue
        strings.append(text)
        at += 4
    if len(strings) < 3:
        raise unread("no ResourceHandle: no device, container and name strings")
    type_name = _string(reader, handle, words, at + 1, unread) if at + 5 <= HANDLE_WORDS else None
    if type_name is None:
        raise unread("no ResourceHandle: no type name after its name and hash")
    out: Dict[str, Any] = {"device": strings[0], "container": strings[1], "name": strings[2], "type": type_name}
    shapes, after = _dtypes_and_shapes(reader, words, at + 5, unread)
    if type_name != VAR_TYPE:
        out["unread"] = "a %s, not a variable (tfnative rebuilds variables alone)" % type_label(type_name)
        return out
    if len(shapes) != 1:
        out["unread"] = "its handle gives %d dtypes and shapes, where a variable's gives 1" % len(shapes)
        return out
    dtype, shape = shapes[0]
    try:
        found = _variable(reader, words[after: after + RESOURCE_WORDS], dtype, shape, unread)
    except unread as exc:
        found = "its variable's value was not read: %s" % exc
    if isinstance(found, str):
        out["unread"] = found
    else:
        out["variable"] = found
    return out


def type_label(mangled: str) -> str:
    """A ``typeid`` name as C++ writes the type: ``N10tensorflow6lookup15LookupInterfaceE`` ->
    ``tensorflow::lookup::LookupInterface``; an empty one or one of another form as it is."""
    inner = mangled[1:-1] if mangled.startswith("N") and mangled.endswith("E") else mangled
    parts: List[str] = []
    at = 0
    while at < len(inner) and len(parts) < 16:
        digits = at
        while digits < len(inner) and inner[digits].isdigit():
            digits += 1
        if digits == at or digits + int(inner[at:digits]) > len(inner):
            return mangled or "resource of no type name"
        parts.append(inner[digits: digits + int(inner[at:digits])])
        at = digits + int(inner[at:digits])
    return "::".join(parts) if parts and at == len(inner) else mangled or "resource of no type name"


def _string(reader: Reader, base: int, words: Tuple[int, ...], at: int, unread: Type[Exception]) -> Optional[str]:
    """The libstdc++ ``std::string`` at word ``at`` of the object at ``base``, None where it is not one."""
    data, size, cap = words[at], words[at + 1], words[at + 2]
    local = base + 8 * (at + 2)
    if size > STRING_MAX or not (data == local and size < 16 or aligned_pointer(data) and data != local and
                                 size <= cap <= STRING_MAX * 4 and cap >= 16):
        return None
    if data == local:
        raw = struct.pack("<2Q", words[at + 2], words[at + 3])[:size]
    else:
        try:
            raw = reader.bytes_at(data, size) if size else b""
        except unread:
            return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


def _dtypes_and_shapes(reader: Reader, words: Tuple[int, ...], at: int, unread: Type[Exception]
                       ) -> Tuple[List[Tuple[int, Optional[List[int]]]], int]:
    """The handle's ``dtypes_and_shapes_`` (each dtype and shape: None for an unknown rank, -1 for an unknown
    dimension) from word ``at`` on, and the word after the vector; raises ``unread``."""
    if at + 3 > len(words):
        raise unread("no ResourceHandle: no dtypes and shapes after its type name")
    begin, end, cap = words[at: at + 3]
    if not (begin == end == cap == 0 or aligned_pointer(begin) and begin <= end <= cap and (end - begin) % _ELEMENT == 0
            and (cap - begin) % _ELEMENT == 0 and (end - begin) // _ELEMENT <= MAX_SHAPES):
        raise unread("no ResourceHandle: no vector of dtypes and shapes after its type name")
    out = []
    for k in range((end - begin) // _ELEMENT):
        raw = reader.bytes_at(begin + _ELEMENT * k, _ELEMENT)
        dtype = struct.unpack_from("<i", raw)[0]
        shape = _partial_shape(raw[8:24], struct.unpack_from("<q", raw, 24)[0], unread)
        if not 0 < dtype < 100:
            raise unread("no ResourceHandle: dtype %d in its dtypes and shapes" % dtype)
        out.append((dtype, shape))
    return out, at + 3


def _partial_shape(buf: bytes, num: int, unread: Type[Exception]) -> Optional[List[int]]:
    """A ``PartialTensorShape``'s dims kept inline (-1: unknown), None for an unknown rank; raises ``unread``."""
    rank, tag = buf[14], buf[15]
    if rank == 255:
        if num != -1:
            raise unread("no ResourceHandle: an unknown rank of %d elements" % num)
        return None
    if tag == 0 and rank <= 6:
        dims = [-1 if d == 0xFFFF else d for d in struct.unpack_from("<%dH" % rank, buf)]
    elif tag == 1 and rank <= 3:
        dims = [-1 if d == 0xFFFFFFFF else d for d in struct.unpack_from("<%dI" % rank, buf)]
    else:
        raise unread("the handle's shape is kept out of line (rank %d): tfnative reads shapes of up to 6 dims here"
                     % rank)
    known = 1
    for d in dims:
        known = -1 if d < 0 or known < 0 else known * d
    if known != num:
        raise unread("no ResourceHandle: dims %s do not make num_elements %d" % (dims, num))
    return dims


def _admits(shape: Optional[List[int]], dims: List[int]) -> bool:
    return shape is None or len(shape) == len(dims) and all(s in (-1, d) for s, d in zip(shape, dims))


def _variable(reader: Reader, words: Tuple[int, ...], dtype: int, shape: Optional[List[int]],
              unread: Type[Exception]) -> Any:
    """The variable's tensor (``{"dtype", "shape", "values"...}``) from the words after the handle's vector, or why
    not (a string)."""
    pointers = [w for w in words if aligned_pointer(w)]
    if not pointers:
        return "its handle holds no pointer to the variable (it lives in a ResourceMgr, which tfnative does not read)"
    for obj in pointers:
        try:
            head = reader.words(obj, VAR_WORDS + 4)
        except unread:
            continue
        if not aligned_pointer(head[0]) or not 0 < head[1] < 1 << 31:  # ResourceBase: vptr, reference count
            continue
        for k in range(2, VAR_WORDS):
            try:
                got = reader.tensor(obj + 8 * k, dtype)
            except unread:
                continue
            if _admits(shape, got["shape"]):
                return reader.tensor(obj + 8 * k, dtype, values=True)
    return ("no variable of the handle's dtype and shape behind its handle (a handle without a pointer to its "
            "resource names one kept in a ResourceMgr, which tfnative does not read)")
