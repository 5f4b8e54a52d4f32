"""``tfnative merge``: many ``stack --json`` documents as one prefix tree (see ``merge.py``)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

import click

from ..errors import TfnativeError
from .util import run_command as _run

if TYPE_CHECKING:
    from ..core.model import Document


def _read(paths: Tuple[str, ...]) -> Iterator[Tuple[str, str]]:
    """(name, text) of each input, read when its turn comes (one file's text in memory at a time)."""
    for p in paths or ("-",):
        if p == "-":
            yield ("<stdin>", sys.stdin.read())
            continue
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as exc:
            raise TfnativeError("cannot read %s: %s" % (p, exc.strerror or exc)) from None
        yield (p, text)
        del text


@click.command("merge")
@click.argument("files", nargs=-1)
@click.option("--all-threads", is_flag=True, help="Every thread (default: the threads that run Python).")
@click.option("--json", "json_path", metavar="FILE", default=None,
              help='The tree as {"tfnative_merge": 1, "processes", "tree"} ("-": stdout).')
@click.option("--folded", is_flag=True, help='Flamegraph "folded" stacks (a;b;c COUNT) instead of the tree.')
@click.option("--html", "html_path", metavar="FILE", default=None,
              help="Also write the tree as one self-contained HTML page (a flame graph: zoom, search, the "
                   "outlier marked) to FILE (\"-\": stdout).")
@click.option("--speedscope", "speedscope_path", metavar="FILE", default=None,
              help="Also write the stacks in speedscope's format (a profile per process, a sample per thread) "
                   "to FILE (\"-\": stdout).")
def merge_cmd(files: Tuple[str, ...], all_threads: bool, json_path: Optional[str], folded: bool,
              html_path: Optional[str], speedscope_path: Optional[str]) -> None:
    """Merge 'tfnative stack --json' documents (FILE or - for stdin, JSON Lines, pdsh 'host: ' prefixes
    accepted) into one prefix tree, outermost frame first; the odd branch is flagged."""

    def go() -> None:
        from ..files import is_stdout, write_output
        from ..output import merge as merge_mod  # loaded when merge runs

        if sum(is_stdout(p) for p in (json_path, html_path, speedscope_path)) > 1:
            raise TfnativeError("only one of --json, --html and --speedscope can be - (stdout)")
        quiet = is_stdout(html_path) or is_stdout(speedscope_path)  # stdout is the page's: no text
        if folded and quiet:
            raise TfnativeError("--folded prints to stdout: give --html or --speedscope a file")
        docs = merge_mod.iter_documents(_read(files))  # one at a time: none is kept
        if html_path or speedscope_path:  # but these need them all at once
            docs = _pictures(list(docs), html_path, speedscope_path, all_threads)
        if folded:
            for line in merge_mod.folded_lines(docs, all_threads):
                click.echo(line)
            return
        root = merge_mod.build_tree(docs, all_threads)
        if json_path:
            data = json.dumps(merge_mod.merge_json(root), indent=1).encode() + b"\n"
            write_output(json_path, data)
        if is_stdout(json_path) or quiet:
            return
        for line in merge_mod.text_lines(root):
            click.echo(line)

    _run(go)


def _pictures(docs: List[Document], html_path: Optional[str], speedscope_path: Optional[str],
              all_threads: bool) -> Iterator[Document]:
    """Write ``--html`` and ``--speedscope`` (they need every document at once); the documents again."""
    from ..output.pictures import write_pictures

    title = "tfnative merge: %d document%s" % (len(docs), "" if len(docs) == 1 else "s")
    write_pictures(docs, title, html_path, speedscope_path, all_threads)
    return iter(docs)

