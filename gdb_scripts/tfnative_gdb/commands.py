"""gdb commands: ``tf-bt`` for people, ``-tfnative-capture`` for tfnative."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Tuple, TypedDict

import gdb

from tfnative.analysis.frames import marked_threads
from tfnative.core.binary.libfacts import library_classes
from tfnative.core.tensorflow.opkernel import OpKernelReader
from tfnative.core.threads import Threads
from tfnative.output.render import thread_block

from . import SCHEMA_VERSION, lockobjects, opbreak
from .capture import GdbMemory, annotate_ops, capture, code_on_stacks, op_context, registers

_registered = False  # gdbinit sets it once register() has run (a second sourcing registers nothing)


class _Options(TypedDict):
    """What ``tf-bt``'s and ``-tfnative-capture``'s arguments ask for."""

    which: Threads
    native_all: bool
    json: bool
    tids: List[int]
    full: bool
    locals: bool


def _parse(argv: List[str]) -> _Options:
    opts: _Options = {"which": Threads.SELECTED, "native_all": False, "json": False, "tids": [], "full": False,
                      "locals": False}
    for a in argv:
        if a in ("-a", "--all-threads", "all"):
            opts["which"] = Threads.ALL
        elif a in ("-p", "--python-threads"):
            opts["which"] = Threads.PYTHON
        elif a == "--native-all":
            opts["native_all"] = True
        elif a == "--full":
            opts["full"] = True
        elif a == "--json":
            opts["json"] = True
        elif a == "--locals":
            opts["locals"] = True
        elif a.startswith("--thread="):
            opts["which"] = Threads.ALL
            opts["tids"].append(int(a.split("=", 1)[1]))
        else:
            raise gdb.GdbError("tf-bt: unknown argument %r (use -a, -p, --native-all, --full, --locals, --json)" % a)
    return opts


class TfBt(gdb.Command):
    """Print mixed Python + native stacks: tf-bt [-a|--all-threads] [-p] [--native-all] [--full] [--locals] [--json]

With no argument: the selected thread.  -a: every thread (Python ones first);
-p: only threads that run Python.  --native-all keeps interpreter glue frames;
--full does not fold runs of TensorFlow-internal frames; --locals shows each
Python frame's arguments and locals (short reprs read from memory).
Python frames are read from memory, so the interpreter needs no debug info."""

    def __init__(self) -> None:
        super().__init__("tf-bt", gdb.COMMAND_STACK)

    def invoke(self, arg: str, from_tty: bool) -> None:
        opts = _parse(gdb.string_to_argv(arg))
        result = capture(opts["which"], opts["tids"] or None, opts["locals"])
        annotate_ops(result)
        # the event's threads of the capture: glue hidden, the user's own code classed and every frame marked as
        # tfnative's reports do it
        threads = marked_threads(result, library_classes(result.libraries), opts["native_all"])
        if opts["json"]:  # the capture's wire form, of the threads shown
            shown = dict(result.to_json(), threads=[t.capture_json() for t in threads])
            gdb.write(json.dumps(shown, indent=1) + "\n")
            return
        for w in result.warnings:
            gdb.write("warning: %s\n" % w)
        width = None if opts["full"] else _width()
        for t in threads:
            gdb.write("\n".join(thread_block(t, fold=not opts["full"], width=width)) + "\n\n")


def _width() -> Optional[int]:
    """The columns gdb's ``width`` setting gives its lines (the terminal's, where gdb runs on one); None when
    unlimited (``gdb -batch``, ``set width 0``)."""
    width: object
    try:
        width = gdb.parameter("width")
    except (gdb.error, RuntimeError):
        return None
    return max(width, 40) if isinstance(width, int) and width > 0 else None


if hasattr(gdb, "MICommand"):

    class MiCapture(gdb.MICommand):
        """-tfnative-capture [--all-threads|--python-threads] [--locals] [--thread=LWP]...: JSON of mixed stacks."""

        def __init__(self) -> None:
            super().__init__("-tfnative-capture")

        def invoke(self, argv: List[str]) -> Dict[str, str]:
            opts = _parse(argv)
            result = capture(opts["which"], opts["tids"] or None, opts["locals"]).to_json()
            result["schema"] = SCHEMA_VERSION
            return {"json": json.dumps(result)}

    class MiOpContext(gdb.MICommand):
        """-tfnative-op-context LWP:LEVEL:START[:device|:inputs]...: the op each of those frames runs (JSON list);
        ``inputs``: a kernel's inputs too (``core/tensorflow/kernelinputs.py``).

        START is the entry address of the frame's function (0: ask gdb); the
        answer has one entry per request, ``{"type", "name", "kernel"}`` or null.
        """

        def __init__(self) -> None:
            super().__init__("-tfnative-op-context")

        def invoke(self, argv: List[str]) -> Dict[str, str]:
            kernels = OpKernelReader(GdbMemory(gdb.selected_inferior()))
            out: List[Optional[Dict[str, Any]]] = []
            for req in argv:
                parts = req.split(":")
                try:
                    lwp, level, start = int(parts[0]), int(parts[1]), int(parts[2], 0)
                except (IndexError, ValueError):
                    raise gdb.GdbError("-tfnative-op-context: bad request %r (LWP:LEVEL:START[:device])" % req)
                out.append(op_context(lwp, level, start, device="device" in parts[3:], kernels=kernels,
                                      inputs="inputs" in parts[3:]))
            return {"json": json.dumps(out)}

    class MiStackCode(gdb.MICommand):
        """-tfnative-stack-code c:LO:HI... s:LO:HI...: the code ranges (c) that pcs and stacks (s) point into."""

        def __init__(self) -> None:
            super().__init__("-tfnative-stack-code")

        def invoke(self, argv: List[str]) -> Dict[str, str]:
            code: List[Tuple[int, int]] = []
            stacks: List[Tuple[int, int]] = []
            for arg in argv:
                kind, lo, hi = arg.split(":")
                (code if kind == "c" else stacks).append((int(lo, 16), int(hi, 16)))
            return {"json": json.dumps(code_on_stacks(code, stacks))}

    class MiBreakOp(gdb.MICommand):
        """-tfnative-break-op[-kernel] SPEC TYPE...: a breakpoint that stops only for ops of those types.

        ``-tfnative-break-op`` goes on the device's Compute (the op kernel in
        rsi) and stops once per kernel class; ``-tfnative-break-op-kernel`` on a
        kernel's Compute (the op kernel in rdi).  Answers the breakpoint number.
        """

        def __init__(self, name: str, cls: Callable[[str, List[str]], gdb.Breakpoint]) -> None:
            super().__init__(name)
            self.cls = cls

        def invoke(self, argv: List[str]) -> Dict[str, str]:
            if len(argv) < 2:
                raise gdb.GdbError("usage: %s SPEC TYPE..." % self.name)
            bp = self.cls(argv[0], argv[1:])
            return {"number": str(bp.number), "pending": "1" if bp.pending else "0"}

    class MiRegisters(gdb.MICommand):
        """-tfnative-registers [--all-threads]: each thread's registers (JSON), for tfnative's own unwinder."""

        def __init__(self) -> None:
            super().__init__("-tfnative-registers")

        def invoke(self, argv: List[str]) -> Dict[str, str]:
            return {"json": json.dumps(registers(Threads.ALL if "--all-threads" in argv else Threads.SELECTED))}

    class MiLockObjects(gdb.MICommand):
        """-tfnative-lock-objects [TID...]: the mutex each thread locks and the lock objects its frames hold, and
        the innermost frames' callee-saved registers of the threads named (JSON)."""

        def __init__(self) -> None:
            super().__init__("-tfnative-lock-objects")

        def invoke(self, argv: List[str]) -> Dict[str, str]:
            return {"json": json.dumps(lockobjects.lock_objects([int(a) for a in argv if a.isdigit()]))}

    class MiOpDispatch(gdb.MICommand):
        """-tfnative-op-dispatch: at a -tfnative-break-op stop, the kernel to run and its vtable (JSON)."""

        def __init__(self) -> None:
            super().__init__("-tfnative-op-dispatch")

        def invoke(self, argv: List[str]) -> Dict[str, str]:
            return {"json": json.dumps(opbreak.dispatched())}


def register() -> None:
    TfBt()
    if hasattr(gdb, "MICommand"):
        MiCapture()
        MiOpContext()
        MiBreakOp("-tfnative-break-op", opbreak.DispatchBreakpoint)
        MiBreakOp("-tfnative-break-op-kernel", opbreak.KernelBreakpoint)
        MiOpDispatch()
        MiStackCode()
        MiRegisters()
        MiLockObjects()
