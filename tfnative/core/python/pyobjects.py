"""Python objects in the target's memory, read by name: thread names and short reprs of locals (pure).

Nothing runs in the target: every value is read from memory through a
``PythonReader`` and every walk is bounded (dict sizes, string lengths,
nesting, item counts).  Unreadable memory gives ``<unreadable>`` for one
value, never an error for the whole frame.

* Thread names: ``threading._active`` (found in ``sys.modules``, which the
  interpreter holds) maps each thread's ident (its pthread id) to its
  ``Thread`` object, whose ``_name`` lives in the instance's attributes:
  a dict at ``tp_dictoffset`` (3.10), or CPython's "managed dict" (3.11+),
  whose values may sit outside any dict object (3.11 and 3.12: behind
  the object, 3.13: inline after it), keyed by the class's shared keys.
* Short reprs: ``None``, bools, ints, floats, str and bytes (cut), tuples
  and lists (their first items), small dicts (their items, else their size); anything else is
  ``<TYPE at 0xADDR>`` (the type's own name, without its module).  py-spy and pystack show locals the same way.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, Iterator, List, Optional, Protocol, Tuple

from ..memory import Memory
from .pylayout import STACKREF_TAG_BITS, Layout


class PythonReader(Protocol):
    """What reading objects needs of ``pyframes.PythonReader``: the process's memory, its interpreter's layout
    and the checked primitive reads (defined there, where frames are read too)."""

    mem: Memory
    layout: Layout
    runtime: int

    def u8(self, addr: int) -> int: ...
    def u64(self, addr: int) -> int: ...
    def i64(self, addr: int) -> int: ...
    def i32(self, addr: int) -> int: ...
    def string(self, obj: int) -> Optional[str]: ...
    def bytes_value(self, obj: int) -> bytes: ...
    def type_of(self, obj: int) -> int: ...
    def int_value(self, obj: int) -> int: ...
    def tuple_items(self, obj: int) -> List[int]: ...
    def dict_items(self, obj: int) -> List[Tuple[int, int]]: ...
    def dict_entries(self, obj: int) -> Iterator[Tuple[int, int]]: ...
    @staticmethod
    def tagged_int(bits: int) -> Optional[int]: ...

MANAGED_DICT = 1 << 4  # Py_TPFLAGS_MANAGED_DICT (3.11+)
INLINE_VALUES = 1 << 2  # Py_TPFLAGS_INLINE_VALUES (3.13)
CO_VARARGS, CO_VARKEYWORDS = 0x4, 0x8
MAX_REPR = 80  # characters of one value's repr
MAX_ITEMS = 4  # items of a tuple or list shown
MAX_VARIABLES = 64  # locals shown per frame
MAX_SHARED_KEYS = 1024


def cstring(reader: PythonReader, addr: int, limit: int = 200) -> str:
    """A NUL-terminated string (a type's ``tp_name``), read page by page, at most ``limit`` bytes."""
    out = b""
    while len(out) < limit:
        chunk = min(limit - len(out), 4096 - (addr + len(out)) % 4096)
        data = reader.mem.read(addr + len(out), chunk)
        end = data.find(b"\0")
        if end >= 0:
            return (out + data[:end]).decode("utf-8", "replace")
        out += data
    return out.decode("utf-8", "replace")


class ObjectReader:
    """Reads objects by name and shows them short, with per-type caches for one capture."""

    def __init__(self, reader: PythonReader) -> None:
        self.r = reader
        self.L = reader.layout
        self._type_names: Dict[int, str] = {}
        self._checked_types: Dict[int, bool] = {}

    # -- types -------------------------------------------------------------
    def type_name(self, obj: int) -> str:
        tp = self.r.type_of(obj)
        name = self._type_names.get(tp)
        if name is None:
            name = cstring(self.r, self.r.u64(tp + self.L.type_name))
            self._type_names[tp] = name
        return name

    # -- attributes --------------------------------------------------------
    def attributes(self, obj: int) -> List[Tuple[int, int]]:
        """(name, value) object addresses of an instance's attributes (its ``__dict__``)."""
        L, r = self.L, self.r
        tp = r.type_of(obj)
        flags = r.u64(tp + L.type_flags)
        if L.version >= (3, 11) and flags & MANAGED_DICT:
            slot = r.u64(obj - 24)  # the managed dict (3.11: dict; 3.12: dict or tagged values; 3.13: dict)
            if L.version >= (3, 13):
                if slot:
                    return r.dict_items(slot)
                if flags & INLINE_VALUES:
                    values = obj + r.i64(tp + L.type_basicsize)
                    if not r.u8(values + 3):  # PyDictValues.valid: the values moved into a dict
                        return []
                    return self._shared(tp, values + 8)
                return []
            if L.version == (3, 12):
                if slot & 1:  # PyDictOrValues holding values - 1
                    return self._shared(tp, slot + 1)
                return r.dict_items(slot) if slot else []
            if slot:
                return r.dict_items(slot)
            values = r.u64(obj - 32)  # 3.11: _PyObject_ValuesPointer
            return self._shared(tp, values) if values else []
        offset = r.i64(tp + L.type_dictoffset)
        if offset <= 0:
            return []
        d = r.u64(obj + offset)
        return r.dict_items(d) if d else []

    def _shared(self, tp: int, values: int) -> List[Tuple[int, int]]:
        """Attributes kept as a values array keyed by the class's shared keys (``ht_cached_keys``)."""
        L, r = self.L, self.r
        if L.heaptype_cached_keys is None:
            return []
        if not self._heap_type_checked(tp, L.heaptype_cached_keys):
            return []
        keys = r.u64(tp + L.heaptype_cached_keys)
        if not keys:
            return []
        log2_index_bytes = r.u8(keys + 9)
        nentries = r.i64(keys + 24)
        if not 0 <= nentries <= MAX_SHARED_KEYS or log2_index_bytes > 20:
            raise MemoryError("implausible shared keys")
        entries = keys + 32 + (1 << log2_index_bytes)
        out = []
        for i in range(nentries):
            key = r.u64(entries + 16 * i)
            value = r.u64(values + 8 * i)
            if key and value:
                out.append((key, value))
        return out

    def _heap_type_checked(self, tp: int, cached_keys: int) -> bool:
        """Whether ``ht_cached_keys`` sits where the layout says in the class ``tp``: the ``ht_name`` three
        pointers before it must be a str that ends ``tp_name`` (3.14+ derive that offset from the published
        size of ``PyTypeObject``; this catches a build where the derivation does not hold).  ``cached_keys``
        is the layout's ``heaptype_cached_keys``."""
        ok = self._checked_types.get(tp)
        if ok is None:
            name = self.r.string(self.r.u64(tp + cached_keys - 24))
            full = cstring(self.r, self.r.u64(tp + self.L.type_name))
            ok = self._checked_types[tp] = bool(name) and full.rsplit(".", 1)[-1] == name
        return ok

    def attribute(self, obj: int, name: str) -> Optional[int]:
        return next((v for k, v in self.attributes(obj) if self.r.string(k) == name), None)

    # -- modules and thread names -------------------------------------------
    def module_global(self, module: str, name: str) -> Optional[int]:
        """A module-level name of an imported module, from ``sys.modules``; None where it is not imported."""
        L, r = self.L, self.r
        if L.interp_modules is None:
            return None
        interp = r.u64(r.runtime + L.runtime_interpreters_head)
        modules = r.u64(interp + L.interp_modules) if interp else 0
        if not modules:
            return None
        mod = next((v for k, v in r.dict_entries(modules) if self._is(k, module)), None)
        if mod is None:
            return None
        md = r.u64(mod + L.module_dict)
        return next((v for k, v in r.dict_entries(md) if self._is(k, name)), None) if md else None

    MAX_ENV_VALUE = 1 << 16

    def environ_value(self, name: str) -> Optional[str]:
        """``os.environ[name]`` as the program sees it now (set by the program itself after it started, which
        ``/proc/PID/environ`` does not show); None where ``os`` or the name is not there.  ``os.environ``
        keeps its items encoded in ``_data`` (bytes keys and values on POSIX); each object's type is checked."""
        env = self.module_global("os", "environ")
        data = self.attribute(env, "_data") if env else None
        if not data or self.type_name(data) != "dict":
            return None
        want = name.encode()
        for k, v in self.r.dict_entries(data):
            if self.type_name(k) == "bytes" and self.r.bytes_value(k) == want:
                if self.type_name(v) != "bytes":
                    return None
                value = self.r.bytes_value(v)
                return value[:self.MAX_ENV_VALUE].decode("utf-8", "replace")
        return None

    def _is(self, key: int, name: str) -> bool:
        """Whether the str ``key`` is ``name``; its length is read first (most keys differ in it)."""
        return self.r.i64(key + self.L.unicode_length) == len(name) and self.r.string(key) == name

    def thread_names(self) -> Dict[int, Tuple[str, Optional[bool]]]:
        """``threading``'s (name, daemon) of each thread it knows, by ident (the pthread id); {} where the
        program did not import ``threading``.  ``daemon`` is None where it cannot be read."""
        active = self.module_global("threading", "_active")
        names: Dict[int, Tuple[str, Optional[bool]]] = {}
        if active is None:
            return names
        for key, thread in self.r.dict_items(active):
            try:
                attrs = {self.r.string(k): v for k, v in self.attributes(thread)}
                name = attrs.get("_name")
                text = self.r.string(name) if name else None
                daemonic = attrs.get("_daemonic")
                daemon = None
                if daemonic and self.type_name(daemonic) == "bool":
                    daemon = bool(self.r.int_value(daemonic))
                if text is not None:
                    names[self.r.int_value(key)] = (text, daemon)
            except MemoryError:
                continue
        return names

    # -- reprs ------------------------------------------------------------
    def short_repr(self, obj: int, depth: int = 0) -> str:
        """A short repr of the object at ``obj``, read from memory (never longer than ``MAX_REPR``)."""
        try:
            text = self._repr(obj, depth)
        except MemoryError:
            text = "<unreadable at 0x%x>" % obj
        return text if len(text) <= MAX_REPR else text[:MAX_REPR - 3] + "..."

    def _repr(self, obj: int, depth: int) -> str:
        L, r = self.L, self.r
        kind = self.type_name(obj)
        if kind == "NoneType":
            return "None"
        if kind == "bool":
            return "True" if r.int_value(obj) else "False"
        if kind == "int":
            try:
                return str(r.int_value(obj))
            except MemoryError:
                return "<int (large)>"
        if kind == "float":
            return repr(struct.unpack("<d", r.mem.read(obj + L.float_value, 8))[0])
        if kind == "str":
            value = r.string(obj)
            return repr(value[:MAX_REPR]) if value is not None else "<str at 0x%x>" % obj
        if kind == "bytes":
            return repr(r.bytes_value(obj)[:MAX_REPR])
        if kind == "cell":
            ref = r.u64(obj + L.cell_ref)
            return self._repr(ref, depth) if ref else "<empty cell>"
        if kind in ("tuple", "list"):
            if kind == "tuple":
                items = r.tuple_items(obj)
            else:
                count = r.i64(obj + L.tuple_size)
                if not 0 <= count <= 1 << 24:
                    raise MemoryError("implausible list size")
                head = r.u64(obj + L.list_items)
                shown = min(count, MAX_ITEMS)
                items = list(struct.unpack("<%dQ" % shown, r.mem.read(head, 8 * shown))) if shown else []
                items += [0] * (count - shown)
            if depth >= 1:
                return "<%s of %d>" % (kind, len(items))
            parts = [self.short_repr(i, depth + 1) for i in items[:MAX_ITEMS]]
            if len(items) > MAX_ITEMS:
                parts.append("... %d more" % (len(items) - MAX_ITEMS))
            open_, close = ("(", ",)" if len(items) == 1 else ")") if kind == "tuple" else ("[", "]")
            return open_ + ", ".join(parts) + close
        if kind == "dict":
            used = r.i64(obj + L.dict_used)
            if depth >= 1 or not 0 <= used <= MAX_ITEMS:
                return "<dict of %d>" % used
            pairs = ["%s: %s" % (self.short_repr(k, depth + 1), self.short_repr(v, depth + 1))
                     for k, v in r.dict_items(obj)[:MAX_ITEMS]]
            return "{" + ", ".join(pairs) + "}"
        return "<%s at 0x%x>" % (kind.rsplit(".", 1)[-1], obj)  # EagerTensor, not tensorflow.python...

    def variables(self, code: int, frame_addr: int) -> List[Dict[str, Any]]:
        """The frame's arguments and locals in order: ``{"name", "repr", "arg"}``; unbound ones left out."""
        L, r = self.L, self.r
        if (L.frame_localsplus is None or L.code_localsplusnames is None or L.code_argcount is None
                or L.code_kwonlyargcount is None or L.code_flags is None):
            return []
        names = r.tuple_items(r.u64(code + L.code_localsplusnames))
        argcount, kwonly = r.i32(code + L.code_argcount), r.i32(code + L.code_kwonlyargcount)
        flags = r.i32(code + L.code_flags)
        nargs = argcount + kwonly + bool(flags & CO_VARARGS) + bool(flags & CO_VARKEYWORDS)
        if argcount < 0 or kwonly < 0 or nargs > len(names):
            # counts that cannot be (3.14+ derive co_kwonlyargcount and co_flags from the published
            # co_argcount): show the variables, mark none an argument rather than guess
            nargs = 0
        out: List[Dict[str, Any]] = []
        for i, name_obj in enumerate(names[:MAX_VARIABLES]):
            bits = r.u64(frame_addr + L.frame_localsplus + 8 * i)
            number = r.tagged_int(bits)  # 3.14+: a small int may be kept in the slot itself
            value = bits & ~STACKREF_TAG_BITS if number is None else 0
            if not value and number is None:
                continue
            name = r.string(name_obj) or "?"
            text = str(number) if number is not None else self.short_repr(value)
            out.append({"name": name, "repr": text, "arg": i < nargs})
        return out
