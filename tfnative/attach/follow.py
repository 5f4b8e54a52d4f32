"""``attach --follow-children``: every descendant that runs Python gets an ``attach --pid`` session of its own.

The kernel's process events (``procwatch.py``: forks, execs, ends under the
target) say when a descendant appears.  One that runs Python is stopped at
once (SIGSTOP) and given its own ``Session`` over a ``ChildTarget`` (the
``--pid`` machinery: its own gdb, attached without loading every symbol),
on a thread of tfnative: the same ``--break``, ``--break-op``
and fatal-signal watch.  Each event it reports names its process (``process``:
pid, command line, ``TF_CONFIG`` task) and goes into the one document and
the one printer.  The parent's gdb is not involved: a child that never hits
anything costs the parent nothing.

When does a descendant run Python: at an ``exec`` of a Python interpreter
(``multiprocessing`` spawn, ``subprocess`` of a script, a ``tf.data`` service
worker started that way), stopped as the kernel reports its exec, before the
interpreter has run any of the child's code unless tfnative's watch thread is
late (a child that is over by then runs unwatched);
or a ``fork`` of a Python process that has not exec'd ``FORK_GRACE_S``
later (``multiprocessing`` fork; a fork that execs, as ``subprocess`` does,
is judged at its exec instead).  A fork child that dies within that grace
is still named (``children_killed``), without its stack.

Our SIGSTOP is ended with a SIGCONT once gdb holds the child: its parent can
see one stop and one continue (``SIGCHLD``, where it asks for those).

When the parent's session ends (or tfnative is interrupted), each child
session is asked to let go (``LET_GO_REQUEST``): it detaches, the child runs
on, untraced, as it would have without tfnative.  A child that exits is
dropped without a word; one killed by a signal is named like the parent's
other children, after its event.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set, TextIO, Type

from ..core import procfs, ranks
from ..core.model import ChildDeath, Document, Event
from ..errors import TfnativeError, start_thread
from ..gdb.mi import Gdb
from ..gdb.symbols import SymbolLoader
from ..output import report
from ..snapshot.many import runs_python
from .options import AttachOptions
from .procwatch import ChildWatch, listen
from .targets import PidTarget, Target, note_child

FORK_GRACE_S = 0.1  # a fork child that has not exec'd this long after its fork runs the parent's Python
STOP_WAIT_S = 10.0  # how long a new child may take to stop for us (our SIGSTOP), or its parent's gdb to let go
LET_GO_EVERY_S = 0.5  # a child session is asked again this often until it has let go

NO_EVENTS = ("--follow-children needs the kernel's process events (the netlink proc connector), which this "
             "system refuses (kernels before 6.6 give them to root only)")

LET_GO_REQUEST = "tfnative-let-go"  # the record that ends a session from outside (the parent ended)


def process_info(pid: int) -> Dict[str, Any]:
    """``{"pid", "cmdline", "task"?, "scheduler"?}`` of a process: its arguments joined by spaces, its
    ``TF_CONFIG`` task, its rank from its environment (``core/ranks.py``)."""
    info: Dict[str, Any] = {"pid": pid, "cmdline": " ".join(procfs.cmdline(pid))}
    env = procfs.environ(pid)
    task = ranks.task_of(env)
    if task is not None:
        info["task"] = task
    scheduler = ranks.scheduler_of(env)
    if scheduler is not None:
        info["scheduler"] = scheduler
    return info


def _wait_until(test: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def _stopped_or_gone(pid: int) -> bool:
    return procfs.state(pid) in (None, "T", "t", "Z", "X")


class ChildTarget(PidTarget):
    """A descendant that tfnative itself stopped (SIGSTOP) to attach: ``--pid``, except that it runs on
    when let go (it was not stopped by anyone else), and its watch goes on after ``--max-hits``."""

    def __init__(self, pid: int, at_exec: bool = False) -> None:
        """``at_exec``: stopped at its exec of the interpreter (its libraries may not be in yet)."""
        super().__init__(pid)
        self.at_exec = at_exec

    def begin_symbols(self, loader: SymbolLoader) -> None:
        """As after an exec while the dynamic loader has not mapped the program's libraries (libc) yet: a
        breakpoint on a libc function must not settle on the loader's own copy; else as after an attach."""
        try:
            loaded = any(re.match(r"libc[.-]", os.path.basename(m.path)) for m in procfs.maps(self.pid))
        except OSError:
            loaded = True
        if self.at_exec and not loaded:
            loader.after_exec()
        else:
            loader.after_attach()

    def check(self) -> None:
        """Wait for its parent's gdb to let go of it (a fork child), then as ``PidTarget.check``."""
        _wait_until(lambda: procfs.state(self.pid) is None or procfs.tracer(self.pid) == 0, STOP_WAIT_S)
        super().check()
        self.was_stopped = False

    def start(self, gdb: Gdb, doc: Document, running: Callable[[bool], None]) -> None:
        """Attach, then end the job-control stop our SIGSTOP began (gdb holds the child now).

        Left in place, that stop would put the child back in a stop at gdb's detach, and a stopped member
        of a process group that its parent's exit orphans gets the kernel's SIGHUP.
        """
        super().start(gdb, doc, running)
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def keeps_watch_after_hits(self) -> bool:
        return True

    def release(self, gdb: Gdb, running: bool, handed_off: bool) -> None:
        """Detach; the child runs on (never left in a stop: it was running when let go)."""
        self.was_stopped = False
        super().release(gdb, running, handed_off)


class ChildReport(report.Printer):
    """The printer of a child's session: its events are named by its process and join the parent's document.

    Text goes through the parent's printer under one lock (sessions run on several threads); the child's
    own summary is not printed (a child is named only by its events, and by ``children_killed``).
    """

    def __init__(self, parent: report.Printer, process: Dict[str, Any], doc: Document,
                 lock: threading.Lock) -> None:
        super().__init__(parent.out, native_all=parent.native_all, full=parent.full, group=parent.group)
        self.parent = parent
        self.process = process
        self.doc = doc
        self.lock = lock

    def note(self, text: str) -> None:
        with self.lock:
            self.parent.note("child %d: %s" % (self.process["pid"], text))

    def event(self, event: Event, hit: Optional[int] = None, max_hits: Optional[int] = None) -> None:
        event.process = self.process
        with self.lock:
            self.doc.events.append(event)
            self.parent.event(event, hit=hit, max_hits=max_hits)

    def summary(self, notes: List[str], doc: Document) -> None:
        pass


class ChildStream:
    """A child session's ``err``: each ``tfnative: `` line it writes names the child, under the printer's lock."""

    def __init__(self, out: TextIO, pid: int, lock: threading.Lock) -> None:
        self.out = out
        self.prefix = "tfnative: child %d: " % pid
        self.lock = lock

    def write(self, text: str) -> int:
        with self.lock:
            self.out.write(re.sub(r"(?m)^tfnative: ", lambda m: self.prefix, text))
            self.out.flush()
        return len(text)

    def flush(self) -> None:
        self.out.flush()


class ParentReport(report.Printer):
    """The target's printer under ``--follow-children``: its closing notes say they are about the target
    (a breakpoint that "never fired" there may have fired in a child)."""

    def summary(self, notes: List[str], doc: Document) -> None:
        super().summary(["%s: %s" % (doc.target_name(), n) for n in notes], doc)


@dataclasses.dataclass
class _Child:
    pid: int
    thread: threading.Thread
    session: Any = None  # attachloop.Session, once made


class Follower:
    """The descendants of one target, each under a session of its own (see the module's docstring).

    ``start(root, doc)`` once the target's pid is known; ``stop()`` when its session ends (idempotent):
    every child session lets go and ends before it returns.
    """

    def __init__(self, opts: AttachOptions, printer: report.Printer, err: TextIO,
                 session_class: Callable[..., Any]) -> None:
        """Raises TfnativeError (``NO_EVENTS``) where the kernel does not let tfnative hear of new processes."""
        sock = listen()
        if sock is None:
            raise TfnativeError(NO_EVENTS)
        self.sock: Optional[socket.socket] = sock
        self.opts = dataclasses.replace(opts, pid=None, json_path=None, interactive=False, save_core=None, timeout=None,
                                        follow_children=False)
        self.doc = Document(argv=[])  # the target's, from ``start``
        self.printer = printer
        self.err = err
        self.session_class = session_class
        self.lock = threading.Lock()  # the children's table, and the printer's output
        self.children: Dict[int, _Child] = {}
        self.execed: Set[int] = set()
        self.closing = False
        self.watch: Optional[ChildWatch] = None

    def start(self, root: int, doc: Document) -> None:
        """Follow the descendants of ``root``; their events go into ``doc``."""
        assert self.sock is not None
        self.doc = doc
        self.watch = ChildWatch(self.sock, root, self._on_process)
        self.sock = None
        start_thread(self.watch)

    # -- the kernel's events (the watch's thread: nothing here may block) ----
    def _on_process(self, what: str, pid: int) -> None:
        try:
            if what == "exec":
                self.execed.add(pid)
                if runs_python(pid):
                    self._follow(pid, at_exec=True)
            elif what == "fork":
                timer = threading.Timer(FORK_GRACE_S, self._fork_due, (pid,))
                timer.daemon = True
                timer.start()
            elif what == "exit":
                self.execed.discard(pid)
        except Exception as exc:  # noqa: BLE001 - the watch must go on for the other children
            self.printer.note("warning: --follow-children: process %d: %s" % (pid, exc))

    def _fork_due(self, pid: int) -> None:
        """``FORK_GRACE_S`` after a fork: a child that has not exec'd runs its parent's Python."""
        if pid in self.execed or procfs.state(pid) in (None, "Z", "X") or not runs_python(pid):
            return
        # its parent's gdb (detach-on-fork) takes its breakpoints out of the copy and lets go of it first
        _wait_until(lambda: procfs.state(pid) is None or procfs.tracer(pid) == 0, STOP_WAIT_S)
        self._follow(pid, at_exec=False)

    def _follow(self, pid: int, at_exec: bool) -> None:
        """Stop ``pid`` now (SIGSTOP) and start its session."""
        with self.lock:
            if self.closing or pid in self.children:
                return
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                return
            thread = threading.Thread(target=self._run_child, args=(pid, at_exec), name="tfnative-child-%d" % pid,
                                      daemon=True)
            self.children[pid] = _Child(pid, thread)
        start_thread(thread)

    # -- one child's session (its own thread) ------------------------------
    def _run_child(self, pid: int, at_exec: bool) -> None:
        child = self.children[pid]
        target = ChildTarget(pid, at_exec)
        try:
            if not _wait_until(lambda: _stopped_or_gone(pid), STOP_WAIT_S) or procfs.state(pid) in (None, "Z", "X"):
                return
            process = process_info(pid)
            cdoc = Document(argv=process["cmdline"].split(" "), pid=pid, attached=True, has_exit=True)
            printer = ChildReport(self.printer, process, self.doc, self.lock)
            target.check()
            session = self.session_class(self.opts, target, cdoc, printer, ChildStream(self.err, pid, self.lock))
            child.session = session
            session.run()
            if cdoc.exit is not None and "signal" in cdoc.exit:
                with self.lock:
                    note_child(ChildDeath(pid=pid, name=procfs.comm(pid) or _exe_name(process),
                                          signal=cdoc.exit["signal"], core_dumped=False), self.doc, self.printer)
        except TfnativeError as exc:
            if procfs.state(pid) not in (None, "Z", "X"):
                with self.lock:
                    self.printer.note("child %d not followed: %s" % (pid, exc))
        finally:
            if not target.attached and procfs.state(pid) in ("T", "t") and procfs.tracer(pid) == 0:
                try:
                    os.kill(pid, signal.SIGCONT)  # stopped by us, never held: it runs on
                except ProcessLookupError:
                    pass

    def stop(self) -> None:
        """Every child session lets go of its child and ends; no child is stopped or traced afterwards."""

        with self.lock:
            self.closing = True
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        live = list(self.children.values())
        while live:
            for child in live:  # every session is asked at once; each asked again until it has let go
                gdb: Optional[Gdb] = getattr(child.session, "gdb", None)
                if gdb is not None and not gdb.dead:
                    gdb.post(LET_GO_REQUEST)
            deadline = time.monotonic() + LET_GO_EVERY_S
            for child in live:
                child.thread.join(max(0.0, deadline - time.monotonic()))
            live = [c for c in live if c.thread.is_alive()]


def _exe_name(process: Dict[str, Any]) -> str:
    first = (process.get("cmdline") or "").split(" ")[0]
    return re.sub(r".*/", "", first)


class FollowingTarget:
    """A target (``--follow-children``) whose Python descendants each get a session (``Follower``).

    Everything is the inner target's; the follower starts once the target's pid is known and stops when
    the target's session ends, however it ends.
    """

    def __init__(self, inner: Target, follower: Follower) -> None:
        self.inner = inner
        self.follower = follower
        self.owned = inner.owned

    @property
    def pid(self) -> int:
        return self.inner.pid

    def start(self, gdb: Gdb, doc: Document, running: Callable[[bool], None]) -> None:
        self.inner.start(gdb, doc, running)
        self.follower.start(self.inner.pid, doc)

    def begin_symbols(self, loader: SymbolLoader) -> None:
        self.inner.begin_symbols(loader)

    def alive(self) -> bool:
        return self.inner.alive()

    def halt(self, gdb: Gdb) -> None:
        self.inner.halt(gdb)

    def keeps_watch_after_hits(self) -> bool:
        return self.inner.keeps_watch_after_hits()

    def let_go(self, gdb: Gdb) -> None:
        self.inner.let_go(gdb)

    def interrupted(self, gdb: Gdb, running: bool, signum: int) -> None:
        """The children are let go first, then the target as its kind requires."""
        self.follower.stop()
        self.inner.interrupted(gdb, running, signum)

    def gdb_died(self, printer: report.Printer, traps: List[int]) -> None:
        self.follower.stop()
        self.inner.gdb_died(printer, traps)

    def setup_failed(self) -> None:
        self.follower.stop()
        self.inner.setup_failed()

    def release(self, gdb: Gdb, running: bool, handed_off: bool) -> None:
        self.inner.release(gdb, running, handed_off)

    def end(self, printer: report.Printer) -> None:
        self.inner.end(printer)

    def wait(self, interrupted: Type[BaseException], doc: Document, printer: report.Printer,
             exit_payload: Optional[Dict[str, Any]]) -> Optional[int]:
        """The target's end as the inner target says; then the children still followed are let go."""
        try:
            return self.inner.wait(interrupted, doc, printer, exit_payload)
        finally:
            self.follower.stop()


__all__ = ["ChildReport", "ChildStream", "ChildTarget", "Follower", "FollowingTarget", "ParentReport",
           "process_info"]
