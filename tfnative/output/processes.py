"""Several processes' documents said one after another (``stack`` on many processes, ``watch``'s hang report):
a text block each, titled by its process (``process_title``), each one's verdict under it; JSON Lines to a file.

The documents come analysed (``analysis/across.across`` has said what needs several of them) and labelled by
their caller: this prints them and decides nothing.
"""

from __future__ import annotations

from typing import Optional, Sequence, TextIO

from ..core.model import Document, Outcome
from ..core.treemodel import member_label
from ..errors import TfnativeError
from ..files import is_stdout, write_output
from . import report
from .verdicttext import verdict_lines


def process_title(doc: Document) -> str:
    """``process 123 worker:2 on host1: python3 train.py ...``: what a text block is about."""
    label = member_label(doc)
    argv = " ".join(doc.argv)
    if len(argv) > 200:
        argv = argv[:197] + "..."
    host = doc.host or "localhost"
    name = "" if label == "%s:%s" % (host, doc.pid) else " %s" % label
    return "process %s%s on %s: %s" % (doc.pid, name, host, argv)


def report_all(outcomes: Sequence[Outcome], json_path: Optional[str], printer: report.Printer, err: TextIO,
               brief: bool = False) -> int:
    """Print (or, with ``--json -`` or ``brief``, summarise on ``err``) and write every document; the exit
    status.  Raises TfnativeError when none of the processes could be read (each one's reason said first)."""
    brief = brief or is_stdout(json_path)
    docs = [o.doc for o in outcomes if o.doc is not None]
    for o in outcomes:
        if o.doc is None:
            err.write("tfnative: pid %d not reported: %s\n" % (o.pid, o.error))
            continue
        event = o.doc.events[0]
        said = "".join("%s\n" % line for line in (verdict_lines(event.triage, event.pid) if event.triage else []))
        if brief:
            err.write("tfnative: %s\n%s" % (process_title(o.doc), "".join("  " + line + "\n"
                                                                           for line in said.splitlines())))
        else:
            printer.out.write("\n##### %s\n" % process_title(o.doc))
            printer.event(event)
            printer.out.write(said)
        printer.out.flush()
    err.flush()
    if json_path and docs:
        write_output(json_path, report.json_lines(docs))
    if not docs:
        raise TfnativeError("none of the %d process(es) could be read" % len(outcomes))
    if not brief and len(outcomes) > 1:
        err.write("tfnative: %d of %d processes reported\n" % (len(docs), len(outcomes)))
    return 0
