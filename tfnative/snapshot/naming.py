"""Unwound frames named: native frames from the symbol index, the interpreter's frames told apart,
kernel frames given their op (``snapshot/pipeline.py``'s part after the unwind).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from ..core import frameclass
from ..core.binary.cfi import DWARF_REGS, Frame
from ..core.binary.cxxnames import display_names
from ..core.memory import Memory
from ..core.model import NativeFrame, Op
from ..core.tensorflow.kernelinputs import InputsReader
from ..core.tensorflow.opdefs import op_with_inputs
from ..core.tensorflow.opkernel import FrameContext, OpKernelReader, inherit_device_ops, op_frames
from ..core.threads import SIGNAL_FRAME
from ..sources.modules import Library

# The frame that runs an op's shape function: InferenceContext::Run(std::function<...> const&)
SHAPE_FN = "shape_inference::InferenceContext::Run("


def named_as(name: str) -> Callable[[int], str]:
    """A symbolizer that names every address by one library's name (where the interpreter is)."""
    return lambda _addr: name


def constant(value: Optional[int]) -> Callable[[], Optional[int]]:
    """``value``, asked for lazily (a thread's ``fs_base``)."""
    return lambda: value


def is_interpreter(lib: Library) -> bool:
    """The python executable, libpython, or one of the interpreter's own extension modules.

    Their frames are shown as Python frames or hidden as glue, so their DWARF
    (pyenv builds everything with -g) is no reason to ask gdb.
    """
    return frameclass.may_hold_interpreter(lib.name) or "/lib-dynload/" in lib.path


def native_frames(frames: List[Frame[Library]]) -> List[NativeFrame]:
    out = []
    for level, fr in enumerate(frames):
        lib = fr.module
        out.append(NativeFrame(function="??", library=lib.name if lib else None, address="0x%016x" % fr.pc,
                               level=level, recovered=fr.recovered or None))
    return out


def name_frames(threads: List[Tuple[List[Frame[Library]], List[NativeFrame]]]) -> None:
    """Name every native frame from the symbol indexes (one demangling pass for all)."""
    todo: List[Tuple[NativeFrame, str]] = []
    for frames, named in threads:
        for level, (fr, d) in enumerate(zip(frames, named)):
            lib = fr.module
            if fr.signal:
                d.function = SIGNAL_FRAME  # as gdb names it
                continue
            if lib is None:
                continue
            # A caller's pc is a return address: name the call, which may be a
            # function's last instruction (a call to a noreturn function).
            look = fr.pc - (1 if level and not frames[level - 1].signal else 0)
            for idx in lib.indexes():
                hit = idx.symbolize(look - lib.bias)
                if hit is not None:
                    d.start = look - hit[1]
                    todo.append((d, hit[0]))
                    break
    for (d, _), name in zip(todo, display_names([m for _, m in todo])):
        d.function = name


def add_ops(memory: Memory, frames: List[Frame[Library]], named: List[NativeFrame], kernels: OpKernelReader,
            inputs: bool = False) -> None:
    """The op of each kernel and device frame; with ``inputs`` (the thread that stopped), the innermost
    kernel's inputs too (``core/tensorflow/kernelinputs.py``), or, where the innermost op frame runs a shape
    function (``InferenceContext::Run``), what that shape function saw (``core/tensorflow/shapefn.py``)."""
    shape_fn = next((d for d in named if d.level is not None and SHAPE_FN in (d.function or "")),
                    None) if inputs else None  # (only the thread that stopped: a crash's, a --break-op hit's)
    if shape_fn is not None and not any((d.level or 0) < (shape_fn.level or 0) for d, _ in op_frames(named)):
        _add_shape_fn(memory, frames, shape_fn)
        inputs = False
    for d, device in op_frames(named):
        level = d.level or 0
        context = _context(frames, level, d.start or 0)
        op = op_with_inputs(kernels, context, device, inputs and not device)
        inputs = inputs and device  # the innermost kernel's alone
        if op:
            d.op = Op.from_json(op)
    inherit_device_ops(named)


def _context(frames: List[Frame[Library]], level: int, start: int) -> FrameContext:
    """What a reader knows of the frame at ``level``: its registers, its caller's, its stack."""
    regs = _named(frames[level].regs)
    caller = _named(frames[level + 1].regs) if level + 1 < len(frames) else {}
    high = 0
    for k in (level + 2, level + 1):
        if not high and k < len(frames):
            high = frames[k].regs.get(7, 0)
    return FrameContext(start, frames[level].pc, level, regs, caller, regs.get("rsp") or 0, high)


def _add_shape_fn(memory: Memory, frames: List[Frame[Library]], run: NativeFrame) -> None:
    """The op whose shape function the ``InferenceContext::Run`` frame ``run`` runs, with what it saw, on that
    frame: the ``Run`` frame and the shape function's own (just inside it) are searched for the context."""
    level = run.level or 0
    contexts = [_context(frames, k, run.start or 0) for k in (level, level - 1) if 0 <= k < len(frames)]
    from ..core.tensorflow.shapefn import read_shape_fn  # (where a shape function crashed: rare)

    op = read_shape_fn(InputsReader(memory), contexts)
    if op.get("type"):  # else the op is named from its Python wrapper, as where no kernel frame is left
        run.op = Op.from_json(op)


def _named(regs: Dict[int, int]) -> Dict[str, int]:
    return {DWARF_REGS[i]: v for i, v in regs.items() if i < len(DWARF_REGS)}
