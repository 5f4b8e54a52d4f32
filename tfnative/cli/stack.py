"""``tfnative stack``: the mixed stacks of running processes, which run on afterwards.

One ``--pid``: ``run_stack`` (the snapshot is ``snapshot/process.py``'s, analysed by ``stack_document``);
several processes: ``run_many`` (which, and the pool: ``snapshot/many.py``; said: ``output/processes.py``);
a Slurm job: ``snapshot/slurm.py``.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, TextIO, Tuple

import click

from ..errors import TfnativeError
from ..files import is_stdout, write_output
from .util import gdb_options, job_options, run_command, view_options

if TYPE_CHECKING:
    from ..core.model import Document
    from ..snapshot.options import Selection, StackOptions

ENV_HELP = ("Every process running Python whose environment has KEY=VALUE, e.g. SLURM_JOB_ID=123 "
            "(repeatable: all of them; KEY alone: set to anything).")
SLURM_HELP = ("Every Python process of this running Slurm job, on every node of its allocation (one "
              "'srun --overlap' task per node), merged as 'tfnative merge' prints them.")


def run_stack(pid: int, opts: StackOptions, err: TextIO, out: TextIO) -> int:
    """``tfnative stack --pid PID``: mixed stacks of a running process, which runs on afterwards.

    Without gdb when it can (``snapshot/pipeline.py``: ptrace, CFI, our symbol index), else through gdb
    (``snapshot/policy.py``).  ``--samples`` > 1: that many snapshots ``--interval`` seconds apart, the last
    one reported with each thread moving or stuck (``snapshot/samples.py``).  The verdict (``analysis/verdict.py``)
    goes to ``err`` and into the JSON document as ``"triage"``.
    """
    from ..errors import Interrupted, SignalGuard
    from ..output import report
    from ..output.verdicttext import verdict_lines

    with SignalGuard():
        try:
            doc = stack_document(pid, opts, err)
        except Interrupted:  # the process is let go by now
            err.write("tfnative: interrupted\n")
            err.flush()
            return 130
    tree = None
    if opts.html_path or opts.speedscope_path:  # analysis all done before anything is rendered
        from ..analysis.tree import build_tree
        from ..output.threadgroups import frame_text

        tree = build_tree(frame_text, [doc], all_threads=True)
    event = doc.events[0]
    printer = report.Printer(err if is_stdout(opts.json_path) else out, native_all=opts.native_all, full=opts.full,
                             group=opts.group)
    printer.event(event)
    for line in (verdict_lines(event.triage, event.pid) if event.triage else []):
        report.write_note(err, line)
    if opts.json_path:
        report.write(doc, opts.json_path)
    if tree is not None:
        from ..output.pictures import write_pictures

        title = "tfnative stack: pid %s on %s: %s" % (doc.pid, doc.host or "localhost", " ".join(doc.argv)[:200])
        write_pictures([doc], tree, title, opts.html_path, opts.speedscope_path, all_threads=True)
    return 0


def stack_document(pid: int, opts: StackOptions, err: TextIO,
                   sleep: Callable[[float], None] = time.sleep) -> Document:
    """The ``stack`` document of ``pid``: its snapshot (``snapshot/process.capture_process``) analysed
    (``analysis/event.snapshot_document``: one ``snapshot`` event with its verdict; ``host``, ``task``).  As
    ``capture_process``, safe to call from several threads at once, each for another pid."""
    from ..analysis.event import snapshot_document
    from ..snapshot.process import capture_process

    taken = capture_process(pid, opts, err, sleep)
    return snapshot_document(taken.doc, taken.capture, opts.native_all, taken.cluster)


def run_many(chosen: Selection, opts: StackOptions, err: TextIO, out: TextIO) -> int:
    """``tfnative stack`` on several processes (``snapshot/many.py``: which, a snapshot each on a pool of
    threads); their verdicts across processes (``analysis/across.across``), a text block each and JSON Lines
    (``output/processes.py``), their merged tree (``--tree``) and pictures; the exit status."""
    from ..analysis.across import across
    from ..analysis.tree import build_tree, reduce
    from ..errors import Interrupted, SignalGuard
    from ..output import mergetree, report
    from ..output.pictures import write_pictures
    from ..output.processes import report_all
    from ..output.threadgroups import frame_text
    from ..snapshot.many import parse_labels, snapshot_all, targets

    tags = parse_labels(chosen.labels)
    pids = targets(chosen.pids, chosen.children, chosen.patterns, chosen.envs)
    brief = is_stdout(opts.json_path) or is_stdout(opts.tree_path)  # stdout has a document: the text goes to err
    printer = report.Printer(err if brief else out, native_all=opts.native_all, full=opts.full, group=opts.group)

    stop = threading.Event()

    def pause(seconds: float) -> None:  # between samples: a Ctrl-C ends every process's sampling
        if stop.wait(seconds):
            raise Interrupted(signal.SIGINT)

    def take(pid: int) -> Document:
        return stack_document(pid, opts, err, sleep=pause)

    with SignalGuard():
        try:
            outcomes = snapshot_all(pids, take, stop=stop)
        except Interrupted:
            err.write("tfnative: interrupted: every process released\n")
            return 130
    docs = [o.doc for o in outcomes if o.doc is not None]
    across(docs)  # verdicts that need several processes: forked children, a cluster's stalled workers
    for doc in docs if tags else []:
        doc.labels = dict(tags)
    status = report_all(outcomes, opts.json_path, printer, err, brief)
    if opts.tree_path:  # the processes as one tree (what a node of ``stack --slurm-job`` sends the head)
        root = reduce(frame_text, docs, opts.all_threads)
        write_output(opts.tree_path, mergetree.tree_json_text(root).encode() + b"\n")
    if opts.html_path or opts.speedscope_path:
        write_pictures(docs, build_tree(frame_text, docs, all_threads=True), "tfnative stack: %d processes"
                       % len(docs), opts.html_path, opts.speedscope_path, all_threads=True)
    return status


@dataclass
class JobOutput:
    """How ``stack --slurm-job`` shows the merged job besides the tree (text, or ``--json``): ``--folded`` stacks
    instead, and ``--documents FILE`` for every process's own document."""

    folded: bool = False
    documents: Optional[str] = None


def run_slurm_stack(job_id: str, remote: Optional[str], opts: StackOptions, shown: JobOutput, err: TextIO,
                    out: TextIO) -> int:
    """``tfnative stack --slurm-job JOBID``: every node's processes (``snapshot/slurm.py``), merged at the head
    and shown as ``merge`` shows them.  Its exit status."""
    from ..analysis.tree import build_tree, reduce
    from ..core.model import Document
    from ..output import mergetree, report
    from ..output.pictures import write_pictures
    from ..output.threadgroups import frame_text
    from ..snapshot.slurm import node_arguments, take_job

    folded, documents = shown.folded, shown.documents
    whole = bool(documents or opts.html_path or opts.speedscope_path)
    node_args, all_threads, json_path = node_arguments(opts, whole), opts.all_threads, opts.json_path
    job, items = take_job(job_id, remote, node_args, err)
    if not whole:  # the nodes' trees, merged at the head
        mergetree.show(reduce(frame_text, items, all_threads), lambda line: out.write(line + "\n"), json_path,
                       folded=folded)
        return 0
    docs = [i for i in items if isinstance(i, Document)]
    if opts.html_path or opts.speedscope_path:
        write_pictures(docs, build_tree(frame_text, docs, all_threads=True), "tfnative stack: Slurm job %s"
                       % job.id, opts.html_path, opts.speedscope_path, all_threads=True)
    if documents:
        write_output(documents, report.json_lines(docs))
    mergetree.show(reduce(frame_text, docs, all_threads), lambda line: out.write(line + "\n"), json_path,
                   folded=folded)
    return 0


@click.command("stack")
@click.option("--pid", "-p", "pids", multiple=True, type=int, help="Process to inspect (repeatable).")
@click.option("--children", multiple=True, type=int, metavar="PID",
              help="Every descendant of PID that runs Python (repeatable).")
@click.option("--match", "patterns", multiple=True, metavar="REGEX",
              help="Every process running Python whose command line matches REGEX (repeatable).")
@job_options(ENV_HELP, SLURM_HELP)
@click.option("--folded", is_flag=True, help="With --slurm-job: flamegraph folded stacks instead of the tree.")
@click.option("--documents", metavar="FILE",
              help="With --slurm-job: also write every process's document (JSON Lines) to FILE.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="Add to each document's \"labels\" (repeatable); merge names a process by it.")
@view_options(between=(click.option("--no-group", is_flag=True,
                                     help="With --all-threads, print each thread even where stacks are identical."),))
@click.option("--json", "json_path", metavar="FILE",
              help="Write the snapshot as JSON to FILE (- for stdout; the text then goes to stderr); "
                   "several processes: JSON Lines, one document per process; --slurm-job: the merged tree "
                   "as 'merge --json' writes it.")
@click.option("--tree", "tree_path", metavar="FILE",
              help="Also write the processes' merged tree to FILE as 'merge --tree' writes it (- for stdout; the "
                   "text then goes to stderr): one small document however many processes, which 'merge' merges "
                   "with other trees (what each node of --slurm-job sends).")
@click.option("--html", "html_path", metavar="FILE",
              help="Also write the stacks as one self-contained HTML page to FILE: a flame graph of every thread "
                   "(several processes: merged, the outlier marked), zoom, search.")
@click.option("--speedscope", "speedscope_path", metavar="FILE",
              help="Also write the stacks in speedscope's format to FILE (a profile per process, a sample per "
                   "thread).")
@click.option("--with-gdb", is_flag=True,
              help="Take the snapshot through gdb (slower): source lines and inlined frames from every debug "
                   "file, libc's included. Implied by --gdb, --gdb-log and --full-symbols.")
@click.option("--samples", default=1, show_default=True, type=click.IntRange(min=1, max=1000), metavar="N",
              help="Take N snapshots and report the last, each thread marked moving or stuck.")
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(min=0.0, max=3600.0),
              metavar="S", help="Seconds between two samples.")
@click.option("--locals", "variables", is_flag=True,
              help="Show each Python frame's arguments and locals (short reprs read from memory; no code runs), "
                   "and those of your own kernel's frames where its library has DWARF (through gdb).")
@click.option("--no-pause", "--nonblocking", "no_pause", is_flag=True,
              help="Never stop the process (no ptrace): each thread read twice, one that changed meanwhile "
                   "marked inconsistent; native frames only of threads blocked in the kernel, cut where rsp "
                   "and rip no longer suffice (docs/design.md).")
@gdb_options
def stack(pids: Tuple[int, ...], children: Tuple[int, ...], patterns: Tuple[str, ...], envs: Tuple[str, ...],
          slurm_job: Optional[str], remote_tfnative: Optional[str], folded: bool, documents: Optional[str],
          labels: Tuple[str, ...], all_threads: bool, no_group: bool, native_all: bool, full: bool,
          json_path: Optional[str], tree_path: Optional[str], html_path: Optional[str],
          speedscope_path: Optional[str], with_gdb: bool,
          samples: int, interval: float, variables: bool, no_pause: bool,
          gdb_path: Optional[str], debuginfod: bool, gdb_log: Optional[str], full_symbols: bool) -> None:
    """Print the mixed stacks of running (hung?) processes and why they may not progress; they run on afterwards.

    One --pid: that process.  Several --pid, --children, --match or --env: each process concurrently, a
    text block each (JSON Lines with --json); exit status 0 when at least one could be read.  --slurm-job
    JOBID: every Python process of a running Slurm job on all its nodes, as one merged tree.
    """
    from ..gdb.options import GdbOptions
    from ..snapshot.options import Selection, StackOptions

    opts = StackOptions(
        all_threads=all_threads, native_all=native_all, full=full, json_path=json_path, tree_path=tree_path,
        html_path=html_path,
        speedscope_path=speedscope_path,
        with_gdb=with_gdb or bool(gdb_path or gdb_log or full_symbols or debuginfod), samples=samples,
        interval=interval, variables=variables, group=all_threads and not no_group, nonblocking=no_pause,
        gdb=GdbOptions(gdb_path=gdb_path, debuginfod=debuginfod, log=gdb_log, full_symbols=full_symbols))
    chosen = Selection(pids=pids, children=children, patterns=patterns, envs=envs, labels=labels)
    run_command(lambda: _stack(chosen, opts, slurm_job, remote_tfnative, folded, documents))


def _stack(chosen: Selection, opts: StackOptions, slurm_job: Optional[str], remote: Optional[str], folded: bool,
           documents: Optional[str]) -> int:
    """Check the options against each other, then run the one-process, many-process or Slurm-job stack."""
    if is_stdout(opts.html_path) or is_stdout(opts.speedscope_path):
        raise TfnativeError("--html and --speedscope write a file (stdout has the text; 'tfnative stack --json - "
                            "| tfnative merge --html -' writes the page to stdout)")
    if slurm_job is not None:
        if chosen.pids or chosen.children or chosen.patterns or chosen.envs or chosen.labels:
            raise TfnativeError("--slurm-job finds the job's processes itself: no --pid, --children, --match, "
                                "--env or --label with it")
        if opts.tree_path:
            raise TfnativeError("--slurm-job prints the merged tree itself (--json FILE writes it as 'merge "
                                "--json' does): no --tree with it")
        if opts.variables or opts.gdb != type(opts.gdb)():
            raise TfnativeError("--slurm-job takes no --locals or gdb options (the merged view has no place "
                                "for them)")
        return run_slurm_stack(slurm_job, remote, opts, JobOutput(folded, documents), sys.stderr, sys.stdout)
    if remote is not None or folded or documents is not None:
        raise TfnativeError("--remote-tfnative, --folded and --documents go with --slurm-job")
    if opts.nonblocking and opts.with_gdb:
        raise TfnativeError("--no-pause reads without gdb: gdb would stop the process (--with-gdb, --gdb, "
                            "--gdb-log, ...)")
    if opts.nonblocking and chosen.one_pid is None:
        raise TfnativeError("--no-pause takes one --pid")
    if is_stdout(opts.json_path) and is_stdout(opts.tree_path):
        raise TfnativeError("--json - and --tree -: only one of them can have stdout")
    if chosen.one_pid is not None and not opts.tree_path:
        return run_stack(chosen.one_pid, opts, sys.stderr, sys.stdout)
    return run_many(chosen, opts, sys.stderr, sys.stdout)
