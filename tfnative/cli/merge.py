"""``tfnative merge``: many ``stack --json`` documents as one prefix tree (see ``merge.py``)."""

from __future__ import annotations

import sys
from typing import Any, Iterator, List, Optional, Tuple

import click

from ..errors import TfnativeError
from .util import run_command as _run


def _read(paths: Tuple[str, ...], timeout: float) -> Iterator[Tuple[str, Iterator[str]]]:
    """(name, text in pieces of whole lines) of each input, read when its turn comes: ``files.open_input``
    (a FIFO never blocks the open; a silent pipe or FIFO is given up after ``timeout`` s), each line bounded."""
    from ..core.docread import MAX_DOCUMENT_MB, TOO_BIG
    from ..files import open_input

    if not paths and sys.stdin is not None and sys.stdin.isatty():
        raise TfnativeError("no input: give FILEs, or pipe 'tfnative stack --json' into merge (standard input "
                            "is a terminal)")
    for p in paths or ("-",):
        with open_input(p, timeout=timeout) as f:
            yield (f.name, (c.decode("utf-8", "replace") for c in f.chunks(MAX_DOCUMENT_MB << 20, TOO_BIG)))


@click.command("merge")
@click.argument("files", nargs=-1)
@click.option("--all-threads", is_flag=True, help="Every thread (default: the threads that run Python).")
@click.option("--json", "json_path", metavar="FILE", default=None,
              help='The tree as {"tfnative_merge": 1, "processes", "tree"} ("-": stdout).')
@click.option("--tree", "tree_path", metavar="FILE", default=None,
              help='The tree as one document that merge reads again ({"tfnative_tree": 1, ...}: rank sets as '
                   'ranges, nodes flat): reduce on each node, merge the node trees at the head ("-": stdout).')
@click.option("--folded", is_flag=True, help='Flamegraph "folded" stacks (a;b;c COUNT) instead of the tree.')
@click.option("--html", "html_path", metavar="FILE", default=None,
              help="Also write the tree as one self-contained HTML page (a flame graph: zoom, search, the "
                   "outlier marked) to FILE (\"-\": stdout).")
@click.option("--speedscope", "speedscope_path", metavar="FILE", default=None,
              help="Also write the stacks in speedscope's format (a profile per process, a sample per thread) "
                   "to FILE (\"-\": stdout).")
@click.option("--timeout", type=click.FloatRange(min=0, max=86400), default=60.0, show_default=True,
              metavar="SECONDS", help="Give up on an input (a pipe, a FIFO, stdin) that sends nothing for this long.")
def merge_cmd(files: Tuple[str, ...], all_threads: bool, json_path: Optional[str], tree_path: Optional[str],
              folded: bool, html_path: Optional[str], speedscope_path: Optional[str], timeout: float) -> None:
    """Merge 'tfnative stack --json' documents (FILE or - for stdin, JSON Lines, pdsh 'host: ' prefixes
    accepted) and trees of 'merge --tree' or 'merge --json' into one prefix tree, outermost frame first; the odd
    branch is flagged."""

    def go() -> None:
        from ..analysis.tree import reduce
        from ..core import docread  # loaded when merge runs
        from ..files import is_stdout
        from ..output import mergetree
        from ..output.threadgroups import frame_text

        if sum(is_stdout(p) for p in (json_path, tree_path, html_path, speedscope_path)) > 1:
            raise TfnativeError("only one of --json, --tree, --html and --speedscope can be - (stdout)")
        quiet = is_stdout(html_path) or is_stdout(speedscope_path)  # stdout is the page's: no text
        if folded and (quiet or is_stdout(json_path) or is_stdout(tree_path)):
            raise TfnativeError("--folded prints to stdout: give --json, --tree, --html or --speedscope a file")
        items = docread.iter_inputs(_read(files, timeout))  # one at a time: none is kept
        if html_path or speedscope_path:  # but these need them all at once
            items = _pictures(list(items), html_path, speedscope_path, all_threads)
        mergetree.show(reduce(frame_text, items, all_threads), click.echo, json_path, tree_path, folded, quiet)

    _run(go)


def _pictures(items: List[Any], html_path: Optional[str], speedscope_path: Optional[str],
              all_threads: bool) -> Iterator[Any]:
    """Write ``--html`` and ``--speedscope`` (they need every document at once, and documents, not trees); the
    documents again."""
    from ..analysis.tree import build_tree
    from ..core.model import Document
    from ..output.pictures import write_pictures
    from ..output.threadgroups import frame_text

    docs: List[Document] = [d for d in items if isinstance(d, Document)]
    if len(docs) < len(items):
        raise TfnativeError("--html and --speedscope draw 'stack --json' documents, not merged trees: give them "
                            "the documents")
    title = "tfnative merge: %d document%s" % (len(docs), "" if len(docs) == 1 else "s")
    write_pictures(docs, build_tree(frame_text, docs, all_threads), title, html_path, speedscope_path, all_threads)
    return iter(docs)
