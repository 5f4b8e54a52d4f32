"""``tfnative watch --slurm-job JOBID``: one watch over every node of a running Slurm job, the hang judged by
the head across the nodes.

As ``stack --slurm-job`` does, one ``srun --jobid=J --overlap`` step starts one task per node; here each runs a
node watcher (``watch/node.py``: ``watch --env SLURM_JOB_ID=J --node-feed``) over its own node's processes,
which never decides a hang by itself: a node whose ranks wait on a slow peer elsewhere has not progressed, but
the job has.  Every interval each node sends a ``tick`` (``feed.py``): how long since its processes last
progressed, and each rank's.  The head keeps, for every node and rank, when it last progressed (on its own
clock: the tick's arrival less the age it carries), and

* the job is hung when no node has progressed for ``--hang-after`` seconds (nor the ``--progress-file`` moved),
  counted once every node's watcher has sent its first reading (a node busy with the job may take longer than
  ``--hang-after`` to start one; after ``JOIN_WAIT_S`` the job is judged without the nodes that sent none, named
  on standard error): the head orders a report on ``srun``'s standard input (``--input=all``: every node at once);
  each node first sends at once what it knows of each process without holding any (its facts: stopped, by which
  signal, its CPU, its task, its main thread's frames), from which the head says the headline and the culprit they
  name (``hangreport.say_first``: ``culprit.early`` over the whole job's facts, the rank with its node); then each
  node holds its processes as ``watch`` holds them and sends their documents, and the head prints the one report
  ``watch`` prints (``hangreport.show_hang``: each process, the wait-for graph across all of them, the merged
  tree, the outlier rank with its node, the culprit with its node: the same rank, its line not said twice), to
  ``--json`` and ``--out`` too.  The job is judged when its stall, as the nodes' last readings give it, reaches
  ``--hang-after`` (``_hang_due``), not up to an interval later.  Then ``--on-hang``: ``report`` watches on and
  reports again only after progress and with other stacks; ``kill`` cancels the job (``scancel``) and ends with
  124; ``core`` has every node write the cores of its processes (``DIR/node-NAME/``) and watches on;
* a rank that has not progressed for ``--straggler-after`` while another rank has is named with its stack
  (its node sends it), once per stall;
* a crash on a node comes as ``watch`` reports it, to the same outputs; the watch ends when the step ends
  (the job's end ends it), with the first crash's status (128+N), else 0.

Ctrl-C (or SIGTERM, SIGHUP) closes ``srun``'s standard input: every node watcher lets its processes go and
ends, and so does the step (``srun`` runs in its own session: the terminal's Ctrl-C never reaches the job).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, TextIO, Tuple

from ..analysis.tree import build_tree
from ..core import docread
from ..core.kstate import ProcessFacts, ProcKey
from ..core.model import Document, Outcome
from ..errors import Interrupted, SignalGuard, TfnativeError, start_thread
from ..output import merge
from ..output.threadgroups import frame_text
from ..snapshot import slurm
from . import hangreport
from .crashwatch import show_crash
from .feed import Assembler, Message, order
from .loop import HANG_EXIT, POLL_S
from .options import WatchOptions

REPORT_WAIT_S = 300.0  # the longest the head waits for the nodes' documents of one report
FACTS_WAIT_S = 60.0  # the longest it waits for their facts first (read at once, without holding anything)
JOIN_WAIT_S = 60.0  # the longest the head waits for every node's first reading before it judges the job without
# the nodes that sent none (a node watcher starts in a few seconds, far longer on a node busy with the job)
END_WAIT_S = 60.0  # the longest the head waits for the step's end once it has closed its input


@dataclass
class NodeState:
    """What the head knows of one node."""

    name: str
    last: float  # when its processes last progressed (the head's clock)
    ticks: int = 0
    progress: int = 0  # the node's count of readings that found progress
    done: bool = False  # its watcher has ended (all its processes exited)
    ranks: Dict[int, float] = field(default_factory=dict)  # pid -> when that rank last progressed
    err: List[str] = field(default_factory=list)


class Head:
    """The head of ``watch --slurm-job`` (see the module)."""

    def __init__(self, job: slurm.Job, opts: WatchOptions, remote: Sequence[str], node_args: Sequence[str],
                 out: TextIO, err: TextIO) -> None:
        self.job, self.opts, self.remote, self.out, self.err = job, opts, list(remote), out, err
        self.node_args = list(node_args)
        self.start = time.monotonic()
        self.nodes: Dict[str, NodeState] = {}
        self.names = list(job.nodes)
        self.messages: queue.Queue[Optional[Message]] = queue.Queue()
        self.own: List[str] = []  # srun's own lines
        self.job_last = self.start
        self.mark = self._file_mark()
        self.armed = True
        self.reports = 0
        self.last_report: Optional[Tuple[str, ...]] = None
        self.named: Set[Tuple[str, int]] = set()  # stragglers named in their current stall
        self.crashes = 0
        self.status: Optional[int] = None  # the first crash's
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.kept: List[Message] = []  # replies that came before they were asked for (``replies``)
        self.late_said = False  # the nodes that sent no reading within JOIN_WAIT_S have been named

    def say(self, text: str) -> None:
        self.err.write("tfnative: watch: %s\n" % text)
        self.err.flush()

    def command(self) -> List[str]:
        return slurm.srun_command(self.job, self.remote, "watch", ["--node-feed", *self.node_args], input_all=True)

    # --- the step's output, read by two threads -------------------------------------------------------

    def _read_out(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        pieces = Assembler()
        for raw in self.proc.stdout:
            m = slurm.LABEL.match(raw.decode("utf-8", "replace").rstrip("\n"))
            if not m:
                continue
            got = pieces.piece(int(m.group(1)), m.group(2))
            if got is not None:
                self.messages.put(got)
        self.messages.put(None)

    def _read_err(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        slurm.relay_stderr(self.proc.stderr, self.names, self.err, self.own,
                           lambda _task, name, text: self._state(name).err.append(text))

    def _state(self, name: str) -> NodeState:
        if name not in self.nodes:
            self.nodes[name] = NodeState(name, self.start)
        return self.nodes[name]

    # --- the loop --------------------------------------------------------------------------------------

    def run(self) -> int:
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=slurm.client_env(), start_new_session=True)
        readers = [threading.Thread(target=fn, name="tfnative-watch-%s" % what, daemon=True)
                   for fn, what in ((self._read_out, "srun-out"), (self._read_err, "srun-err"))]
        for reader in readers:
            start_thread(reader)
        try:
            with SignalGuard():
                try:
                    code = self._loop()
                except Interrupted:
                    self.say("interrupted: every node lets its processes go")
                    code = 130
        finally:
            self._end(readers)
        if code == 0 and not any(n.ticks for n in self.nodes.values()):
            raise TfnativeError(self._why_none())
        return code

    def _loop(self) -> int:
        self.say("watching Slurm job %s on %d node%s (%s): a hang after %g s without progress on any node" % (
            self.job.id, len(self.names), "" if len(self.names) == 1 else "s", ", ".join(self.names),
            self.opts.hang_after))
        next_check = self.start + self.opts.interval
        while True:
            try:
                got = self.messages.get(timeout=POLL_S)
                if got is None:  # the step has ended
                    return self.status or 0
                self.handle(got)
            except queue.Empty:
                pass
            now = time.monotonic()
            if now < next_check:
                continue
            next_check = now + self.opts.interval
            mark = self._file_mark()
            if mark != self.mark and mark is not None:
                self.job_last = now
                self.armed = True
            self.mark = mark
            if self.hung(now) and self.armed:
                code = self.on_hang(now)
                if code is not None:
                    return code
            self.stragglers(now)
            next_check = min(next_check, self._hang_due(time.monotonic()))

    def _hang_due(self, now: float) -> float:
        """The moment the job's stall (as the nodes' last readings give it) reaches ``--hang-after``, a hang not
        yet reported: the head judges the job then too, and decides the hang when it is due, as ``watch`` does,
        not up to an interval later (infinity where no hang is due)."""
        left = self.opts.hang_after - self.stalled_for(now)
        return now + left if self.armed and left > 0 else float("inf")

    def handle(self, got: Message) -> None:
        """One message of a node outside a report: its reading, a crash, text to print, its end."""
        now = time.monotonic()
        node = self._state(got.node)
        kind = got.kind()
        if kind == "tick":
            tick = got.body["tick"] if isinstance(got.body["tick"], dict) else {}
            age = float(tick.get("age") or 0.0)
            node.last = max(node.last, now - age)
            progress = tick.get("progress")
            if isinstance(progress, int) and progress != node.progress:
                node.progress = progress
                self.armed = True
            node.ticks += 1
            ranks = tick.get("ranks")
            if not isinstance(ranks, dict):
                ranks = {}
            node.ranks = {int(pid): now - float(a) for pid, a in ranks.items() if str(pid).isdigit()}
            for pid, when in node.ranks.items():
                if self.opts.straggler_after is not None and now - when < self.opts.straggler_after:
                    self.named.discard((node.name, pid))
        elif kind == "crash":
            self.crashes += 1
            docs = self._documents(got)
            if self.status is None:
                try:
                    self.status = 128 + int(signal.Signals[str(got.body.get("signal"))])
                except KeyError:
                    self.status = 128
            text = str(got.body.get("crash") or "")
            if docs:
                show_crash(self.opts, self.crashes, "tfnative: watch: on node %s:\n%s" % (node.name, text), docs[0],
                           self.out)
            else:
                self.out.write(text)
                self.out.flush()
        elif kind == "say":
            self.out.write(str(got.body.get("say") or ""))
            self.out.flush()
        elif kind == "bye":
            node.done = True

    def hung(self, now: float) -> bool:
        return self.stalled_for(now) >= self.opts.hang_after

    def stalled_for(self, now: float) -> float:
        """How long no node has progressed; 0 while the watch is not armed on every node (``joined``): a job is
        not hung because its node watchers are slow to start."""
        if not self.joined(now):
            return 0.0
        return now - max([self.job_last] + [n.last for n in self.nodes.values()])

    def joined(self, now: float) -> bool:
        """Whether every node's watcher has sent its first reading (a node's stall counts from its own start,
        the age its ticks carry), or ``JOIN_WAIT_S`` has passed: then the job is judged from the nodes that
        did, and those that did not are named once."""
        missing = [name for name in self.names
                   if name not in self.nodes or not (self.nodes[name].ticks or self.nodes[name].done)]
        if not missing:
            return True
        if now - self.start < JOIN_WAIT_S:
            return False
        if not self.late_said:
            self.late_said = True
            self.say("node%s %s sent no reading in %g s: the job is judged from the other node%s" % (
                "s" if len(missing) > 1 else "", ", ".join(missing), JOIN_WAIT_S,
                "s" if len(self.names) - len(missing) != 1 else ""))
        return True

    def stragglers(self, now: float) -> None:
        after = self.opts.straggler_after
        if after is None:
            return
        recent = 1.5 * self.opts.interval + 1.0
        ranks = [(n.name, pid, when) for n in self.nodes.values() if not n.done for pid, when in n.ranks.items()]
        for name, pid, when in ranks:
            if (name, pid) in self.named or now - when < after:
                continue
            if any(now - w <= recent for nm, p, w in ranks if (nm, p) != (name, pid)):
                self.named.add((name, pid))
                headline = ("tfnative: watch: straggler: process %d on node %s has not progressed for %.1f s while "
                            "others of the job have (--straggler-after %g); its stack:"
                            % (pid, name, now - when, after))
                self._send(order("straggler", node=name, pid=pid, headline=headline))

    def on_hang(self, now: float) -> Optional[int]:
        self.armed = False
        live = [n for n in self.nodes.values() if not n.done]
        number = self.reports + 1
        count = sum(len(n.ranks) for n in live)
        headline = ("tfnative: watch: hang: no process of Slurm job %s has progressed for %.1f s (--hang-after %g): "
                    "%d process%s on %d node%s" % (
                        self.job.id, self.stalled_for(now), self.opts.hang_after, count, "" if count == 1 else "es",
                        len(live), "" if len(live) == 1 else "s"))
        hang = hangreport.Hang(number, headline)
        outcomes = self.gather(hang, live)
        docs = [o.doc for o in outcomes if o.doc is not None]
        key = tuple(merge.text_lines(build_tree(frame_text, docs))) if docs else None
        if key is not None and key == self.last_report:
            self.say("still hung, at the stacks of the last report")
        elif outcomes:
            if hangreport.show_hang(outcomes, self.opts, hang, self.out, self.err):
                self.reports = number
                self.last_report = key
        if self.opts.on_hang == "kill":
            self.say("ending the job (--on-hang kill): scancel %s" % self.job.id)
            self._cancel()
            return HANG_EXIT
        if self.opts.on_hang == "core":
            directory = os.path.abspath(self.opts.out_dir or ".")
            for reply in self.ask(order("core", number=number, dir=directory), "cores", live):
                paths = reply.body.get("cores") or []
                if paths:
                    self.say("node %s: %d core file(s): %s" % (reply.node, len(paths), ", ".join(map(str, paths))))
        self.say("watching on; another report once the job progresses and stalls again with other stacks")
        return None

    def gather(self, hang: hangreport.Hang, live: Sequence[NodeState]) -> List[Outcome]:
        """The report ``hang`` ordered of every node: first each ``live`` node's facts, read without holding
        anything (within ``FACTS_WAIT_S``), from which its headline and the culprit they name are said at once
        (``hangreport.say_first``), then every process's document, held and read on its node (within
        ``REPORT_WAIT_S`` of the order)."""
        self._send(order("report", number=hang.number))
        sent = time.monotonic()
        known = self.replies("facts", [n.name for n in live], sent + FACTS_WAIT_S, keep="report")
        facts: Dict[ProcKey, ProcessFacts] = {}
        for reply in known:
            facts.update(hangreport.facts_from_json(reply.body.get("facts"), reply.node))
        hang.facts = facts
        hangreport.say_first(hang, self.opts, self.out, whole=len(known) == len(live))
        replies = self.replies("report", [r.node for r in known], sent + REPORT_WAIT_S)  # (facts come first)
        self.kept = []
        outcomes: List[Outcome] = []
        for reply in replies:
            for doc in self._documents(reply):
                outcomes.append(Outcome(doc.pid or 0, doc))
            for item in reply.body.get("errors") or []:
                if isinstance(item, list) and len(item) == 2:
                    outcomes.append(Outcome(int(item[0]), error="node %s: %s" % (reply.node, item[1])))
        missing = [n.name for n in live if n.name not in {r.node for r in replies}]
        if missing:
            self.say("no report from node%s %s" % ("" if len(missing) == 1 else "s", ", ".join(missing)))
        return outcomes

    def ask(self, line: bytes, kind: str, live: Sequence[NodeState]) -> List[Message]:
        """Send an order to every node; the replies of ``kind`` from ``live`` nodes (``replies``)."""
        self._send(line)
        return self.replies(kind, [n.name for n in live], time.monotonic() + REPORT_WAIT_S)

    def replies(self, kind: str, names: Sequence[str], deadline: float, keep: Optional[str] = None) -> List[Message]:
        """The replies of ``kind`` from the nodes ``names`` (those kept before first; other messages handled as
        they come, but those of kind ``keep``: kept for the next call), waiting until ``deadline`` at most."""
        wanted = set(names)
        replies: List[Message] = [m for m in self.kept if m.kind() == kind and m.node in wanted]
        self.kept = [m for m in self.kept if m not in replies]
        wanted -= {m.node for m in replies}
        while wanted and time.monotonic() < deadline:
            try:
                got = self.messages.get(timeout=min(POLL_S, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                continue
            if got is None:
                self.messages.put(None)  # the step has ended: the loop sees it
                break
            if got.kind() == kind and got.node in wanted:
                wanted.discard(got.node)
                replies.append(got)
            elif keep is not None and got.kind() == keep:
                self.kept.append(got)
            else:
                self.handle(got)
                if got.kind() == "bye":
                    wanted.discard(got.node)
        return replies

    def _documents(self, got: Message) -> List[Document]:
        docs: List[Document] = []
        for i, text in enumerate(got.docs):
            try:
                docs.extend(docread.iter_document_chunks([("node %s, document %d" % (got.node, i + 1), [text])]))
            except TfnativeError as exc:
                self.say("node %s: a document could not be read back: %s" % (got.node, exc))
        return docs

    def _send(self, line: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def _cancel(self) -> None:
        try:
            subprocess.run([slurm.client("scancel"), self.job.id], stdin=subprocess.DEVNULL, capture_output=True,
                           env=slurm.client_env(), timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired, TfnativeError) as exc:
            self.say("scancel %s failed: %s" % (self.job.id, exc))

    def _end(self, readers: Sequence[threading.Thread]) -> None:
        """Close srun's standard input (every node watcher lets go and ends), wait for the step's end (bounded),
        end it where it overruns."""
        proc = self.proc
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=END_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            proc.send_signal(signal.SIGINT)  # srun: a second Ctrl-C within a second ends the step
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader in readers:
            reader.join(timeout=10)

    def _file_mark(self) -> Optional[Tuple[int, int]]:
        from ..snapshot import progress

        return progress.file_mark(self.opts.progress_file) if self.opts.progress_file else None

    def _why_none(self) -> str:
        """Why no node reported (srun refused the step, tfnative failed on the nodes, no Python there)."""
        why = slurm.step_refused(self.job, self.own)
        if why is not None:
            return why
        quiet = [n for n in self.nodes.values() if n.err]
        if quiet and all(any("no process" in ln for ln in n.err) for n in quiet):
            return "job %s runs no Python process on its node%s (%s)" % (
                self.job.id, "s" if len(self.names) > 1 else "", ", ".join(self.names))
        if quiet:
            node = slurm.Node(quiet[0].name, err=quiet[0].err)
            return slurm.node_failure(node, self.remote)
        return "srun started no step in job %s: %s" % (self.job.id, self.own[-1] if self.own else "no message")


def node_arguments(opts: WatchOptions, crashes: bool) -> List[str]:
    """The ``watch`` options each node watcher is run with."""
    args = ["--hang-after", repr(opts.hang_after), "--interval", repr(opts.interval)]
    if opts.straggler_after is not None:
        args += ["--straggler-after", repr(opts.straggler_after)]
    if not crashes:
        args.append("--no-crash-watch")
    args += (["--all-threads"] if opts.stack.all_threads else []) + (["--native-all"] if opts.stack.native_all else [])
    args += ["--full"] if opts.stack.full else []
    if opts.stack.gdb.gdb_path:
        args += ["--gdb", opts.stack.gdb.gdb_path]
    return args


def watch_slurm(job_id: str, remote: Sequence[str], opts: WatchOptions, crashes: bool, out: TextIO,
                err: TextIO) -> int:
    """``tfnative watch --slurm-job JOBID`` (the module); the exit status."""
    slurm.client("srun")
    job = slurm.job_of(job_id)
    return Head(job, opts, remote, node_arguments(opts, crashes), out, err).run()

