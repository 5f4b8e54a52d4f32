"""What an ``attach`` session runs on: a script it launches, or a process that already runs (``--pid``).

The loop (``attach/session.py``) is the same for both; a target says how gdb
gets hold of the process (``start``), what the symbol loader starts from,
what happens after the last hit, and how the session ends: a launched
script is our child and runs to its end (its exit status is tfnative's); an
attached process is not ours, so tfnative detaches and leaves it as it was
(running, or stopped if it was stopped), and its end is known only while gdb
holds it (the ptrace exit event).
"""

from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import time
from typing import Any, Callable, Dict, List, Optional, Protocol, Type

from ..core import procfs
from ..core.model import ChildDeath, Document
from ..errors import TfnativeError
from ..gdb import control
from ..gdb.control import loaded_program
from ..gdb.mi import Gdb
from ..gdb.symbols import SymbolLoader
from ..output.report import Printer
from ..snapshot.process import check_pid
from ..sources.permissions import ptrace_refused_message
from ..sources.ptrace import ensure_not_stopped
from .launcher import PausedChild
from .procwatch import ChildWatch
from .traps import restore as restore_traps

TERM_GRACE_S = 5.0  # --timeout: SIGTERM, then SIGKILL after this long
HALT_S = 60.0  # how long an attached process may take to stop for us (every thread, under load)


class Target(Protocol):
    """What the loop needs of a target, in the order a session uses it."""

    owned: bool  # our child: it runs to its end and dies with us (gdb too); else we detach and it runs on

    @property
    def pid(self) -> int: ...

    def start(self, gdb: Gdb, doc: Document, running: Callable[[bool], None]) -> None:
        """Get the process under gdb, stopped where breakpoints can be armed."""

    def begin_symbols(self, loader: SymbolLoader) -> None:
        """Tell the symbol loader where the process stands (after its exec, or attached with libraries in)."""

    def alive(self) -> bool: ...

    def halt(self, gdb: Gdb) -> None:
        """Bring the running process to a stop under gdb."""

    def keeps_watch_after_hits(self) -> bool:
        """After ``--max-hits``: go on watching (True) or let go of the process (False)."""

    def let_go(self, gdb: Gdb) -> None:
        """Detach now; the process is stopped under gdb."""

    def interrupted(self, gdb: Gdb, running: bool, signum: int) -> None:
        """Our SIGINT/SIGTERM/SIGHUP: let go of the process as its kind requires."""

    def gdb_died(self, printer: Printer, traps: List[int]) -> None:
        """gdb is gone; ``traps``: the addresses where it may have left a breakpoint's ``int3``."""

    def setup_failed(self) -> None: ...

    def release(self, gdb: Gdb, running: bool, handed_off: bool) -> None:
        """The loop is over: gdb lets go of the process and closes."""

    def end(self, printer: Printer) -> None:
        """After ``--timeout``: end the process (ours) or leave it running (not ours)."""

    def wait(self, interrupted: Type[BaseException], doc: Document, printer: Printer,
             exit_payload: Optional[Dict[str, Any]]) -> Optional[int]:
        """The process's return code (-N: signal N), or None when it runs on."""


class LaunchedTarget:
    """The user's script, started paused by us (``launcher.py``) and caught at its ``exec``."""

    owned = True  # our child: it runs to its end, and dies with us

    def __init__(self, exe: str, argv: List[str], env: Dict[str, str]) -> None:
        self.exe = exe
        self.argv = argv
        self.env = env
        self.child: Optional[PausedChild] = None
        self.watch: Optional[ChildWatch] = None

    @property
    def pid(self) -> int:
        assert self.child is not None
        return self.child.pid

    def start(self, gdb: Gdb, doc: Document, running: Callable[[bool], None]) -> None:
        """Start the script paused, attach, and stop at its ``exec`` of the interpreter.

        ``running`` is told each time the script is resumed (True) or stops (False).
        """
        self.child = PausedChild(self.exe, self.argv, gdb.pid, env=self.env)
        doc.pid = self.child.pid
        self.child.wait_paused()
        control.attach(gdb, self.child.pid)
        self.child.end_job_stop()
        gdb.console_command("catch exec")
        gdb.command("-exec-continue")
        running(True)
        while True:
            stop = gdb.wait_event("stopped", None) or {}
            running(False)
            if stop.get("reason") == "exec":
                break
            if stop.get("reason", "").startswith("exited"):
                raise TfnativeError("the script's launcher exited before running %s" % self.exe)
            gdb.command("-exec-continue")
            running(True)
        gdb.command("-break-delete")  # the exec catchpoint
        # The script's descendants that die of a signal are named: from the kernel's process
        # events where we may listen (root), else at the script's SIGCHLD stops (best effort).
        self.watch = ChildWatch.start_for(self.child.pid)
        if self.watch is None:
            gdb.console_command("handle SIGCHLD stop print pass")

    def begin_symbols(self, loader: SymbolLoader) -> None:
        loader.after_exec()

    def alive(self) -> bool:
        return self.child is not None and self.child.poll() is None

    def halt(self, gdb: Gdb) -> None:
        """Bring the running script to a stop under gdb (a SIGSTOP gdb swallows)."""
        control.stop_for_detach(gdb, self.pid)

    def let_go(self, gdb: Gdb) -> None:
        """Detach now (the script is stopped under gdb); it runs on until ``end``."""
        control.detach(gdb, False, self.pid)

    def keeps_watch_after_hits(self) -> bool:
        """After ``--max-hits`` the script runs on under gdb: a fatal signal is still reported."""
        return True

    def interrupted(self, gdb: Gdb, running: bool, signum: int) -> None:
        """Our Ctrl-C / SIGTERM: detach and let the script have the signal (the terminal's SIGINT it had)."""
        if self.alive():
            assert self.child is not None
            control.detach(gdb, running, self.child.pid)
            self.child.resume_if_stopped()
            if signum != signal.SIGINT:
                try:
                    os.kill(self.child.pid, signum)
                except ProcessLookupError:
                    pass

    def gdb_died(self, printer: Printer, traps: List[int]) -> None:
        printer.note("gdb died; the script cannot run on safely with breakpoint traps in it: killing it")
        if self.child is not None:
            self.child.kill()

    def setup_failed(self) -> None:
        """Setup failed (attach refused, bad gdb...): the script never ran; end it."""
        if self.child is not None:
            self.child.kill()
        if self.watch is not None:
            self.watch.stop()

    def release(self, gdb: Gdb, running: bool, handed_off: bool) -> None:
        """The loop is over: gdb lets go of the script (it runs on unless handed off)."""
        if self.alive() and running and not gdb.dead:
            control.detach(gdb, running, self.pid)
        gdb.close()
        if self.alive() and not handed_off:
            assert self.child is not None
            self.child.resume_if_stopped()

    def end(self, printer: Printer) -> None:
        """``--timeout``: the detached script is ended, SIGTERM first, SIGKILL after ``TERM_GRACE_S``."""
        assert self.child is not None
        if not self.alive():
            return
        printer.note("ending the script: SIGTERM, SIGKILL in %.0f s" % TERM_GRACE_S)
        self.child.resume_if_stopped()
        try:
            os.kill(self.child.pid, signal.SIGTERM)
            self.child.wait(TERM_GRACE_S)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            self.child.kill()

    def wait(self, interrupted: Type[BaseException], doc: Document, printer: Printer,
             exit_payload: Optional[Dict[str, Any]]) -> Optional[int]:
        """Wait for the script; a second Ctrl-C / SIGTERM ends it for good.  Its return code (-N: signal N)."""
        assert self.child is not None
        while True:
            try:
                returncode = self.child.wait()
                break
            except interrupted:
                self.child.kill()
        if self.watch is not None:
            for dead in self.watch.stop():
                note_child(dead, doc, printer)
        return returncode


class PidTarget:
    """A process that already runs (``--pid``): gdb attaches to it and, at the end, detaches.

    gdb here does not die with tfnative: if tfnative is killed, gdb reads the
    end of its input, detaches (taking its breakpoint traps out) and quits.
    """

    owned = False

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.was_stopped = False
        self.attached = False

    def check(self) -> None:
        """Refuse, in one line, what cannot be attached to (see ``refusal``)."""
        why = refusal(self.pid)
        if why:
            raise TfnativeError(why)
        self.was_stopped = procfs.state(self.pid) in ("T", "t")

    def executable(self) -> str:
        """The process's executable; where the kernel denies even that, it denies ptrace too: say why.

        A program run through the loader (``ld-linux-x86-64.so.2 python3.14 ...``) has the loader as its
        ``/proc/PID/exe``: the mapped ``python3.X`` is the executable then (gdb reads its symbols from it)."""
        try:
            return loaded_program(self.pid) or procfs.exe(self.pid)
        except PermissionError:
            raise TfnativeError(ptrace_refused_message(self.pid, "reading /proc/%d/exe" % self.pid)) from None
        except OSError as exc:
            raise TfnativeError("process %d: cannot read its executable (%s)" % (self.pid, exc.strerror)) from None

    def start(self, gdb: Gdb, doc: Document, running: Callable[[bool], None]) -> None:
        """Attach: the process stops where it is, its libraries already loaded."""
        control.attach(gdb, self.pid)
        self.attached = True

    def halt(self, gdb: Gdb) -> None:
        """Bring the running process to a stop under gdb: a SIGSTOP that gdb swallows, however long it takes.

        Never gdb's ``-exec-interrupt``, which would send SIGINT to the process's group: not ours to interrupt.
        """
        gdb.console_command("handle SIGSTOP stop print nopass", timeout=30)
        os.kill(self.pid, signal.SIGSTOP)
        if gdb.wait_event("stopped", HALT_S) is None:
            raise TfnativeError("process %d did not stop within %.0f s" % (self.pid, HALT_S))

    def _detach(self, gdb: Gdb, running: bool) -> None:
        """Detach (halting the process first if it runs); nothing of gdb's is left in it."""
        control.detach(gdb, running, self.pid, halt=lambda: self.halt(gdb), timeout=30)
        self.attached = False

    def let_go(self, gdb: Gdb) -> None:
        """Detach now (the process is stopped under gdb); it runs on."""
        self._detach(gdb, False)

    def begin_symbols(self, loader: SymbolLoader) -> None:
        loader.after_attach()

    def alive(self) -> bool:
        return procfs.state(self.pid) not in (None, "Z", "X")

    def keeps_watch_after_hits(self) -> bool:
        """After ``--max-hits`` tfnative detaches: the process runs on with no trap in it."""
        return False

    def interrupted(self, gdb: Gdb, running: bool, signum: int) -> None:
        """Our Ctrl-C / SIGTERM: detach; the signal was ours, not the process's."""
        if self.attached and self.alive():
            self._detach(gdb, running)
        self.attached = False

    def gdb_died(self, printer: Printer, traps: List[int]) -> None:
        """Put back the instructions gdb's traps covered (``traps.py``); the process is not ours to kill."""
        self.attached = False
        restored = restore_traps(self.pid, traps) if traps and self.alive() else 0
        printer.note("gdb died: %d breakpoint trap(s) it left in process %d put back%s"
                     % (restored, self.pid, "" if not traps else
                        " (a thread that reached one before that dies of SIGTRAP)"))

    def setup_failed(self) -> None:
        pass

    def release(self, gdb: Gdb, running: bool, handed_off: bool) -> None:
        """Detach (if still attached) and leave the process as it was: running, or stopped."""
        if self.attached and self.alive() and not gdb.dead and not handed_off:
            self._detach(gdb, running)
        self.attached = False
        gdb.close()
        if handed_off or not self.alive():
            return
        if self.was_stopped:
            _ensure_stopped(self.pid)
        else:
            ensure_not_stopped(self.pid)

    def end(self, printer: Printer) -> None:
        """``--timeout``: the process is not ours; it was detached and runs on."""
        printer.note("detached: process %d runs on" % self.pid)

    def wait(self, interrupted: Type[BaseException], doc: Document, printer: Printer,
             exit_payload: Optional[Dict[str, Any]]) -> Optional[int]:
        """The process's return code (-N: signal N) if it ended under gdb, else None (it runs on)."""
        return return_code(exit_payload)


def return_code(stop: Optional[Dict[str, Any]]) -> Optional[int]:
    """The return code (``-N`` for signal N) in gdb's ``exited`` stop record, None without one.

    gdb writes ``exit-code`` in octal.
    """
    if stop is None:
        return None
    reason = stop.get("reason", "")
    if reason == "exited-normally":
        return 0
    if reason == "exited":
        return int(stop.get("exit-code", "0"), 8)
    if reason == "exited-signalled":
        name = stop.get("signal-name", "")
        number = getattr(signal, name, None)
        return -int(number) if number is not None else -int(re.sub(r"\D", "", name) or "0")
    return None


def _ensure_stopped(pid: int) -> None:
    """A process that was stopped before we attached is stopped again after we let go."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        state = procfs.state(pid)
        if state in (None, "T", "t"):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        pass


def refusal(pid: int) -> Optional[str]:
    """Why ``attach --pid`` cannot take ``pid``, in one line, or None.

    No such process, a zombie, ourselves, another user's, one already traced
    (the tracer named); the kernel's own refusal comes at attach
    (``session.ptrace_refused_message``).
    """
    try:
        tracer = procfs.tracer(pid)
    except OSError:
        tracer = 0
    if tracer:
        return ("process %d is already traced by pid %d (%s): detach that debugger first"
                % (pid, tracer, procfs.comm(tracer) or "?"))
    try:
        check_pid(pid)
    except TfnativeError as exc:
        return str(exc)
    return None


def describe(pid: int) -> Dict[str, Optional[str]]:
    """The interpreter (``python3.11``) and TensorFlow version (``2.21``) a process runs, None where none.

    From the mapped files: the executable or a ``libpython3.X`` for Python;
    the package directory holding ``libtensorflow_framework.so.*`` and the
    ``dist-info`` beside it for TensorFlow.
    """
    try:
        paths = {m.path for m in procfs.maps(pid) if m.path.startswith("/")}
    except OSError:
        paths = set()
    try:
        exe = os.path.basename(procfs.exe(pid))
    except OSError:
        exe = ""
    # The executable, else a mapped ``python3.X``: run through the loader (``ld-linux-x86-64.so.2
    # python3.14 ...``), /proc/PID/exe names the loader and the interpreter is one of the mappings.
    python = next((name for name in [exe] + sorted(os.path.basename(p) for p in paths)
                   if re.fullmatch(r"python3\.\d+", name)), None)
    if python is None:
        lib = next((os.path.basename(p) for p in paths if re.match(r"libpython3\.\d+", os.path.basename(p))), None)
        if lib:
            python = re.match(r"lib(python3\.\d+)", lib).group(1)  # type: ignore[union-attr]
    tf = None
    framework = next((p for p in paths if os.path.basename(p).startswith("libtensorflow_framework.so")), None)
    if framework:
        site = os.path.dirname(os.path.dirname(framework))
        root = "/proc/%d/root" % pid
        for info in sorted(glob.glob(os.path.join(root + site, "tensorflow*-*.dist-info"))
                           + glob.glob(os.path.join(site, "tensorflow*-*.dist-info"))):
            found = re.match(r"tensorflow(?:[-_]\w+)?-(\d+)\.(\d+)", os.path.basename(info))
            if found:
                tf = "%s.%s" % found.groups()
                break
        tf = tf or "?"
    return {"python": python, "tensorflow": tf}


def note_child(dead: ChildDeath, doc: Document, printer: Printer) -> None:
    """Record and say, once, that a child of the script died of a signal."""
    if any(c.pid == dead.pid for c in doc.children_killed):
        return
    doc.children_killed.append(dead)
    name = " (%s)" % dead.name if dead.name else ""
    printer.note("child process %d%s died of %s%s" % (dead.pid, name, dead.signal,
                                                        " (core dumped)" if dead.core_dumped else ""))


__all__ = ["LaunchedTarget", "PidTarget", "Target", "describe", "refusal", "return_code"]
