"""``tfnative watch``'s report of a hang and of a straggler: the documents ``stack`` gives, said and written.

A hang: one held snapshot of every process of the job at one moment (``take_all``: the crash catcher's
``snapshots``, all held together, or ``many.snapshot_all`` over ``stack``'s ``process.capture_process``), each
document's event of kind ``"hang"`` with the ``triage`` ``stack`` gives (the wait-for graph and the verdict,
across the processes: ``across.across``; said by ``processes.report_all``), and for several processes their
merged tree with the outlier named (``analysis/tree.py``, written by ``output/merge.py``).  Printed on ``out``;
``--json FILE``: the report's JSON Lines (the latest report); ``--out DIR``: ``hang-N.txt``, ``hang-N.jsonl`` and
``hang-N.html`` for the N-th report.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, TextIO, Tuple

from ..analysis import culprit
from ..analysis.across import across
from ..analysis.frames import mark_documents
from ..analysis.tree import build_tree, first_outlier
from ..core.kstate import ProcessFacts, ProcKey
from ..core.model import Document, Outcome, PythonFrame
from ..core.rankset import compress
from ..core.treemodel import Node
from ..errors import TfnativeError
from ..files import write_output
from ..output import merge, report
from ..output.pictures import write_pictures
from ..output.processes import process_title, report_all
from ..output.threadgroups import frame_text
from ..output.verdicttext import culprit_line, verdict_lines
from .options import WatchOptions

Take = Callable[[int], Document]



def outlier_text(docs: Sequence[Document], root: Node) -> Optional[str]:
    """The process (or processes) whose stacks leave the others' first in the merged tree ``root`` of ``docs``
    (analysis's ``first_outlier``), in words: ``rank:2 (rank 2 on node n1 ...), at step at train.py:20``; None
    where all agree.  Where some processes are ranks of a TensorFlow cluster (``TF_CONFIG``'s task) and others
    not (a launcher waiting for them), among the ranks only."""
    ranks = [d for d in docs if d.task is not None]  # a job's ranks (TF_CONFIG): a launcher beside them is none
    if 2 <= len(ranks) < len(docs):
        root = build_tree(frame_text, ranks)
    odd = first_outlier(root)
    if odd is None:
        return None
    who = compress(odd.members)
    place = next((merge.where(p) for p in root.processes if p["label"] in odd.members
                  and merge.where(p)), None) if len(odd.members) == 1 else None
    return "%s%s, at %s" % (who, " (%s)" % place if place else "", _place(odd))


def _place(node: Node) -> str:
    """Where a branch of the tree starts: ``rank at train.py:76`` for a Python frame, else the frame's text."""
    frame = node.frame
    if isinstance(frame, PythonFrame):
        return "%s at %s:%s" % (frame.function, os.path.basename(frame.file or "?"), frame.line)
    return node.key


TakeAll = Callable[[Sequence[int]], List[Outcome]]  # every process held at one moment: their outcomes


@dataclass
class Hang:
    """One hang report to give: its number, its headline, and what the watcher knows of each process beyond its
    snapshot (``ProcessFacts``: stopped, its CPU); the lines said before it, and the culprit they named."""

    number: int
    headline: str
    facts: Mapping[ProcKey, ProcessFacts] = field(default_factory=dict)  # (node, pid): ProcKey
    said: Tuple[str, ...] = ()  # the lines said before the report (``say_first``): its headline, the culprit
    first: Optional[ProcKey] = None  # the culprit named before the report (``culprit.early``)


def facts_json(facts: Mapping[ProcKey, ProcessFacts]) -> Dict[str, Dict[str, Any]]:
    """``facts`` as a node watcher sends them to the head of ``watch --slurm-job`` (``{"PID": {...}}``, its own
    node's processes): what ``culprit.early`` and ``culprit.name`` judge (read ``deep``: its task, its main
    thread's frames, its node)."""
    out: Dict[str, Dict[str, Any]] = {}
    for (_node, pid), f in facts.items():
        one: Dict[str, Any] = {"state": f.state, "stopped_by": f.stopped_by, "cpu_percent": f.cpu_percent}
        if f.task is not None:
            one.update(task=f.task, tasks=list(f.tasks))
        if f.main_frames is not None:
            one["main_frames"] = [list(frame) for frame in f.main_frames]
        for key, value in (("main_call", f.main_call), ("node", f.node)):
            if value is not None:
                one[key] = value
        out[str(pid)] = one
    return out


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def _frames(value: Any) -> Optional[Tuple[Tuple[Optional[str], Optional[str], Optional[int]], ...]]:
    """``main_frames`` read back: a list of [function, file, line]; None where it is anything else."""
    if not isinstance(value, list) or not all(isinstance(f, list) and len(f) == 3 for f in value):
        return None
    return tuple((_text(f[0]), _text(f[1]), f[2] if isinstance(f[2], int) and not isinstance(f[2], bool) else None)
                 for f in value)


def facts_from_json(value: Any, node: str = "") -> Dict[ProcKey, ProcessFacts]:
    """What ``facts_json`` wrote on ``node``, read back at the head, each process keyed by its node and pid (two
    nodes may each have a process of one pid); anything else in it left out."""
    out: Dict[ProcKey, ProcessFacts] = {}
    for pid, f in (value.items() if isinstance(value, dict) else ()):
        if not str(pid).isdigit() or not isinstance(f, dict):
            continue
        cpu, task, tasks = f.get("cpu_percent"), _text(f.get("task")), f.get("tasks")
        tasks = tuple(tasks) if task is not None and isinstance(tasks, list) and all(
            isinstance(t, str) for t in tasks) else ()
        out[(node, int(pid))] = ProcessFacts(state=_text(f.get("state")), stopped_by=_text(f.get("stopped_by")),
                                      cpu_percent=float(cpu) if isinstance(cpu, (int, float)) else None,
                                      task=task if tasks else None, tasks=tasks, main_frames=_frames(
                                          f.get("main_frames")), main_call=_text(f.get("main_call")),
                                      node=_text(f.get("node")))
    return out


def say_first(hang: Hang, opts: WatchOptions, out: TextIO, whole: bool = True) -> None:
    """Say the hang's headline and, where the facts read before any process is held name it (``culprit.early``),
    its culprit (with its node, for a Slurm job's rank), on ``out`` and, with ``--out DIR``, in ``hang-N.txt``
    (the whole report replaces it once it is taken); kept in ``hang.said`` and ``hang.first``, so that the
    report names the same process and says no line twice.  ``whole``: the facts are of every process (else,
    some node's missing, the headline alone: the others' would make its ranks look gone)."""
    said = [hang.headline]
    first = culprit.early(hang.facts) if whole else None
    if first is not None:
        said.append("tfnative: watch: %s" % culprit_line(first.culprit, first.peers_wait, first.gone))
        hang.first = first.key
    hang.said = tuple(said)
    text = "".join(line + "\n" for line in hang.said)
    out.write(text)
    out.flush()
    if opts.out_dir:
        write_output(os.path.join(opts.out_dir, "hang-%d.txt" % hang.number), text.encode("utf-8"))


def hang_report(pids: Sequence[int], take_all: TakeAll, opts: WatchOptions, hang: Hang, out: TextIO,
                err: TextIO) -> List[Document]:
    """Take (``take_all``: every process held at one moment), print and write the hang report of ``pids``;
    its documents (empty when none of the processes could be read, said on ``err``)."""
    return show_hang(take_all(pids), opts, hang, out, err)


def show_hang(outcomes: Sequence[Outcome], opts: WatchOptions, hang: Hang, out: TextIO,
              err: TextIO) -> List[Document]:
    """Print and write the hang report of ``outcomes`` (the processes' documents, taken at one moment, here or
    on the nodes of a Slurm job); its documents (empty when none could be read).  The culprit
    (``analysis/culprit.py``)
    is named in a line of the text and on every document's event."""
    number, headline = hang.number, hang.headline
    docs = [o.doc for o in outcomes if o.doc is not None]
    # analysis, all of it before anything is rendered: the marks the renderers read, the verdicts that need
    # several processes (as ``stack`` gives them), the merged tree and its outlier
    mark_documents(docs)  # documents a node sent back are marked as the renderers show them, as ours are
    for doc in docs:
        for event in doc.events:
            event.kind = "hang"
    across(docs)
    blamed = culprit.name(docs, hang.facts, hang.first)  # (a stopped process's verdict says so before it is printed)
    merged = build_tree(frame_text, docs) if len(docs) > 1 else None
    odd = outlier_text(docs, merged) if merged is not None else None
    pictures = build_tree(frame_text, docs, all_threads=True) if opts.out_dir and docs else None
    text = io.StringIO()
    text.write("".join(line + "\n" for line in hang.said or (headline,)))
    said = len(text.getvalue()) if hang.said else 0  # what ``say_first`` has printed already
    printer = report.Printer(text, native_all=opts.stack.native_all, full=opts.stack.full, group=opts.stack.group,
                             fit=False)
    try:
        report_all(outcomes, None, printer, err)
    except TfnativeError as exc:  # none could be read: said, and the watch goes on
        err.write("tfnative: watch: %s\n" % exc)
        err.flush()
        return []
    if merged is not None:
        text.write("\n##### the job's %d processes merged\n" % len(docs))
        text.write("".join(line + "\n" for line in merge.text_lines(merged)))
    if odd:
        text.write("tfnative: watch: the outlier: %s\n" % odd)
    if blamed is not None:
        line = "tfnative: watch: %s" % culprit_line(blamed.culprit, blamed.peers_wait, blamed.gone)
        if line not in hang.said:  # said before the report, word for word: not again
            text.write(line + "\n")
    out.write(text.getvalue()[said:])
    out.flush()
    lines = report.json_lines(docs)
    if opts.json_path:
        write_output(opts.json_path, lines)
    if opts.out_dir:
        base = os.path.join(opts.out_dir, "hang-%d" % number)
        write_output(base + ".txt", text.getvalue().encode("utf-8"))
        write_output(base + ".jsonl", lines)
        if pictures is not None:
            write_pictures(docs, pictures, "tfnative watch: hang %d: %s" % (number, headline)[:200],
                           html_path=base + ".html", all_threads=True)
    return docs


def straggler_report(pid: int, take: Take, headline: str, opts: WatchOptions, out: TextIO, err: TextIO) -> None:
    """Name a straggler with its stack (one held snapshot), on ``out``; a process gone meanwhile is said on
    ``err``."""
    try:
        doc = take(pid)
    except TfnativeError as exc:
        err.write("tfnative: watch: straggler %d not read: %s\n" % (pid, exc))
        err.flush()
        return
    text = io.StringIO()
    text.write("%s\n" % headline)
    printer = report.Printer(text, native_all=opts.stack.native_all, full=opts.stack.full, group=opts.stack.group,
                             fit=False)
    text.write("##### %s\n" % process_title(doc))
    event = doc.events[0]
    printer.event(event)
    text.write("".join(line + "\n" for line in (verdict_lines(event.triage, event.pid) if event.triage else [])))
    out.write(text.getvalue())
    out.flush()
