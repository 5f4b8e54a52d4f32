"""What ``tfnative attach`` (and ``report``) was asked for, built once by the CLI (``cli/attach.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, List, Optional

from ..gdb.options import GdbOptions
from .tfenv import DebugSwitches

if TYPE_CHECKING:
    from ..core.model import Document, Event


@dataclass
class AttachOptions:
    """A script to start (or ``--pid`` to attach to), where to stop, what to show and where to write it."""

    script: Optional[str]  # None with module
    args: List[str]
    python: str
    module: Optional[str] = None  # -m MODULE, as python -m runs it
    breaks: List[str] = field(default_factory=list)
    break_ops: List[str] = field(default_factory=list)
    break_throw: Optional[str] = None  # --break-throw [TYPE]: "" for any type, None when not given
    source_dirs: List[str] = field(default_factory=list)
    max_hits: int = 1
    all_threads: bool = False
    native_all: bool = False
    json_path: Optional[str] = None
    interactive: bool = False
    full: bool = False
    switches: DebugSwitches = field(default_factory=DebugSwitches)
    gdb: GdbOptions = field(default_factory=GdbOptions)
    op_origins: bool = False  # --op-origins: the script's hook records where each graph op is created
    pid: Optional[int] = None  # --pid: attach to this running process instead of starting a script
    timeout: Optional[float] = None  # --timeout S: a ``timeout`` snapshot after S seconds, then end (exit 124)
    save_core: Optional[str] = None  # --save-core FILE (or the old --core FILE): the core at the first fatal signal
    follow_children: bool = False  # --follow-children: every descendant running Python gets a session (follow.py)
    # the driver's last word on the document before it is written (--repro: the reproducer; attach/repro.py)
    on_document: Optional[Callable[[Document], None]] = None
    # the driver's word at each --break-op stop (the document so far, the stop's event, the hit's number), after
    # the event is printed and while the target is held (--repro: the script of that op on its inputs;
    # attach/repro.py)
    on_op_stop: Optional[Callable[[Document, Event, int], None]] = None
    variables: bool = False  # --locals: each stop's Python frames' and the user's kernel frames' arguments, locals

    @property
    def target_argv(self) -> List[str]:
        """What follows the interpreter on the command line: ``SCRIPT ARGS`` or ``-m MODULE ARGS``."""
        if self.module is not None:
            return ["-m", self.module, *self.args]
        return [self.script or "", *self.args]
