"""``tfnative attach``: one loop over a target, one small handler per kind of stop.

Follow one event from the command line to the report:

1. ``cli.attach`` builds ``AttachOptions`` and calls ``run_attach`` (``attach/run.py``), which
   picks the target (``targets.py``: a script it launches, or ``--pid``).
2. ``Session.run`` starts gdb, lets the target ``start`` (attach; for a
   script, catch its ``exec``), arms the breakpoints (``breakpoints.py``;
   ``gdb/symbols.py`` resolves them from our index), and resumes the target.
3. ``Session._loop`` reads gdb's asynchronous records one at a time.  Each
   goes to its record handler (``RECORDS``); a ``*stopped`` record goes to
   the stop handler for its kind (``stop_kind`` and ``STOPS``: breakpoint,
   op dispatch, numerics, child, fatal signal, library event, exit,
   other); a quiet moment goes to ``on_idle`` (library symbols, ``--timeout``).
4. A handler that reports makes the event at the stop (``stopevent.make``:
   tfnative's unwinder, Python frames, ops), appends it to the document and
   prints it (``report.py``), and says what the loop does next (``Next``).
5. ``Session.run`` lets the target go (detach, hand-off, end), waits for its
   end where it is ours, and writes the summary and the JSON document.

A new mode is a new target or a new handler in the tables, not a branch in the loop.
"""

from __future__ import annotations

import contextlib
import enum
import re
import threading
import time
from typing import Any, Callable, Dict, List, Optional, TextIO, Union

from ..analysis.event import add_op_origin, finish, numerics_op
from ..core.model import Capture, Document, Event, EventKind
from ..errors import GdbDied, GdbError, Interrupted, SignalGuard, TfnativeError
from ..gdb import ops as tfops
from ..gdb.breakpoints import CXA_THROW, Breakpoints
from ..gdb.control import CAPTURE_TIMEOUT, FATAL_SIGNALS, gdb_tail, setup_signals, source_paths, start_gdb
from ..gdb.mi import RESUME_FAILED, Gdb
from ..gdb.symbols import QUIET_S, WATCH_S, SymbolLoader
from ..output import report
from ..output.verdicttext import verdict_lines
from ..sources import sessionsock
from ..sources.modules import file_root
from . import stopevent
from .follow import LET_GO_REQUEST
from .handoff import interactive_gdb, park
from .keepcore import write_core
from .launcher import exit_status
from .options import AttachOptions
from .stopsignals import SNAPSHOT_REQUEST, SnapshotOnQuit, has_handler, note_dead_children, reraised
from .targets import Target, describe
from .tfenv import NUMERICS_SIGNAL_NAME

TIMEOUT_EXIT = 124  # as coreutils timeout
STACK_REQUEST = "tfnative-stack"  # the record a ``tfnative stack --pid`` request queues (``sessionsock.py``)


class Next(enum.Enum):
    """What the loop does after a handler."""

    WAIT = "wait"  # nothing stopped: read the next record
    RESUME = "resume"  # the target stopped: let it go on
    END = "end"  # the session is over (the target exited, or we let go of it)
    HANDOFF = "handoff"  # the stopped target goes to an interactive gdb


def stop_kind(payload: Dict[str, Any], opbreaks: tfops.OpBreaks) -> str:
    """Which handler a ``*stopped`` record goes to (a key of ``Session.STOPS``)."""
    reason = payload.get("reason", "")
    if reason.startswith("exited"):
        return "exit"
    if reason == "solib-event":
        return "library"
    if reason == "breakpoint-hit":
        return "op-dispatch" if opbreaks.is_dispatch(payload.get("bkptno")) else "breakpoint"
    if reason == "signal-received":
        name = payload.get("signal-name")
        if name == NUMERICS_SIGNAL_NAME:
            return "numerics"
        if name == "SIGCHLD":
            return "child"
        if name in FATAL_SIGNALS:
            return "fatal-signal"
    return "other"


class Session:
    """One ``attach`` session: gdb, the target, the breakpoints, the document; ``run`` is the whole story."""

    def __init__(self, opts: AttachOptions, target: Target, doc: Document, printer: report.Printer,
                 err: TextIO) -> None:
        self.opts = opts
        self.target = target
        self.doc = doc
        self.printer = printer
        self.err = err
        self.bps = Breakpoints()
        self.opbreaks = tfops.OpBreaks(opts.break_ops, self.bps)
        self.breaks = opts.breaks + self.opbreaks.dispatch_functions
        self.throw = self.bps.add_throw(opts.break_throw or None) if opts.break_throw is not None else None
        self.gdb: Gdb
        self.loader: Optional[SymbolLoader] = None
        self.running = False
        self.handoff = False
        self.hits = 0
        self.exit_stop: Optional[Dict[str, Any]] = None  # gdb's record of the target's end
        self.interrupted: Optional[int] = None  # our own signal that ended the session
        self.timed_out = False
        self.deadline: Optional[float] = None

    # -- the story ---------------------------------------------------------
    def run(self, keep: Optional[List[Document]] = None) -> int:
        started = time.time()
        if self.opts.timeout is not None:
            self.deadline = time.monotonic() + self.opts.timeout
        target, printer = self.target, self.printer
        # Signals are the main thread's: a session on another thread (a child's, ``follow.py``) is ended
        # by a ``LET_GO_REQUEST`` instead.
        main = threading.current_thread() is threading.main_thread()
        with SignalGuard() if main else contextlib.nullcontext():
            self.gdb = gdb = start_gdb(self.opts.gdb, self.opts.source_dirs, die_with_parent=target.owned)
            quit_guard = SnapshotOnQuit(gdb) if main else None
            server = None
            try:
                self._setup()
                server = self._listen()
                self._loop()
                self.bps.refresh(gdb)
                if self.handoff:
                    park(gdb, target.pid)
            except Interrupted as exc:
                printer.note("interrupted by %s: detaching" % exc)
                target.interrupted(gdb, self.running, exc.signum)
                self.interrupted = exc.signum
                self.running = False
            except GdbDied:
                target.gdb_died(printer, sorted(self.bps.traps))
                raise TfnativeError("gdb exited unexpectedly%s" % gdb_tail(gdb), exit_code=3)
            except BaseException:
                self._end_stopped_script()
                target.setup_failed()
                raise
            finally:
                if server is not None:
                    server.close()
                if quit_guard is not None:
                    quit_guard.restore()
                target.release(gdb, self.running, self.handoff)
            if self.timed_out:
                target.end(printer)
            if self.handoff:
                printer.note("handing the stopped %s to an interactive gdb (tf-bt prints the mixed stack)"
                             % ("script" if target.owned else "process"))
                interactive_gdb(self.opts, target.pid)
            returncode = target.wait(Interrupted, self.doc, printer, self.exit_stop)
            return self._finish(returncode, started, keep)

    def _setup(self) -> None:
        """Signals, the target under gdb, the breakpoints armed, the target resumed."""
        gdb, opts = self.gdb, self.opts
        setup_signals(gdb, [NUMERICS_SIGNAL_NAME] if opts.switches.check_numerics else [])
        if self.target.owned:
            # Ctrl-\ on the terminal reaches the script too (our process group): it is ours, for a snapshot.
            gdb.console_command("handle SIGQUIT nostop noprint nopass")
        self.target.start(gdb, self.doc, self._set_running)
        source_paths(gdb, opts.source_dirs, self.err)
        self.bps.arm(gdb, self.breaks + ([self.throw] if self.throw else []), self.err, CAPTURE_TIMEOUT)
        self.loader = loader = SymbolLoader(gdb, self.target.pid, self.breaks + ([CXA_THROW] if self.throw else []),
                                            opts.gdb.full_symbols, self.err,
                                            self.bps)
        loader.want_names(list(self.opbreaks.pending))
        self.target.begin_symbols(loader)
        loader.sync()
        if self.bps.all_resolved():
            loader.settle()
        if not self.target.owned:
            self._say_attached()
        self._resume()

    def _end_stopped_script(self) -> None:
        """A session that failed with our script stopped under gdb (a breakpoint gdb refused): gdb ends it,
        and reaps it as its tracer, rather than leave a traced, stopped process for our kill to wait on."""
        if self.target.owned and not self.running and not self.gdb.dead:
            with contextlib.suppress(TfnativeError):
                self.gdb.console_command("kill", timeout=10)

    def _listen(self) -> Optional[sessionsock.Server]:
        """Answer ``tfnative stack --pid`` for the target from now on (``sessionsock.py``)."""
        try:
            return sessionsock.Server(self.target.pid, lambda request: self.gdb.post(STACK_REQUEST, request))
        except OSError as exc:
            self.printer.note("warning: tfnative stack --pid %d cannot ask this session: %s" % (self.target.pid, exc))
            return None

    def _say_attached(self) -> None:
        """``tfnative: attached to PID (python3.11, TF 2.21): armed LOCATIONS`` (or: watching)."""
        what = describe(self.target.pid)
        parts = [what["python"] or "no Python"] + (["TF %s" % what["tensorflow"]] if what["tensorflow"] else [])
        armed = [loc.text for loc in self.bps.locations.values() if not loc.internal]
        doing = "armed %s" % ", ".join(armed) if armed else "watching for a fatal signal or its exit"
        if self.deadline is not None:
            doing += " (timeout %gs)" % (self.opts.timeout or 0.0)
        self.printer.note("attached to %d (%s): %s" % (self.target.pid, ", ".join(parts), doing))
        if what["python"] is None:
            self.printer.note("note: process %d runs no Python that tfnative can see: native stacks only"
                              % self.target.pid)

    def _set_running(self, running: bool) -> None:
        self.running = running

    def _resume(self) -> None:
        try:
            self.gdb.command("-exec-continue")
        except GdbError as exc:
            # A fatal signal passed on can kill the process while gdb still resumes its threads: gdb
            # answers "Couldn't get registers: No such process." and its exit record follows.
            if "No such process" not in str(exc):
                raise
        self.running = True

    def _loop(self) -> None:
        """Read gdb's records and hand each to its handler until one ends the session."""
        gdb, loader = self.gdb, self.loader
        assert loader is not None
        while True:
            rec = gdb.next_event(self._wait_s())
            if self.running:
                loader.watch(due_only=True)  # also when gdb's records keep coming (thread events)
            if rec is None:
                step = self.on_idle()
            else:
                handler = self.RECORDS.get(rec.get("message") or "")
                if handler is None:
                    continue
                step = handler(self, rec.get("payload") or {})
            if step is Next.WAIT:
                continue
            if step is Next.HANDOFF:
                self.handoff = True
            if step is not Next.RESUME:
                return
            loader.watch()  # before gdb puts its traps back: none where a library went away
            self._resume()

    def _wait_s(self) -> Optional[float]:
        """How long the loop may wait for gdb's next record before ``on_idle``."""
        loader = self.loader
        assert loader is not None
        if not self.running:
            return None
        wait = QUIET_S if loader.pending else WATCH_S if loader.released else None
        if self.deadline is not None:
            left = max(0.0, self.deadline - time.monotonic())
            wait = left if wait is None else min(wait, left)
        return wait

    def _finish(self, returncode: Optional[int], started: float, keep: Optional[List[Document]]) -> int:
        doc = self.doc
        if returncode is not None:
            doc.set_exit(returncode)
        doc.unresolved = self.bps.unresolved()
        doc.dumps = self.opts.switches.produced(started)
        summary = self.bps.summary()
        unseen = self.opbreaks.unseen()
        if unseen:  # said better than "breakpoint op T resolved but never fired"
            for line in unseen:
                self.err.write("tfnative: %s\n" % line)
            said = tuple("breakpoint %s " % tfops.op_location(t) for t in self.opbreaks.pending
                         if t not in self.opbreaks.ran)
            summary = [line for line in summary if not line.startswith(said)]
        finish(doc)
        if self.opts.on_document is not None:  # (its lines before the triage's, which comes last)
            self.opts.on_document(doc)
        self.printer.summary(summary, doc)
        if self.opts.json_path:
            report.write(doc, self.opts.json_path)
        if keep is not None:
            keep.append(doc)
        if self.timed_out:
            return TIMEOUT_EXIT
        if returncode is not None:
            return exit_status(returncode)
        return 128 + self.interrupted if self.interrupted else 0

    # -- record handlers: the target runs on -------------------------------
    def on_breakpoint_note(self, payload: Dict[str, Any]) -> Next:
        self.bps.note(payload.get("bkpt") or {})
        return Next.WAIT

    def on_library_loaded(self, payload: Dict[str, Any]) -> Next:
        assert self.loader is not None
        self.loader.note_library(payload)
        if self.opbreaks.pending:  # where this host reads the file (a target in a container: under its root)
            self.opbreaks.note_library(file_root(self.target.pid) + (payload.get("target-name") or ""))
        return Next.WAIT

    def on_stopped(self, payload: Dict[str, Any]) -> Next:
        self.running = False
        return self.STOPS[stop_kind(payload, self.opbreaks)](self, payload)

    def on_idle(self) -> Next:
        """No record for a moment: ``--timeout`` when it is due, else the new libraries' symbols."""
        if self.deadline is not None and self.running and time.monotonic() >= self.deadline:
            return self.on_timeout()
        assert self.loader is not None
        self.loader.quiet_sync()
        return Next.WAIT

    def on_snapshot_request(self, payload: Dict[str, Any]) -> Next:
        """Ctrl-\\ (our SIGQUIT): every thread as a ``snapshot`` event; the target runs on."""
        stopped_here = self.running
        if stopped_here:
            self.target.halt(self.gdb)
            self.gdb.console_command("handle SIGSTOP nostop noprint pass")  # as before: the target's own
            self.running = False
        event = self._event("snapshot", all_threads=True, hang=True)
        self.doc.events.append(event)
        self.printer.event(event)
        for line in verdict_lines(event.triage, event.pid):
            self.printer.note(line)
        return Next.RESUME if stopped_here else Next.WAIT

    def on_stack_request(self, payload: Dict[str, Any]) -> Next:
        """``tfnative stack --pid`` asks for the target's stacks: taken as for an event, sent back, not
        reported here; the target runs on."""
        stopped_here = self.running
        reply: Union[Capture, Dict[str, str]]
        try:
            if stopped_here:
                self.target.halt(self.gdb)
                self.gdb.console_command("handle SIGSTOP nostop noprint pass")  # as before: the target's own
                self.running = False
            reply = stopevent.stacks(self.gdb, self.loader, payload["which"], payload["locals"])
        except (GdbError, TfnativeError) as exc:
            reply = {"error": str(exc)}
        payload["reply"](reply)
        self.printer.note("answered tfnative stack --pid %d" % self.target.pid)
        return Next.RESUME if stopped_here else Next.WAIT

    def on_let_go(self, payload: Dict[str, Any]) -> Next:
        """Asked from outside to end (``follow.py``: the session's parent ended): detach, the target runs on."""
        if self.running:
            self.target.halt(self.gdb)
            self.running = False
        self.target.let_go(self.gdb)
        return Next.END

    def on_resume_failed(self, payload: Dict[str, Any]) -> Next:
        """gdb answered a resume, then failed it (``mi.RESUME_FAILED``).

        A process dying under a fatal signal ("No such process"): its exit record follows.  A breakpoint gdb
        cannot insert (``--break '*0'``, an address nothing is mapped at): the target stays stopped and no
        stop record will come; the session ends with one line naming the location (the script is ended, a
        ``--pid`` process let go, as for any error)."""
        msg = str(payload.get("msg") or "")
        if "No such process" in msg:
            return Next.WAIT
        self.running = False
        lines = [str(ln).strip() for ln in payload.get("lines") or [] if str(ln).strip()]
        text = " ".join(lines)
        numbers = re.findall(r"Cannot insert breakpoint (-?\d+)", text)
        reasons = [ln for ln in lines if not re.match(r"(Warning:|Cannot insert breakpoint|Command aborted)", ln)
                   and not ln.startswith("gdb, after answering")]
        why = reasons[-1].rstrip(".") if reasons else msg
        locs = [loc.text for loc in (self.bps.location_of(n) for n in numbers) if loc is not None]
        if locs:
            raise TfnativeError("breakpoint %s: gdb cannot insert it: %s" % (", ".join(locs), why))
        if numbers:
            raise TfnativeError("gdb cannot insert its breakpoint %s: %s" % (numbers[0], why))
        raise TfnativeError("gdb could not resume process %d: %s" % (self.target.pid, msg))

    RECORDS: Dict[str, Callable[[Session, Dict[str, Any]], Next]] = {
        RESUME_FAILED: on_resume_failed,
        SNAPSHOT_REQUEST: on_snapshot_request,
        LET_GO_REQUEST: on_let_go,
        STACK_REQUEST: on_stack_request,
        "breakpoint-modified": on_breakpoint_note,
        "breakpoint-created": on_breakpoint_note,
        "library-loaded": on_library_loaded,
        "stopped": on_stopped,
    }

    # -- stop handlers: the target is stopped ------------------------------
    def on_exit(self, payload: Dict[str, Any]) -> Next:
        self.exit_stop = payload
        return Next.END

    def on_library_event(self, payload: Dict[str, Any]) -> Next:
        assert self.loader is not None
        self.loader.sync()
        if self.bps.all_resolved():
            self.loader.settle()
        return Next.RESUME

    def on_op_dispatch(self, payload: Dict[str, Any]) -> Next:
        assert self.loader is not None
        self.loader.sync()  # a kernel in a library loaded a moment ago: its symbols before its vtable is named
        self.opbreaks.on_dispatch(self.gdb, self.loader.name_of, self.err)
        return Next.RESUME

    def on_breakpoint(self, payload: Dict[str, Any]) -> Next:
        opts = self.opts
        self.hits += 1
        loc = self.bps.hit(payload.get("bkptno"))
        event = self._event("breakpoint", location=loc.text if loc else str(payload.get("bkptno")))
        if loc is not None and loc.op:
            stopevent.name_op_hit(event, self.bps)
        if opts.switches.op_origins:
            add_op_origin(event, opts.switches.op_origins)
        self.doc.events.append(event)
        self.printer.event(event, hit=self.hits, max_hits=opts.max_hits)
        if event.op is not None and opts.on_op_stop is not None:
            opts.on_op_stop(self.doc, event, self.hits)
        if opts.interactive:
            return Next.HANDOFF
        if self.hits >= opts.max_hits and self.bps.locations:
            self.bps.delete_all(self.gdb)
            if not self.target.keeps_watch_after_hits():
                self.printer.note("%d hit(s): breakpoints removed; detaching, process %d runs on at full speed"
                                  % (self.hits, self.target.pid))
                return Next.END
            self.printer.note("%d hit(s): breakpoints removed, the script runs on at full speed" % self.hits)
        return Next.RESUME

    def on_numerics(self, payload: Dict[str, Any]) -> Next:
        event = self._event("numerics")
        numerics_op(event)
        self.doc.events.append(event)
        self.printer.event(event)
        return Next.RESUME

    def on_child(self, payload: Dict[str, Any]) -> Next:
        note_dead_children(self.gdb, self.target.pid, self.doc, self.printer)
        return Next.RESUME

    def on_fatal_signal(self, payload: Dict[str, Any]) -> Next:
        """A fatal signal: reported once (a handler that raises it again is the same fault), then passed on."""
        name = payload["signal-name"]
        event = self._event("signal", signal=name)
        event.handler = has_handler(self.target.pid, name)
        if self.opts.switches.op_origins:
            add_op_origin(event, self.opts.switches.op_origins)
        earlier = reraised(self.doc.events, event)
        if earlier is not None:
            # faulthandler (pytest, -X faulthandler) dumps the traceback and raises
            # the same signal again from its handler: one fault, one event.
            earlier.reraised_by_handler = True
            self.printer.note("%s raised again by the script's handler: the same fault" % event.signal)
        else:
            self.doc.events.append(event)
            self.printer.event(event)
            if self.opts.save_core and self.doc.core is None:
                self._keep_core(payload.get("thread-id"))
        if self.opts.interactive:
            # gdb must not hand the signal over on detach: the fault
            # happens again, under the interactive gdb.
            self.gdb.console_command("handle %s nopass" % name)
            return Next.HANDOFF
        return Next.RESUME

    def _keep_core(self, thread: Optional[str]) -> None:
        """``--core FILE``: the core of the process, at its first fatal signal, before it dies of it."""
        assert self.opts.save_core is not None
        self.printer.note("writing the core to %s" % self.opts.save_core)
        self.doc.core = write_core(self.gdb, self.loader, self.opts.save_core, self.err, thread)
        if self.doc.core:
            self.printer.note("core written: read it again with 'tfnative core %s'" % self.doc.core)

    def on_other(self, payload: Dict[str, Any]) -> Next:
        return Next.RESUME

    def on_timeout(self) -> Next:
        """``--timeout``: the target still runs: stop it, an all-threads ``timeout`` event, and let go of it."""
        self.target.halt(self.gdb)
        self.running = False
        event = self._event("timeout", all_threads=True, hang=True, timeout=self.opts.timeout)
        self.doc.events.append(event)
        self.printer.event(event)
        for line in verdict_lines(event.triage, event.pid):
            self.printer.note(line)
        self.target.let_go(self.gdb)
        self.timed_out = True
        return Next.END

    STOPS: Dict[str, Callable[[Session, Dict[str, Any]], Next]] = {
        "exit": on_exit,
        "library": on_library_event,
        "op-dispatch": on_op_dispatch,
        "breakpoint": on_breakpoint,
        "numerics": on_numerics,
        "child": on_child,
        "fatal-signal": on_fatal_signal,
        "other": on_other,
    }

    def _event(self, kind: EventKind, all_threads: Optional[bool] = None, hang: bool = False, **extra: Any) -> Event:
        return stopevent.make(self.gdb, self.opts.all_threads if all_threads is None else all_threads,
                              self.opts.native_all, self.loader, kind, hang=hang,
                              variables=self.opts.variables, **extra)
