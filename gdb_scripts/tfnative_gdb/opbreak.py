"""Break by op type: gdb breakpoints that stop only for the ops asked for.

Two kinds, both decided inside gdb (``gdb.Breakpoint.stop``), so an op of
another type costs a trap and a few memory reads, never a round trip to
tfnative:

* ``DispatchBreakpoint`` on ``ThreadPoolDevice::Compute(OpKernel*, ...)``
  (and ``ComputeAsync``), through which the CPU device runs every kernel: it
  stops the first time a kernel *class* serves one of the wanted types, so
  that tfnative can arm that class's own ``Compute``;
* ``KernelBreakpoint`` on a kernel's ``Compute``: one kernel class may serve
  several op types (``BaseBatchMatMulOp`` runs MatMul and BatchMatMulV2), so
  it stops only when ``this`` (``rdi``) is an OpKernel of a wanted type.

Created with the MI commands ``-tfnative-break-op`` and
``-tfnative-break-op-kernel`` (``commands.py``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

import gdb

from tfnative.core.tensorflow.opkernel import VTABLE_SLOTS, OpKernelReader

from .capture import GdbMemory, info_symbol, register_value

_reader: Optional[OpKernelReader] = None


def reader() -> OpKernelReader:
    global _reader
    inferior = gdb.selected_inferior()
    if _reader is None or not isinstance(_reader.mem, GdbMemory) or _reader.mem.inferior != inferior:
        _reader = OpKernelReader(GdbMemory(inferior))
    return _reader


def _register(name: str) -> Optional[int]:
    return register_value(gdb.selected_frame(), name)


class _OpBreakpoint(gdb.Breakpoint):
    REGISTER = "rdi"

    def __init__(self, spec: str, op_types: List[str]) -> None:
        super().__init__(spec, gdb.BP_BREAKPOINT, internal=False)
        self.op_types = set(op_types)

    def kernel_info(self) -> Optional[Dict[str, str]]:
        obj = _register(self.REGISTER)
        return reader().info(obj) if obj else None


class KernelBreakpoint(_OpBreakpoint):
    def stop(self) -> bool:
        info = self.kernel_info()
        return info is not None and info["type"] in self.op_types


class DispatchBreakpoint(_OpBreakpoint):
    REGISTER = "rsi"

    def __init__(self, spec: str, op_types: List[str]) -> None:
        super().__init__(spec, op_types)
        self.seen_vtables: Set[int] = set()

    def stop(self) -> bool:
        info = self.kernel_info()
        if info is None or info["type"] not in self.op_types:
            return False
        try:
            vptr = reader().u64(int(info["kernel"], 16))
        except MemoryError:
            return False
        if vptr in self.seen_vtables:
            return False  # that class's Compute is armed already
        self.seen_vtables.add(vptr)
        return True


def dispatched() -> Optional[Dict[str, Any]]:
    """At a DispatchBreakpoint's stop: the kernel about to run, and its vtable (addresses, names gdb knows)."""
    obj = _register("rsi")
    if not obj:
        return None
    r = reader()
    kernel = r.info(obj)
    if kernel is None:
        return None
    slots = list(r.vtable(obj))[:VTABLE_SLOTS]
    names = [found[0] if found else None for found in map(info_symbol, slots)]
    info: Dict[str, Any] = dict(kernel)
    info.update({"slots": ["0x%x" % a for a in slots], "names": names})
    return info
