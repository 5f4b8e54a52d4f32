"""The C++ exception a thread has in flight, read from libstdc++'s per-thread globals in the target's memory.

A TensorFlow kernel that throws (``std::length_error`` from a negative size)
unwinds its own frames; pybind11's translators then catch the exception and
the process may die there (``PyErr_Occurred`` without a thread state): the
kernel is gone from the stack, but the exception is not.  libstdc++ keeps,
per thread, ``static __thread __cxa_eh_globals eh_globals`` =
``{__cxa_exception* caughtExceptions; unsigned uncaughtExceptions}``
(``libsupc++/eh_globals.cc``): the exceptions being handled (a chain through
``nextException``, the most recent first) and the count of those thrown and
not caught yet.  Nothing here calls into the process (no ``what()``): every
value is read and checked.

* Where the globals are: the exported ``__cxa_get_globals`` (``.dynsym``;
  Debian's libstdc++ has no ``.symtab``) is decoded (``tls_recipe``): its
  TLS access sequence says general/local-dynamic (a ``tls_index`` in the GOT
  whose module id the loader fills in: read from the target's memory, then
  the thread's DTV at ``*(fs_base + 8)``, 16-byte entries), initial-exec (a
  thread-pointer offset in the GOT) or local-exec (a constant offset).
  TLSDESC and anything else: no answer.
* A ``__cxa_exception`` (Itanium C++ ABI, x86-64: 112 bytes, the thrown
  object right after it) is trusted only where its ``unwindHeader``'s
  ``exception_class`` is libstdc++'s, ``GNUCC++\\0`` (a primary exception) or
  ``GNUCC++\\1`` (a dependent one, from ``std::rethrow_exception``: the object
  is its ``primaryException``).
* Its type is its ``std::type_info``'s mangled name (``St12length_error``).
  ``what()`` is read only for the classes whose layout is known: those derived
  (through ``__si_class_type_info``/``__vmi_class_type_info`` bases at offset
  0, recognised by the vtables libstdc++ exports) from ``std::logic_error`` or
  ``std::runtime_error``, whose message is a copy-on-write string (``_M_msg``
  at +8, its ``{length, capacity, refcount}`` 24 bytes before the characters);
  and ``std::bad_alloc``-like classes whose ``what()`` is a constant.
* An exception thrown and not caught yet (a crash during the unwinding, a
  destructor the unwinding runs) is only counted by the globals: it is looked
  for in the registers of the thread's frames (a cleanup's landing pad keeps
  it in a callee-saved one) and on its stack, as a pointer to its
  ``unwindHeader`` or header whose class and type check (``state`` "uncaught").
* Stopped at ``__cxa_throw``'s entry, its arguments (``obj``, ``tinfo``) give
  the exception being thrown (``state`` "thrown").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from .binary.cxxnames import demangle
from .binary.datasyms import data_symbols
from .binary.elf import PT_LOAD, ElfError, ElfFile
from .binary.mapfile import map_file
from .memory import USER_SPACE_END
from .record import FrozenRecord, Record

__all__ = ["CxxException", "CxxRuntime", "TlsRecipe", "being_thrown", "demangle_type", "eh_globals_address",
           "exceptions", "runtime_of", "terminating", "thread_exception", "tls_recipe"]

Reader = Callable[[int, int], bytes]

GNU_CXX = 0x474E5543432B2B00  # "GNUCC++\0" as the 64-bit exception_class (libstdc++'s primary exception)
GNU_CXX_DEPENDENT = GNU_CXX | 1  # "GNUCC++\1": a dependent exception (std::rethrow_exception)
HEADER = 112  # sizeof(__cxa_exception) on x86-64: the thrown object follows it
NEXT = 32  # __cxa_exception::nextException
HANDLER_COUNT = 40
UNWIND_HEADER = 80  # __cxa_exception::unwindHeader (its exception_class first)
MAX_CHAIN = 16  # caught exceptions walked at most
MAX_BASES = 16  # type_info bases walked at most
MAX_WHAT = 4096  # characters of a message read at most
MAX_NAME = 512
MAX_DTV = 1 << 16  # a DTV longer than this is no DTV
STACK_SCAN = 1 << 16  # bytes of a thread's stack searched for an uncaught exception
TLS_DTV_UNALLOCATED = (1 << 64) - 1

# The libstdc++ classes whose what() lives at a known place: a COW string at +8 (std::logic_error's and
# std::runtime_error's _M_msg), or a constant.
MESSAGE_BASES = ("St11logic_error", "St13runtime_error")
CONSTANT_WHAT = {"St9bad_alloc": "std::bad_alloc", "St20bad_array_new_length": "std::bad_array_new_length",
                 "St8bad_cast": "std::bad_cast", "St10bad_typeid": "std::bad_typeid",
                 "St13bad_exception": "std::bad_exception", "St17bad_function_call": "bad_function_call",
                 "St19bad_optional_access": "bad optional access", "St9exception": "std::exception"}
VTABLES = {"class": "_ZTVN10__cxxabiv117__class_type_infoE", "si": "_ZTVN10__cxxabiv120__si_class_type_infoE",
           "vmi": "_ZTVN10__cxxabiv121__vmi_class_type_infoE"}
GET_GLOBALS = "__cxa_get_globals"


@dataclass(frozen=True, repr=False, eq=False)
class TlsRecipe(FrozenRecord):
    """How ``__cxa_get_globals`` finds the globals: ``kind`` "dynamic" (``got``: the file address of a
    ``tls_index``), "initial-exec" (``got``: a slot holding the thread-pointer offset) or "local-exec";
    ``addend`` is added to what the sequence computes."""

    kind: str
    got: int = 0
    addend: int = 0


@dataclass(repr=False, eq=False)
class CxxException(Record):
    """One exception of a thread: its type (demangled), its message where it is readable, and its state:
    "caught" (a handler runs: in ``caughtExceptions``), "uncaught" (thrown, not caught yet), "thrown"
    (at ``__cxa_throw``'s entry) or "terminate" (``std::terminate`` runs for it: ``terminating``)."""

    type: str
    mangled: str
    what: Optional[str]
    state: str
    address: int = 0  # the thrown object

    def to_json(self) -> Dict[str, Optional[str]]:
        return {"type": self.type, "what": self.what, "state": self.state}


# ----------------------------------------------------------------------------------------------------
# where the globals are


def _s32(code: bytes, at: int) -> int:
    value: int = struct.unpack_from("<i", code, at)[0]
    return value


_MOV_FS0 = b"\x64\x48\x8b\x04\x25\x00\x00\x00\x00"  # mov %fs:0,%rax
_ADD_FS0 = b"\x64\x48\x03\x04\x25\x00\x00\x00\x00"  # add %fs:0,%rax


def _recipe_at_ret(state: Optional[str], got: int, addend: int) -> Optional[TlsRecipe]:
    """The recipe of what %rax holds at ``__cxa_get_globals``'s ``ret`` (``tls_recipe``'s state); None for
    anything else."""
    if state == "dynamic":
        return TlsRecipe("dynamic", got, addend)
    if state == "ie":
        return TlsRecipe("initial-exec", got, addend)
    if state == "tp":
        return TlsRecipe("local-exec", 0, addend)
    return None


def tls_recipe(code: bytes, vaddr: int) -> Optional[TlsRecipe]:
    """Decode the TLS access of ``__cxa_get_globals`` (its first bytes ``code``, at file address ``vaddr``).

    Follows a short straight-line sequence up to its ``ret``: ``lea X(%rip),%rdi`` + a call (general- or
    local-dynamic ``__tls_get_addr``), ``mov X(%rip),%rax`` + ``add %fs:0,%rax`` (initial-exec),
    ``mov %fs:0,%rax`` (+ ``add X(%rip),%rax``: initial-exec; + a constant: local-exec), and the
    constant added to the result (``add $imm,%rax``, ``lea imm(%rax),%rax``).  None for anything else.
    """
    pos, n = 0, len(code)
    tls_index: Optional[int] = None  # the tls_index the call takes in %rdi
    state: Optional[str] = None  # what %rax holds: "dynamic", "got" (a GOT slot's value), "tp", "ie"
    got = 0
    addend = 0
    while pos < n:
        rest = code[pos:]
        if rest.startswith(b"\xf3\x0f\x1e\xfa"):  # endbr64
            pos += 4
        elif rest[:3] == b"\x48\x83\xec" or rest[:3] == b"\x48\x83\xc4":  # sub/add $imm8,%rsp
            pos += 4
        elif rest[:1] == b"\x90":
            pos += 1
        elif rest[:4] == b"\x66\x48\x8d\x3d" and n - pos >= 8:  # data16 lea X(%rip),%rdi (general dynamic)
            tls_index = vaddr + pos + 8 + _s32(code, pos + 4)
            pos += 8
        elif rest[:3] == b"\x48\x8d\x3d" and n - pos >= 7:  # lea X(%rip),%rdi
            tls_index = vaddr + pos + 7 + _s32(code, pos + 3)
            pos += 7
        elif rest[:4] == b"\x66\x66\x48\xe8" and tls_index is not None:  # call __tls_get_addr@plt (padded)
            state, got, pos = "dynamic", tls_index, pos + 8
        elif rest[:1] == b"\xe8" and tls_index is not None:  # call __tls_get_addr@plt
            state, got, pos = "dynamic", tls_index, pos + 5
        elif rest[:2] == b"\xff\x15" and tls_index is not None:  # call *__tls_get_addr@GOTPCREL(%rip)
            state, got, pos = "dynamic", tls_index, pos + 6
        elif rest[:3] == b"\x66\xff\x15" and tls_index is not None:
            state, got, pos = "dynamic", tls_index, pos + 7
        elif rest[:3] == b"\x48\x8b\x05" and n - pos >= 7 and state is None:  # mov X(%rip),%rax
            state, got, pos = "got", vaddr + pos + 7 + _s32(code, pos + 3), pos + 7
        elif rest.startswith(_ADD_FS0) and state == "got":
            state, pos = "ie", pos + len(_ADD_FS0)
        elif rest.startswith(_MOV_FS0) and state is None:
            state, pos = "tp", pos + len(_MOV_FS0)
        elif rest[:3] == b"\x48\x03\x05" and n - pos >= 7 and state == "tp":  # add X(%rip),%rax
            state, got, pos = "ie", vaddr + pos + 7 + _s32(code, pos + 3), pos + 7
        elif rest[:2] == b"\x48\x05" and n - pos >= 6 and state:  # add $imm32,%rax
            addend, pos = addend + _s32(code, pos + 2), pos + 6
        elif rest[:3] == b"\x48\x8d\x80" and n - pos >= 7 and state:  # lea imm32(%rax),%rax
            addend, pos = addend + _s32(code, pos + 3), pos + 7
        elif rest[:3] == b"\x48\x8d\x40" and n - pos >= 4 and state:  # lea imm8(%rax),%rax
            addend, pos = addend + struct.unpack_from("<b", code, pos + 3)[0], pos + 4
        elif rest[:1] == b"\xc3":  # ret
            return _recipe_at_ret(state, got, addend)
        else:
            return None
    return None


def _u64(read: Reader, addr: int) -> int:
    value: int = struct.unpack("<Q", read(addr, 8))[0]
    return value


def _plausible(addr: int) -> bool:
    return 0x1000 <= addr < USER_SPACE_END


def eh_globals_address(read: Reader, recipe: TlsRecipe, bias: int, thread_pointer: int) -> Optional[int]:
    """Where a thread's ``__cxa_eh_globals`` is (None: nowhere yet, or unreadable).

    ``bias``: the library's load bias; ``thread_pointer``: the thread's ``fs_base``.  A thread whose DTV
    has no block for libstdc++ yet never asked for its globals: it has no exception.
    """
    if not _plausible(thread_pointer):
        return None
    try:
        if recipe.kind == "local-exec":
            addr = thread_pointer + recipe.addend
        elif recipe.kind == "initial-exec":
            offset = struct.unpack("<q", read(bias + recipe.got, 8))[0]
            addr = thread_pointer + offset + recipe.addend
        else:
            module, offset = struct.unpack("<QQ", read(bias + recipe.got, 16))
            dtv = _u64(read, thread_pointer + 8)
            if not module or module > MAX_DTV or not _plausible(dtv):
                return None
            length = _u64(read, dtv - 16)  # dtv[-1].counter: the entries it has room for
            if module > length or length > MAX_DTV:
                return None
            block = _u64(read, dtv + 16 * module)
            if block == TLS_DTV_UNALLOCATED or not _plausible(block):
                return None
            addr = block + offset + recipe.addend
    except (MemoryError, OSError, struct.error):
        return None
    return addr if _plausible(addr) else None


# ----------------------------------------------------------------------------------------------------
# the exceptions


def _cstr(read: Reader, addr: int, limit: int = MAX_NAME) -> Optional[str]:
    if not _plausible(addr):
        return None
    try:
        raw = read(addr, limit)
    except (MemoryError, OSError):
        try:  # near the end of a mapping
            raw = read(addr, 64)
        except (MemoryError, OSError):
            return None
    end = raw.find(b"\0")
    if end <= 0:
        return None
    try:
        return raw[:end].decode("ascii")
    except UnicodeDecodeError:
        return None


def _type_name(read: Reader, type_info: int) -> Optional[str]:
    """The mangled name of a ``std::type_info`` (``{vptr, const char* __name}``), checked to be one."""
    if not _plausible(type_info):
        return None
    try:
        vptr, name_ptr = struct.unpack("<QQ", read(type_info, 16))
    except (MemoryError, OSError):
        return None
    if not _plausible(vptr):
        return None
    name = _cstr(read, name_ptr)
    if not name or any(c.isspace() for c in name):
        return None
    return name.lstrip("*")  # GCC marks a type of internal linkage with '*'


def _class_names(read: Reader, type_info: int, vtables: Dict[str, int]) -> List[str]:
    """The mangled names of a class and of its bases at offset 0, the class's own first (bounded)."""
    names: List[str] = []
    at = type_info
    for _ in range(MAX_BASES):
        name = _type_name(read, at)
        if name is None:
            break
        names.append(name)
        try:
            vptr = _u64(read, at)
            if vtables.get("si") and vptr == vtables["si"] + 16:
                at = _u64(read, at + 16)  # __si_class_type_info::__base_type
                continue
            if vtables.get("vmi") and vptr == vtables["vmi"] + 16:
                _flags, count = struct.unpack("<II", read(at + 16, 8))
                if not 0 < count <= MAX_BASES:
                    break
                base, offset_flags = struct.unpack("<Qq", read(at + 24, 16))  # the first __base_class_type_info
                if offset_flags >> 8 != 0 or offset_flags & 1:  # not at offset 0, or virtual
                    break
                at = base
                continue
        except (MemoryError, OSError, struct.error):
            break
        break
    return names


def _cow_string(read: Reader, chars: int) -> Optional[str]:
    """A libstdc++ copy-on-write string (``__cow_string``) from its character pointer, checked."""
    if not _plausible(chars):
        return None
    try:
        length, capacity, _refcount = struct.unpack("<QQi", read(chars - 24, 20))
    except (MemoryError, OSError):
        return None
    if length > capacity or capacity > 1 << 30:
        return None
    try:
        raw = read(chars, min(length, MAX_WHAT) + (1 if length <= MAX_WHAT else 0))
    except (MemoryError, OSError):
        return None
    if length <= MAX_WHAT:
        if raw[-1:] != b"\0":
            return None
        raw = raw[:-1]
    if b"\0" in raw:
        return None
    text = raw.decode("utf-8", "replace")
    return text if length <= MAX_WHAT else text + "..."


def _what(read: Reader, obj: int, names: List[str]) -> Optional[str]:
    if any(n in MESSAGE_BASES for n in names):
        try:
            return _cow_string(read, _u64(read, obj + 8))
        except (MemoryError, OSError):
            return None
    return CONSTANT_WHAT.get(names[0]) if names else None


def demangle_type(mangled: str) -> str:
    """``St12length_error`` -> ``std::length_error`` (c++filt through ``cxxnames.demangle``)."""
    name = demangle(["_ZTS" + mangled])[0]
    prefix = "typeinfo name for "
    return name[len(prefix):] if name.startswith(prefix) else mangled


def _exception_at(read: Reader, header: int, vtables: Dict[str, int], state: str) -> Optional[CxxException]:
    """The exception whose ``__cxa_exception`` (or dependent one) starts at ``header``, if it checks."""
    if not _plausible(header):
        return None
    try:
        raw = read(header, HEADER)
    except (MemoryError, OSError):
        return None
    cls = struct.unpack_from("<Q", raw, UNWIND_HEADER)[0]
    if cls == GNU_CXX_DEPENDENT:
        obj = struct.unpack_from("<Q", raw, 0)[0]  # primaryException: the thrown object
        if not _plausible(obj):
            return None
        try:
            primary = read(obj - HEADER, HEADER)
        except (MemoryError, OSError):
            return None
        if struct.unpack_from("<Q", primary, UNWIND_HEADER)[0] != GNU_CXX:
            return None
        type_info = struct.unpack_from("<Q", primary, 0)[0]
    elif cls == GNU_CXX:
        obj = header + HEADER
        type_info = struct.unpack_from("<Q", raw, 0)[0]
    else:
        return None  # not libstdc++'s (a foreign exception: libc++abi's, a Rust panic...)
    names = _class_names(read, type_info, vtables)
    if not names:
        return None
    return CxxException(type=names[0], mangled=names[0], what=_what(read, obj, names), state=state, address=obj)


def exceptions(read: Reader, globals_addr: int, vtables: Optional[Dict[str, int]] = None,
               stack: Optional[Tuple[int, int]] = None, registers: Sequence[int] = ()) -> List[CxxException]:
    """A thread's exceptions from its ``__cxa_eh_globals`` at ``globals_addr``: the uncaught one first
    (where the globals count one and a register of the thread's frames, ``registers``, or a word of
    ``stack``, its [sp, end), points to it), then the caught ones, most recent first, each thrown object
    once.  Types are left mangled (``demangle_type``)."""
    vtables = vtables or {}
    try:
        caught, uncaught = struct.unpack("<QI", read(globals_addr, 12))
    except (MemoryError, OSError, struct.error):
        return []
    out: List[CxxException] = []
    seen: Set[int] = set()
    header, steps = caught, 0
    while header and steps < MAX_CHAIN:
        steps += 1
        exc = _exception_at(read, header, vtables, "caught")
        if exc is None:
            break
        if exc.address not in seen:
            seen.add(exc.address)
            out.append(exc)
        try:
            header = _u64(read, header + NEXT)
        except (MemoryError, OSError):
            break
    if 0 < uncaught <= MAX_CHAIN:
        found = _uncaught(read, stack, registers, vtables, seen)
        if found is not None:
            out.insert(0, found)
    return out


def _uncaught(read: Reader, stack: Optional[Tuple[int, int]], registers: Sequence[int],
              vtables: Dict[str, int], seen: Set[int]) -> Optional[CxxException]:
    """An exception being unwound: a pointer to its ``unwindHeader`` (what ``_Unwind_RaiseException``,
    the personality routine and a cleanup's landing pad pass along, kept in a register or on the stack)
    or to its header."""
    words = [w for w in registers if w]
    if stack is not None and _plausible(stack[0]):
        sp, end = stack
        at, stop = sp - sp % 8, sp + min(max(end - sp, 0), STACK_SCAN)
        while at < stop:  # a page at a time: the span may run past the stack's mapping
            size = min(4096 - at % 4096, stop - at) // 8 * 8
            if size <= 0:
                break
            try:
                raw = read(at, size)
            except (MemoryError, OSError):
                break
            words += [w for (w,) in struct.iter_unpack("<Q", raw)]
            at += size
    tried = set()
    for word in words:
        if not _plausible(word) or word in tried:
            continue
        tried.add(word)
        for header in (word - UNWIND_HEADER, word):
            try:
                cls = _u64(read, header + UNWIND_HEADER)
            except (MemoryError, OSError):
                continue
            if cls not in (GNU_CXX, GNU_CXX_DEPENDENT):
                continue
            exc = _exception_at(read, header, vtables, "uncaught")
            if exc is not None and exc.address not in seen:
                return exc
    return None


def terminating(frames: Sequence[Tuple[Optional[str], Optional[str]]]) -> bool:
    """Whether a thread's stack (``(function, library)`` of each native frame, innermost first) is
    ``std::terminate`` ending the process: ``abort`` called from libstdc++ (its terminate handlers; the
    personality routine's call of terminate for a throw out of a ``noexcept`` function or with no
    handler).  The exception it was called for is then in ``caughtExceptions`` (``__cxa_begin_catch``
    ran), though no handler of the program's caught it."""
    for (function, _lib), (_caller, caller_lib) in zip(frames, frames[1:]):
        if function == "abort":
            return caller_lib is not None and caller_lib.startswith("libstdc++")
    return False


# ----------------------------------------------------------------------------------------------------
# a library's C++ runtime


@dataclass(frozen=True, repr=False, eq=False)
class CxxRuntime(FrozenRecord):
    """What a file that holds libstdc++'s exception runtime says, once per file: where the globals are
    (``recipe``) and the file addresses of the ``type_info`` classes' vtables."""

    recipe: TlsRecipe
    vtables: Dict[str, int]


def _code(path: str, vaddr: int, size: int) -> bytes:
    with map_file(path) as mm:
        elf = ElfFile(mm, path, sections=False)
        for p_type, _flags, p_offset, p_vaddr, p_filesz, _memsz, _align in elf.segments:
            if p_type == PT_LOAD and p_vaddr <= vaddr < p_vaddr + p_filesz:
                start = p_offset + vaddr - p_vaddr
                return bytes(mm[start: start + min(size, p_vaddr + p_filesz - vaddr)])
    return b""


def runtime_of(path: str) -> Optional[CxxRuntime]:
    """The C++ runtime of ``path`` (a ``libstdc++.so.6``), or None where it exports no
    ``__cxa_get_globals`` this module can decode."""
    try:
        syms = data_symbols(path, [GET_GLOBALS] + list(VTABLES.values()))
        if GET_GLOBALS not in syms:
            return None
        recipe = tls_recipe(_code(path, syms[GET_GLOBALS], 64), syms[GET_GLOBALS])
    except (OSError, ValueError, ElfError, struct.error):
        return None
    if recipe is None:
        return None
    return CxxRuntime(recipe, {k: syms[v] for k, v in VTABLES.items() if v in syms})


def being_thrown(read: Reader, obj: int, type_info: int, vtables: Optional[Dict[str, int]] = None
                 ) -> Optional[CxxException]:
    """The exception at the entry of ``__cxa_throw(void* obj, std::type_info* tinfo, void (*dest)(void*))``:
    its header is not filled in yet, so only its type_info vouches for it (state "thrown")."""
    if not _plausible(obj):
        return None
    names = _class_names(read, type_info, vtables or {})
    if not names:
        return None
    return CxxException(type=names[0], mangled=names[0], what=_what(read, obj, names), state="thrown", address=obj)


def thread_exception(read: Reader, runtime: CxxRuntime, bias: int, thread_pointer: int,
                     stack: Optional[Tuple[int, int]] = None,
                     throw_args: Optional[Tuple[int, int]] = None,
                     registers: Sequence[int] = ()) -> Optional[CxxException]:
    """The exception a thread has in flight (the most recent one; demangled), or None.

    ``bias``: the runtime library's load bias; ``thread_pointer``: the thread's ``fs_base``;
    ``stack``: its [sp, end) and ``registers``: its frames' register values, for an uncaught exception;
    ``throw_args``: ``(obj, tinfo)``, the first two
    arguments of a thread stopped at ``__cxa_throw``'s entry (a ``--break __cxa_throw`` hit).
    """
    vtables = {k: v + bias for k, v in runtime.vtables.items()}
    found: List[CxxException] = []
    if throw_args is not None:
        exc = being_thrown(read, throw_args[0], throw_args[1], vtables)
        if exc is not None:
            found.append(exc)
    addr = eh_globals_address(read, runtime.recipe, bias, thread_pointer)
    if addr is not None:
        found += exceptions(read, addr, vtables, stack, registers)
    if not found:
        return None
    exc = found[0]
    exc.type = demangle_type(exc.mangled)
    return exc
