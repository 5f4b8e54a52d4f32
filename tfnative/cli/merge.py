"""``tfnative merge``: many ``stack --json`` documents as one prefix tree (see ``merge.py``)."""

from __future__ import annotations

import json
import sys
from typing import Iterator, Optional, Tuple

import click

from ..errors import TfnativeError
from .util import run_command as _run


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
def merge_cmd(files: Tuple[str, ...], all_threads: bool, json_path: Optional[str], folded: bool) -> None:
    """Merge 'tfnative stack --json' documents (FILE or - for stdin, JSON Lines, pdsh 'host: ' prefixes
    accepted) into one prefix tree, outermost frame first; the odd branch is flagged."""

    def go() -> None:
        from ..files import write_output
        from ..output import merge as merge_mod  # loaded when merge runs

        docs = merge_mod.iter_documents(_read(files))  # one at a time: none is kept
        if folded:
            for line in merge_mod.folded_lines(docs, all_threads):
                click.echo(line)
            return
        root = merge_mod.build_tree(docs, all_threads)
        if json_path:
            data = json.dumps(merge_mod.merge_json(root), indent=1).encode() + b"\n"
            write_output(json_path, data)
            if json_path == "-":
                return
        for line in merge_mod.text_lines(root):
            click.echo(line)

    _run(go)


def register(main: click.Group) -> None:
    """Add ``merge`` to ``tfnative``'s command group."""
    main.add_command(merge_cmd)
