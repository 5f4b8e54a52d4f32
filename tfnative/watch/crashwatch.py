"""``watch``'s crash watch: the crash catcher (``crash.py``) plugged into the loop (``loop.py``).

Every process of the job is traced by one ``CrashCatcher`` (nothing stopped); each reading adds the job's new
processes to it and lets go of those that left the job.  Between readings the catcher is asked every
``POLL_S`` whether a process is about to die of a crash signal: its report (``attach``'s: the signal, the mixed
stack at the fault, the op, the user's line, TensorFlow's fatal log line, the triage) is printed, written to
``--json`` and ``--out`` (``crash-N.txt``, ``crash-N.jsonl``; and the crash's reproducer, ``crash-N.repro.py``,
issue #45: written and checked in a thread of its own once the report is out, ``crash-N.jsonl`` then written
again with its ``triage.reproducer``), and the process then dies of its signal as it
would have; the watch goes on until the job ends, with the job's own status.  A hang's snapshot of a traced
process is taken by the catcher (``stack``'s own hold cannot seize threads already traced); ``--on-hang core``
lets go of the processes while gdb writes their cores.  A process the catcher cannot trace (another tracer
holds it) is named once and watched for hangs only.
"""

from __future__ import annotations

import io
import os
import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, List, Optional, Sequence, Set, TextIO

from ..attach import repro
from ..core.model import CrashSummary, Document, Outcome
from ..core.tensorflow.kernelinputs import read_whole_tensors
from ..errors import TargetGone, TfnativeError
from ..files import write_output
from ..output import report
from .crash import Crash, CrashCatcher, held_document
from .loop import HeldTake, Plugins
from .options import WatchOptions

POLL_S = 0.25  # how often, between two readings, the catcher is asked for a crash
REPRO_JOIN_S = repro.OPDEF_TIMEOUT_S + repro.CHECK_TIMEOUT_S + 30  # the most a reproducer's thread may take


class CrashWatch:
    """The catcher over a job, as the loop's ``hook``, ``poll`` and ``take`` (see the module)."""

    def __init__(self, opts: WatchOptions, out: TextIO, err: TextIO, fallback: HeldTake,
                 emit: Optional[Callable[[Crash, str], None]] = None) -> None:
        self.opts, self.out, self.err, self.fallback = opts, out, err, fallback
        self.emit = emit  # where a crash report goes instead of ``out`` and the files (a Slurm node's watcher)
        self.catcher = CrashCatcher()
        self.refused: Set[int] = set()
        self.crashes = 0
        self.status: Optional[int] = None  # 128+N of the first crash: a watch of running processes ends with it
        self.repros: List[threading.Thread] = []  # each crash's reproducer, written and checked (--out DIR)
        if opts.out_dir and emit is None:
            read_whole_tensors()  # the crashing op's inputs whole, for crash-N.repro.py's data file

    def close(self) -> None:
        self.catcher.close()
        for thread in self.repros:  # the reproducers' checks end before the watch does (bounded)
            thread.join(REPRO_JOIN_S)

    def plugins(self) -> Plugins:
        """The catcher as the loop's ``take``, ``hook``, ``poll``, ``untraced``, ``take_all`` and ``stopped_by``."""
        return Plugins(take=self.take, hook=self.hook, poll=self.poll, untraced=self.untraced,
                       take_all=self.take_all, stopped_by=self.catcher.stopped_by)

    def hook(self, pids: Sequence[int]) -> Optional[int]:
        """Each reading: trace the job's new processes, let go of those gone from it, report what crashed."""
        watched = set(self.catcher.pids)
        for pid in pids:
            if pid in watched or pid in self.refused:
                continue
            try:
                self.catcher.add(pid)
            except TargetGone:
                continue
            except TfnativeError as exc:
                self.refused.add(pid)
                self._say("process %d is watched for hangs only (no crash report): %s" % (pid, exc))
        for pid in watched - set(pids):
            self.catcher.remove(pid)
        return self.poll()

    def poll(self) -> Optional[int]:
        """Report every crash the catcher has; never ends the watch (the job's end does)."""
        while True:
            got = self.catcher.poll(0)
            if got is None:
                return None
            if isinstance(got, Crash):
                self._report(got)

    def take(self, pid: int) -> Document:
        """A hang's held snapshot of ``pid``: by the catcher where it traces it."""
        if pid in self.catcher.pids:
            return self.catcher.snapshot(pid, self.opts.stack.which)
        return self.fallback(pid)

    def take_all(self, pids: Sequence[int]) -> List[Outcome]:
        """A hang's snapshots of ``pids`` at one moment: those the catcher traces held all together
        (``CrashCatcher.captures``), the others by ``fallback`` meanwhile; every one analysed once all are
        captured and let go; outcomes in the order of ``pids``."""
        mine = [pid for pid in pids if pid in self.catcher.pids]
        held = self.catcher.captures(mine, self.opts.stack.which) if mine else {}
        others = {o.pid: o for o in self.fallback.all([pid for pid in pids if pid not in held])}
        out = []
        for pid in pids:
            got = held.get(pid)
            if got is None:
                out.append(others[pid])
            elif isinstance(got, TfnativeError):
                out.append(Outcome(pid, error=str(got)))
            else:
                out.append(Outcome(pid, doc=held_document(pid, got)))
        return out

    @contextmanager
    def untraced(self, pids: Sequence[int]) -> Iterator[None]:
        """``pids`` let go for the time of the block (gdb writes their cores), traced again after it."""
        mine = [pid for pid in pids if pid in self.catcher.pids]
        for pid in mine:
            self.catcher.remove(pid)
        try:
            yield
        finally:
            for pid in mine:
                try:
                    self.catcher.add(pid)
                except TfnativeError:
                    pass

    def _say(self, text: str) -> None:
        self.err.write("tfnative: watch: %s\n" % text)
        self.err.flush()

    def _report(self, crash: Crash) -> None:
        self.crashes += 1
        if self.status is None:
            self.status = 128 + int(signal.Signals[crash.signal])
        doc = crash.document
        text = io.StringIO()
        text.write("tfnative: watch: crash: process %d, thread %d: %s\n" % (crash.pid, crash.tid, crash.signal))
        printer = report.Printer(text, native_all=self.opts.stack.native_all, full=self.opts.stack.full)
        printer.event(crash.event)
        printer.summary([], doc)
        if self.emit is not None:
            self.emit(crash, text.getvalue())
            return
        show_crash(self.opts, self.crashes, text.getvalue(), doc, self.out)
        if self.opts.out_dir:
            base = os.path.join(self.opts.out_dir, "crash-%d" % self.crashes)
            thread = threading.Thread(target=write_repro, args=(self.opts, base, doc, self.err),
                                      name="tfnative-repro-%d" % self.crashes, daemon=True)
            thread.start()
            self.repros.append(thread)


def write_repro(opts: WatchOptions, base: str, doc: Document, err: TextIO) -> None:
    """``--out DIR``: the crash's reproducer, ``crash-N.repro.py`` (``attach/repro.py``: written, then checked in a
    fresh process unless ``--no-repro-check``), and ``crash-N.jsonl`` again with the document's reproducer."""
    op = doc.triage.op if isinstance(doc.triage, CrashSummary) else None
    if op is None or not op.inputs:
        return  # no op's kernel with its inputs read (a crash outside TensorFlow's kernels): no reproducer
    try:
        repro.make(doc, base + ".repro.py", repro.python_of(doc, None), opts.repro_check, err)
        if getattr(doc.triage, "reproducer", None):
            write_output(base + ".jsonl", report.json_lines([doc]))
    except TfnativeError as exc:
        err.write("tfnative: repro: not written: %s\n" % exc)
    err.flush()


def show_crash(opts: WatchOptions, number: int, text: str, doc: Document, out: TextIO) -> None:
    """The ``number``-th crash report: ``text`` printed on ``out``, ``doc`` written to ``--json`` and, with the
    text, to ``--out DIR`` (``crash-N.txt``, ``crash-N.jsonl``)."""
    out.write(text)
    out.flush()
    lines = report.json_lines([doc])
    if opts.json_path:
        write_output(opts.json_path, lines)
    if opts.out_dir:
        base = os.path.join(opts.out_dir, "crash-%d" % number)
        write_output(base + ".txt", text.encode("utf-8"))
        write_output(base + ".jsonl", lines)
