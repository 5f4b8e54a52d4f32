"""``--html FILE`` and ``--speedscope FILE`` of ``merge`` and ``stack``: the renderers' text written to the files
the user named (``files.write_output``: ``-`` is standard output, links written through, FIFOs written)."""

from __future__ import annotations

import json
from typing import Optional, Sequence

from ..core.model import Document
from ..core.treemodel import Node
from ..files import write_output


def write_pictures(docs: Sequence[Document], root: Node, title: str, html_path: Optional[str] = None,
                   speedscope_path: Optional[str] = None, all_threads: bool = False) -> None:
    """Write the flame graph page of ``docs`` to ``html_path`` and their speedscope file to
    ``speedscope_path`` (each where given; ``all_threads`` as ``merge --all-threads``).  ``root``: their tree
    (``analysis/tree.build_tree``, with the same ``all_threads``), which also marked their glue."""
    if html_path:
        from .flamegraph import render_html

        write_output(html_path, render_html(docs, root, title, all_threads).encode("utf-8"))
    if speedscope_path:
        from .speedscope import speedscope

        data = speedscope(docs, all_threads, name=title)
        write_output(speedscope_path, json.dumps(data, separators=(",", ":")).encode("utf-8") + b"\n")
