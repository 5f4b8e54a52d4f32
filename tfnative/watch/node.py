"""One node's watcher of ``watch --slurm-job``: the job's processes on this node, read as ``watch`` reads them,
judged by the head.

Started by the head's ``srun`` step (one task per node) as ``watch --env SLURM_JOB_ID=J --node-feed``: the
processes are the job's on this node only (``many.with_environment``), watched by ``loop.Watch`` with the
crash watch as ``watch`` has it, but no hang or straggler is decided here: a node whose ranks wait on a slow
peer elsewhere has not progressed, and only the head sees every node.  Every reading sends the head a
``tick`` (``feed.py``): seconds since this node's processes last progressed, and each rank's (a rank with its
descendants).  The head's orders come on standard input: ``report`` (every process held as a hang report
holds them; first, at once, what it knows of each without holding any, for the culprit the head names before the
report; then the documents), ``straggler`` (a rank's stack, as text), ``core`` (a core of every
process).  The end of standard input (the head gone, or done) ends the watcher, which lets its processes go;
a crash is sent as ``crash`` (the text ``watch`` prints, then the document).
"""

from __future__ import annotations

import io
import os
import queue
import sys
import threading
from dataclasses import replace
from typing import Dict, List, Optional, Sequence

from ..errors import start_thread
from ..output import report
from ..snapshot import many
from . import hangreport
from .crash import Crash
from .crashwatch import CrashWatch
from .feed import Feed, read_order
from .job import Job
from .loop import Plugins, Watch
from .options import WatchOptions

EOF_ORDER: Dict[str, object] = {"eof": True}
MAX_ORDER = 1 << 20  # bytes of one order line: longer is no order of the head's


def node_name() -> str:
    """This node's name as Slurm gave it to the task (``SLURMD_NODENAME``), else the host's."""
    return os.environ.get("SLURMD_NODENAME") or os.uname().nodename


class NodeWatch(Watch):
    """``Watch`` that reports its readings to the head and carries out the head's orders (see the module)."""

    def __init__(self, job: Job, opts: WatchOptions, feed: Feed, orders: int,
                 plugins: Optional[Plugins] = None) -> None:
        plugins = plugins or Plugins()
        super().__init__(job, opts, sys.stderr, sys.stderr, replace(plugins, poll=self._orders))
        self.feed = feed
        self.inner_poll = plugins.poll
        self.progress = 0  # how many readings found progress (the head re-arms its hang report on a change)
        self.seen_last = self.tracker.job_last
        self.queue: queue.Queue[Dict[str, object]] = queue.Queue()
        start_thread(threading.Thread(target=self._read, args=(orders,), name="tfnative-node-orders", daemon=True))

    def _read(self, orders: int) -> None:
        """The head's orders, a line each, from the file descriptor ``orders`` (read raw: a buffered reader's
        lock held by this thread at the interpreter's end would abort it)."""
        pending = b""
        while True:
            try:
                chunk = os.read(orders, 65536)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                got = read_order(line)
                if got is not None:
                    self.queue.put(got)
            if len(pending) > MAX_ORDER:
                pending = b""
        self.queue.put(EOF_ORDER)

    def tick(self, pids: Sequence[int]) -> None:
        super().tick(pids)
        now = self.clock()
        ranks = {}
        for pid in pids:
            if pid in self.job.roots:
                ranks[str(pid)] = round(now - self.tracker.effective(pid, self.job.family), 3)
        if self.tracker.job_last != self.seen_last:  # progress since the last tick: the head may report again
            self.seen_last = self.tracker.job_last
            self.progress += 1
        self.feed.send("tick", {"age": round(self.tracker.stalled_for(now), 3), "ranks": ranks,
                                "processes": len(pids), "progress": self.progress})

    def on_hang(self, pids: Sequence[int]) -> Optional[int]:
        return None  # the head decides, over every node

    def on_exit_hang(self, pid: int, stalled: float, what: str, pids: Sequence[int]) -> Optional[int]:
        return None  # the head decides: a process that waits to exit makes no progress of the node's

    def stragglers(self) -> None:
        return None  # the head names them, over every node

    def _orders(self) -> Optional[int]:
        """Every order that came (the crash watch asked first); 0 once standard input has ended."""
        if self.inner_poll is not None:
            code = self.inner_poll()
            if code is not None:
                return code
        while True:
            try:
                got = self.queue.get_nowait()
            except queue.Empty:
                return None
            if got is EOF_ORDER:
                self.say("the head has gone: the processes are let go")
                return 0
            self._carry_out(got)

    def _carry_out(self, got: Dict[str, object]) -> None:
        pids = [pid for pid in self.job.processes() if many.runs_python(pid)]
        if "report" in got:
            what = got["report"] if isinstance(got["report"], dict) else {}
            # first what it knows of each process without holding any (a stopped rank, its CPU, its task, its
            # main thread's frames), at once: the head names the culprit from every node's before the report
            self.feed.send("facts", hangreport.facts_json(self.facts(pids, deep=True)), number=what.get("number"))
            outcomes = self.take_all(pids)
            docs = [o.doc for o in outcomes if o.doc is not None]
            errors = [[o.pid, o.error] for o in outcomes if o.doc is None]
            self.feed.send("report", what.get("number"), docs=[report.json_lines([d]) for d in docs], errors=errors)
        elif "straggler" in got:
            what = got["straggler"] if isinstance(got["straggler"], dict) else {}
            if what.get("node") != self.feed.node or not isinstance(what.get("pid"), int):
                return
            text = io.StringIO()
            hangreport.straggler_report(int(what["pid"]), self.take, str(what.get("headline", "")), self.opts, text,
                                        self.err)
            if text.getvalue():
                self.feed.send("say", text.getvalue())
        elif "core" in got:
            what = got["core"] if isinstance(got["core"], dict) else {}
            self.feed.send("cores", self._cores(pids, what))

    def _cores(self, pids: List[int], what: Dict[str, object]) -> List[str]:
        from contextlib import nullcontext

        from .cores import write_cores

        directory = os.path.join(str(what.get("dir") or "."), "node-%s" % self.feed.node)
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            self.say("no core written: %s: %s" % (directory, exc.strerror or exc))
            return []
        number = what.get("number")
        with (self.untraced(pids) if self.untraced is not None else nullcontext()):
            return write_cores(pids, directory, number if isinstance(number, int) else 1, self.opts.stack.gdb.gdb_path,
                               self.err)


def watch_node(opts: WatchOptions, job: Job, crashes: bool) -> int:
    """Watch this node's processes of the job for the head (the module); the watcher's exit status."""
    from .loop import HeldTake

    feed = Feed(sys.stdout.buffer, node_name())

    def emit(crash: Crash, text: str) -> None:
        feed.send("crash", text, docs=[report.json_lines([crash.document])], signal=crash.signal, pid=crash.pid)

    caught = CrashWatch(opts, sys.stderr, sys.stderr, HeldTake(opts, sys.stderr), emit=emit) if crashes else None
    try:
        if caught is None:
            watcher = NodeWatch(job, opts, feed, sys.stdin.fileno())
        else:
            watcher = NodeWatch(job, opts, feed, sys.stdin.fileno(), caught.plugins())
        status = watcher.run()
    finally:
        if caught is not None:
            caught.close()
    feed.send("bye", status, crashed=caught.status if caught is not None else None)
    return status
