"""``tfnative watch``'s loop: read the job's counters every interval, judge progress, report a hang.

Every ``interval`` seconds: the job's processes (``job.Job.processes``), the caller's ``hook`` (a crash
catcher plugs in there), each process's counters (``snapshot/progress.sample``), judged against the last
reading (``analysis/progress.judge``; a process whose only activity is threads going back to the wait they
were in gets its stacks read the ``--no-pause`` way, ``snapshot/progress.stack_keys``), the progress file's
size and mtime.  Nothing is stopped or traced between two reports.

When no process has progressed for ``hang_after`` seconds: the hang report (``hangreport.hang_report``: a held
snapshot of every process through ``take``), then by ``on_hang``: ``report`` watches on, and reports again only
once the job has progressed and stalled again with other stacks; ``kill`` ends the job (SIGTERM, then SIGKILL)
and the watch with status 124, as ``timeout`` does; ``core`` writes a core of every process and watches on.
A process that lags its peers for ``straggler_after`` seconds is named with its stack once per stall.

The watch ends with the job: a launched job's own exit status (128+N, its signal named, where a signal
killed it); running processes: 0 once every one has exited.  Ctrl-C (or SIGTERM, SIGHUP) ends the watch; a
launched job gets the signal as it would without tfnative (the terminal's Ctrl-C reaches it directly, the
others are passed on) and the watcher waits a bounded time for its end.
"""

from __future__ import annotations

import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, ContextManager, Dict, FrozenSet, List, Optional, Sequence, Set, TextIO, Tuple

from ..analysis import culprit
from ..analysis.across import across
from ..analysis.event import snapshot_document
from ..analysis.progress import Tracker, carry, judge, stacks_moved
from ..core.kstate import ProcessFacts, ProcessSample, ProcKey, syscall_name
from ..core.model import Document, Outcome
from ..core.signals import signal_name
from ..errors import Interrupted, SignalGuard
from ..output.verdicttext import culprit_line
from ..snapshot import progress
from ..snapshot.many import runs_python, snapshot_all
from ..snapshot.process import ProcessCapture, capture_process
from . import hangreport
from .exits import Exits
from .hangreport import TakeAll
from .job import Job
from .options import WatchOptions

Take = Callable[[int], Document]
# Called each interval with the job's processes; a status it returns ends the watch with it (a crash caught).
Hook = Callable[[Sequence[int]], Optional[int]]
# Called every ``POLL_S`` between two readings (a crash catcher's crashes are reported as they come).
Poll = Callable[[], Optional[int]]
# Lets go of the processes for the time of a block (gdb writes their cores): a crash catcher's processes.
Untraced = Callable[[Sequence[int]], ContextManager[None]]
POLL_S = 0.25
TORN_TRIES = 3
HANG_EXIT = 124  # --on-hang kill: the status ``timeout`` gives


class HeldTake:
    """The held snapshot ``stack --pid PID --json`` gives: the capture (``snapshot/process.capture_process``), then
    its analysis (``analysis/event.snapshot_document``).  A ``Take``; ``all`` is a ``TakeAll`` that captures every
    process first (on threads of their own, ``many.snapshot_all``) and analyses them once all are captured."""

    def __init__(self, opts: WatchOptions, err: TextIO) -> None:
        self.opts, self.err = opts, err

    def __call__(self, pid: int) -> Document:
        taken = capture_process(pid, self.opts.stack, self.err)
        return snapshot_document(taken.doc, taken.capture, self.opts.stack.native_all, taken.cluster)

    def all(self, pids: Sequence[int]) -> List[Outcome]:
        captured: Dict[int, ProcessCapture] = {}

        def capture(pid: int) -> Document:
            taken = captured[pid] = capture_process(pid, self.opts.stack, self.err)
            return taken.doc

        outcomes = snapshot_all(pids, capture)
        for outcome in outcomes:
            if outcome.doc is not None:
                taken = captured[outcome.pid]
                outcome.doc = snapshot_document(taken.doc, taken.capture, self.opts.stack.native_all, taken.cluster)
        return outcomes


@dataclass
class Plugins:
    """What a crash catcher (``crashwatch.CrashWatch.plugins``) plugs into the loop; each left None: the loop's
    own way (a held snapshot by ``stack``'s hold, no hook, no poll)."""

    take: Optional[Take] = None  # a held snapshot of one process
    hook: Optional[Hook] = None  # each reading, with the job's processes
    poll: Optional[Poll] = None  # every ``POLL_S`` between two readings
    untraced: Optional[Untraced] = None  # the processes let go for the time of a block (gdb writes cores)
    take_all: Optional[TakeAll] = None  # every process held at one moment
    stopped_by: Optional[Callable[[int], Optional[str]]] = None  # the signal of a process's group stop, if any


class Watch:
    """One watch of one job (see the module)."""

    def __init__(self, job: Job, opts: WatchOptions, out: TextIO, err: TextIO, plugins: Optional[Plugins] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.job, self.opts, self.out, self.err = job, opts, out, err
        plugins = plugins or Plugins()
        held = HeldTake(opts, err)  # ours, where the plugins give none: every process captured, then analysed
        self.held_take: Take = plugins.take or held
        self.held_take_all: Optional[TakeAll] = plugins.take_all or (held.all if plugins.take is None else None)
        self.hook, self.poll, self.untraced = plugins.hook, plugins.poll, plugins.untraced
        self.stopped_by = plugins.stopped_by
        self.clock = clock
        self.tracker = Tracker(clock(), opts.hang_after, opts.straggler_after)
        self.samples: Dict[int, ProcessSample] = {}
        self.runtimes = progress.Runtimes()  # where each process's GIL lies (a GIL waiter's wake-ups: no progress)
        self.roles = progress.Roles(opts.interval)  # each process's runtime threads (their wake-ups: no progress)
        self.keys: Dict[int, Dict[int, Tuple[object, ...]]] = {}  # the last --no-pause stacks of a process
        self.cpu: Dict[int, float] = {}  # each process's CPU over the last interval, in % of one CPU
        self.mark = progress.file_mark(opts.progress_file) if opts.progress_file else None
        self.reports = 0
        self.blamed: Optional[int] = None  # the rank named as the one its lagging peers wait for (``waited_for``)
        self.held: Set[int] = set()  # processes a snapshot held since the last reading
        self.armed = True  # a hang may be reported (again: after progress)
        self.hangups = 0  # SIGHUPs that did not end the watch (``opts.outlive``)
        self.hangup_said = False
        self.last_report: Optional[FrozenSet[Tuple[object, ...]]] = None
        # processes whose program has ended but which do not exit (read at most every quarter of hang_after)
        self.exits = Exits(opts.hang_after, max(opts.interval, opts.hang_after / 4.0))
        # A re-waiting process's stacks are read (--no-pause) only once it has not progressed for this long:
        # half the time that makes it a hang or a straggler, so that a job that works never pays for them.
        self.stack_after = min(opts.hang_after, opts.straggler_after or opts.hang_after) / 2.0

    def take(self, pid: int) -> Document:
        """A held snapshot of ``pid``, marked as held for the next reading: the hold interrupts every thread's
        wait, which the kernel restarts, and that is not progress (``analysis/progress.thread_kind``).  The
        counters are not read again right after the hold: a thread still restarting its call (running, no
        wait) would be taken for one that moved on at the next reading."""
        try:
            return self.held_take(pid)
        finally:
            self.held.add(pid)

    def take_all(self, pids: Sequence[int]) -> List[Outcome]:
        """Every one of ``pids`` held at one moment (the caller's ``take_all``, else ``take`` of each on threads
        of their own, ``many.snapshot_all``), marked as held for the next reading as ``take`` marks them."""
        try:
            if self.held_take_all is not None:
                return self.held_take_all(pids)
            return snapshot_all(pids, self.held_take)
        finally:
            self.held.update(pids)

    def say(self, text: str) -> None:
        self.err.write("tfnative: watch: %s\n" % text)
        self.err.flush()

    def run(self) -> int:
        """Watch until the job ends (its status), a hang ends it (``--on-hang kill``: 124), the hook ends it
        (its status) or a signal does (130, or the job's status where it ended meanwhile)."""
        passed = {}
        if self.job.launched:  # the job's own signals (SIGUSR1, SIGUSR2), passed on as they come
            for signum in (signal.SIGUSR1, signal.SIGUSR2):
                passed[signum] = signal.signal(signum, lambda n, _frame: self.job.forward(n))
        try:
            with SignalGuard():
                if self.opts.outlive:  # a lost terminal does not end a watch that writes files (``terminal.py``)
                    signal.signal(signal.SIGHUP, self._hangup)
                try:
                    return self._loop()
                except Interrupted as exc:
                    return self._interrupted(exc.signum)
        finally:
            for signum, handler in passed.items():
                signal.signal(signum, handler)

    def _hangup(self, signum: int, _frame: object) -> None:
        """SIGHUP where the watch writes files: passed on to a launched job, said at the next reading."""
        self.job.forward(signum)
        self.hangups += 1

    def _say_hangups(self) -> None:
        if self.hangups and not self.hangup_said:
            self.hangup_said = True
            self.say("SIGHUP: %sthe watch goes on, its reports written to %s" % (
                "passed on to the job; " if self.job.launched else "", self.opts.files()))

    def _interrupted(self, signum: int) -> int:
        if signum != signal.SIGINT:
            self.job.forward(signum)
        if self.job.launched:
            with SignalGuard():  # a second Ctrl-C while waiting: leave at once
                try:
                    status = self.job.wait(self.opts.kill_grace)
                except Interrupted:
                    status = None
            if status is not None:
                return self._ended(status)
            self.say("interrupted: the job (pid %d) runs on, unwatched" % self.job.roots[0])
        else:
            self.say("interrupted")
        return 130

    def _ended(self, status: int) -> int:
        if self.job.launched and status > 128:
            self.say("the job was killed by %s" % signal_name(status - 128))
        elif self.job.launched:
            self.say("the job exited with status %d" % status)
        else:
            self.say("every watched process has exited")
        return status

    def _loop(self) -> int:
        while True:
            started = self.clock()
            status = self.job.ended()
            if status is not None:
                return self._ended(status)
            pids = self.job.processes()
            if self.hook is not None:
                code = self.hook(pids)
                if code is not None:
                    return code
            self.tick(pids)
            if self.tracker.hung(self.clock()):  # a process that waits to exit: said so, whenever it was seen
                for pid in pids:
                    if self.runtimes.span(pid) is not None:
                        self.exits.confirm(pid, self.clock())
            for pid, stalled, what in self.exits.due(self.clock()):
                code = self.on_exit_hang(pid, stalled, what, pids)
                if code is not None:
                    return code
            if self.tracker.hung(self.clock()):
                code = self.on_hang(pids)
                if code is not None:
                    return code
            self.stragglers()
            status = self._pause(self._next_reading(started))
            if status is not None:
                return status

    def _next_reading(self, started: float) -> float:
        """When to read next: an interval after this reading began, or sooner, at the moment the job's stall
        reaches ``hang_after`` (a hang not yet reported): the hang is then decided when it is due, not up to an
        interval later."""
        due = started + self.opts.interval
        if self.armed:
            now = self.clock()
            left = self.opts.hang_after - self.tracker.stalled_for(now)
            if left > 0:
                due = min(due, now + left)
        return due

    def _pause(self, until: float) -> Optional[int]:
        """Wait for the next reading (``until``, on ``clock``), ``poll`` asked every ``POLL_S`` meanwhile; a
        status that ends the watch, or None."""
        while True:
            self._say_hangups()
            left = until - self.clock()
            status = self.job.wait(max(0.0, min(left, POLL_S) if self.poll is not None else left))
            if status is not None:
                return self._ended(status)
            if self.poll is not None:
                code = self.poll()
                if code is not None:
                    return code
            if left <= POLL_S or self.poll is None:
                return None

    def tick(self, pids: Sequence[int]) -> None:
        """One reading of every process, judged against the last one."""
        now = self.clock()
        for gone in set(self.samples) - set(pids):
            self.samples.pop(gone, None)
            self.keys.pop(gone, None)
            self.runtimes.forget(gone)
            self.cpu.pop(gone, None)
            self.exits.forget(gone)
            self.roles.forget(gone)
            self.tracker.gone(gone, now)
        for pid in pids:
            self.tracker.seen(pid, now)
            self.exits.seen(pid, now)
            after = progress.sample(pid, self.clock)
            if after is None:
                continue
            after.runtime = self.runtimes.span(pid)
            before = self.samples.get(pid)
            if before is None:
                self.samples[pid] = after
                continue
            tids = set(before.threads) | set(after.threads)
            self.cpu[pid] = cpu_percent(before, after)
            verdict = judge(before, after, held=pid in self.held,
                            runtime_threads=self.roles.runtime(pid, tids, now))
            if not verdict.caught:  # a thread caught restarting its call after the hold: still held's, next time
                self.held.discard(pid)
            self.samples[pid] = carry(before, after, verdict.caught)  # a thread caught on a CPU: judged next time
            self.exits.note(pid, verdict.kinds.get(pid), now, after.runtime is not None)
            began = self.exits.began(pid)
            if began is not None:  # its program is over: what its threads do since is not the job's progress
                if began > self.tracker.last.get(pid, began):  # its main thread's last steps were
                    self.tracker.progressed(pid, began)
                continue
            moved = verdict.progressed
            if not moved and verdict.rewaiters and now - self.tracker.last.get(pid, now) >= self.stack_after:
                keys = progress.stack_keys(pid)
                moved = stacks_moved(self.keys.get(pid), keys, verdict.rewaiters)
                if keys is not None:
                    self.keys[pid] = keys
            if moved:
                self.tracker.progressed(pid, after.at)
                if not self.tracker.stepping:  # (where the progress file decides, only a step re-arms)
                    self.armed = True
        if self.opts.progress_file:
            mark = progress.file_mark(self.opts.progress_file)
            if mark != self.mark and mark is not None:
                self.tracker.stepped(now)
                self.armed = True
            self.mark = mark

    def on_hang(self, pids: Sequence[int]) -> Optional[int]:
        """The hang report and what ``--on-hang`` says to do; a status to end the watch with, or None."""
        if not self.armed or not pids:
            return None
        self.armed = False
        stalled = self.tracker.stalled_for(self.clock())
        many = "%d process%s" % (len(pids), "" if len(pids) == 1 else "es")
        step = self.tracker.step_last
        if step is not None and self.tracker.job_last > step + self.opts.interval:
            headline = ("tfnative: watch: hang: the job has made no step for %.1f s (--hang-after %g): its progress "
                        "file %s has not moved while its processes ran on: %s" % (
                            stalled, self.opts.hang_after, self.opts.progress_file, many))
        else:
            headline = ("tfnative: watch: hang: no process of the job has progressed for %.1f s (--hang-after %g): "
                        "%s" % (stalled, self.opts.hang_after, many))
        pids = [pid for pid in pids if runs_python(pid)] or list(pids)  # a shell or a C++ helper has no stack to say
        return self._report_and_act(pids, headline, self._changed(pids), early=True)

    def on_exit_hang(self, pid: int, stalled: float, what: str, pids: Sequence[int]) -> Optional[int]:
        """A process whose program ended ``stalled`` seconds ago and that does not exit (``exits.py``): its report
        (the verdict names the threads it waits for, and where they are), then what ``--on-hang`` says to do to
        the job (``pids``); a status to end the watch with, or None.  Said once per process."""
        headline = ("tfnative: watch: hang: process %d has ended its program but has not exited for %.1f s "
                    "(--hang-after %g): %s" % (pid, stalled, self.opts.hang_after, what))
        return self._report_and_act([pid], headline, True, pids)

    def _report_and_act(self, pids: Sequence[int], headline: str, changed: bool,
                        job: Optional[Sequence[int]] = None, early: bool = False) -> Optional[int]:
        """The report of ``pids`` (where ``changed``, else one line), then ``--on-hang``'s action (a core: of
        ``pids``; kill: the whole job); a status to end the watch with, or None.  ``early``: the headline and
        the culprit, where the facts read before the hold name it (``culprit.early``), are said before the
        report holds anything (holding and reading the processes of a large job takes seconds)."""
        number = self.reports + 1
        hang = hangreport.Hang(number, headline, self.facts(pids, deep=early and changed))
        if early and changed:
            hangreport.say_first(hang, self.opts, self.out)
        docs = hangreport.hang_report(pids, self.take_all, self.opts, hang, self.out, self.err) if changed else None
        if docs is None:
            self.say("still hung, at the stacks of the last report")
        elif docs:
            self.reports = number
            self.last_report = self._nonblocking_key(job if job is not None else pids)
        if self.opts.on_hang == "kill":
            self.say("ending the job (--on-hang kill): SIGTERM, then SIGKILL after %g s" % self.opts.kill_grace)
            self.job.end(self.opts.kill_grace)
            return HANG_EXIT
        if self.opts.on_hang == "core":
            from .cores import write_cores

            with (self.untraced(pids) if self.untraced is not None else nullcontext()):
                written = write_cores(pids, self.opts.out_dir or ".", number, self.opts.stack.gdb.gdb_path,
                                      self.err)
            if written:
                self.say("%d core file(s): %s" % (len(written), ", ".join(written)))
        self.say("watching on; another report once the job progresses and stalls again with other stacks")
        return None

    def facts(self, pids: Sequence[int], deep: bool = False) -> Dict[ProcKey, ProcessFacts]:
        """What the watcher knows of each process beyond a snapshot, read before the report holds them: its
        state, the signal of its group stop (the crash catcher's; without it, a stopped process's own report of
        its stop to a seize: ``progress.facts``), its CPU over the last interval; ``deep``: its task among its
        peers, its main thread's Python frames and the call it was blocked in at the last reading.  Keyed by
        ``("", pid)``: the processes of this machine (``ProcKey``)."""
        return {("", pid): progress.facts(pid, self.stopped_by(pid) if self.stopped_by is not None else None,
                                          self.cpu.get(pid), self._main_call(pid), deep) for pid in pids}

    def _main_call(self, pid: int) -> Optional[str]:
        """The system call the main thread of ``pid`` was blocked in at the last reading (None: none, or unread)."""
        main = self.samples[pid].threads.get(pid) if pid in self.samples else None
        return syscall_name(main.wait[0]) if main is not None and main.wait is not None else None

    def _changed(self, pids: Sequence[int]) -> bool:
        """Whether a new report says anything: the first one, or stacks unlike the last report's (read the
        ``--no-pause`` way, without holding anything; where they cannot be read so: a new report)."""
        if self.last_report is None:
            return True
        key = self._nonblocking_key(pids)
        return key is None or key != self.last_report

    @staticmethod
    def _nonblocking_key(pids: Sequence[int]) -> Optional[FrozenSet[Tuple[object, ...]]]:
        """Every thread's stack of ``pids`` read the ``--no-pause`` way; None where one cannot be read so.  A
        stack torn by its thread running while it was read (right after a report's hold, a thread resuming its
        call) is read again, up to ``TORN_TRIES`` times: a torn key is unlike every other, and a report keyed
        so was printed again at the next stall of the very same stacks."""
        seen: List[Tuple[object, ...]] = []
        for pid in pids:
            keys = None
            for _attempt in range(TORN_TRIES):
                keys = progress.stack_keys(pid)
                if keys is None or not any(key and key[0] == progress.TORN for key in keys.values()):
                    break
                time.sleep(0.05)
            if keys is None:
                return None
            seen.extend((pid, tid, key) for tid, key in keys.items())
        return frozenset(seen)

    def stragglers(self) -> None:
        now = self.clock()
        named = self.tracker.stragglers(now, 1.5 * self.opts.interval, self.job.family)
        for pid in named:
            lag = now - self.tracker.effective(pid, self.job.family)
            headline = ("tfnative: watch: straggler: process %d has not progressed for %.1f s while others of the "
                        "job have (--straggler-after %g); its stack:" % (pid, lag, self.opts.straggler_after or 0))
            hangreport.straggler_report(pid, self.take, headline, self.opts, self.out, self.err)
        if named:
            self.waited_for()

    def waited_for(self) -> None:
        """Where every rank of a TensorFlow cluster but one lags (named stragglers, in a stall) and that one
        progresses (it spins, it runs elsewhere), the rank they wait for: the cluster's ranks held at one moment
        and the culprit named with why it does not come (``analysis/culprit.py``), once per stall."""
        ranks = [pid for pid in self.job.processes() if progress.cluster_rank(pid)]
        moving = [pid for pid in ranks if pid not in self.tracker.named]
        if len(ranks) < 3 or len(moving) != 1 or moving[0] == self.blamed:
            return
        self.blamed = moving[0]
        docs = [o.doc for o in self.take_all(ranks) if o.doc is not None]
        across(docs)
        blamed = culprit.name(docs, self.facts(ranks))
        if blamed is not None:
            self.out.write("tfnative: watch: straggler: %s\n" % culprit_line(blamed.culprit, blamed.peers_wait,
                                                                               blamed.gone))
            self.out.flush()


def cpu_percent(before: ProcessSample, after: ProcessSample) -> float:
    """The CPU the threads of a process ran between two readings, in % of one CPU (threads in both readings)."""
    span = after.at - before.at
    ran = 0
    for tid, b in before.threads.items():
        a = after.threads.get(tid)
        if a is not None and a.cpu_ns is not None and b.cpu_ns is not None and a.cpu_ns > b.cpu_ns:
            ran += a.cpu_ns - b.cpu_ns
    return 100.0 * ran / (span * 1e9) if span > 0 else 0.0


def watch(job: Job, opts: WatchOptions, out: TextIO, err: TextIO, plugins: Optional[Plugins] = None) -> int:
    """Watch ``job`` (the module's loop) until it ends; the watcher's exit status."""
    return Watch(job, opts, out, err, plugins).run()
