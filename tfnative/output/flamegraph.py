"""The merged tree of ``stack`` documents as one self-contained HTML page: an icicle graph (pure).

Input: the tree analysis made of documents (``analysis/tree.build_tree``: ``render_tree``; with the documents
themselves, ``render_html``).  Output:
the text of one HTML file that needs nothing from the network when opened: the page's CSS and script
(``flamegraph.html`` beside this module) are inline, allowed by their hashes in the page's
Content-Security-Policy, and nothing else may load or run.  Each node is a frame (outermost on top, its
width the threads through it) with its members (processes, ranks) and thread counts; the outlier branch
analysis found (``Node.outlier``) is marked, user frames and ops are marked, a click zooms (``#zoom=ID`` in the
address, so the back button and a link work), a search box (``#search=TEXT``) highlights frames.

Every string from the documents (frames, files, labels) goes into the page only as JSON inside a script
element that is never executed (``<``, ``>``, ``&`` escaped), and the script puts it in the page as text.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from importlib import resources
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..core.model import Document, ElidedFrame, EventFrame, EventThread, NativeFrame, PythonFrame
from ..core.rankset import compress
from ..core.treemodel import Node, member_names
from . import merge, render
from .fit import compact_cpp
from .threadgroups import frame_text, group_title

Json = Dict[str, Any]
TEMPLATE = "flamegraph.html"
MAX_ENDS = 12  # process lines of "threads whose stack ends here" before "... and N more"


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside an HTML ``<script>`` element: no ``<``, ``>`` or ``&`` (so
    no ``</script>`` or ``<!--`` can end or change the element), non-ASCII as ``\\u`` escapes."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def frame_fields(frame: Optional[EventFrame]) -> Json:
    """What the page shows of a frame: ``name`` (short), ``where`` (file:line or library), ``kind``,
    ``cls`` (its class: ``shown_class``, as analysis marked it), ``user``, ``op`` (label)."""
    if frame is None:
        return {"name": "all", "where": "", "kind": "root", "cls": "system", "user": False, "op": None}
    if isinstance(frame, ElidedFrame):
        return {"name": "... %d frames elided ..." % frame.count, "where": frame.function, "kind": "elided",
                "cls": "elided", "user": False, "op": None}
    if isinstance(frame, PythonFrame):
        where = "%s:%s" % (frame.file or "?", frame.line if frame.line is not None else "?")
        return {"name": frame.function or "?", "where": where, "kind": "py", "cls": frame.shown_class,
                "user": frame.user_code, "op": None}
    assert isinstance(frame, NativeFrame)
    where = "%s:%s" % (frame.file, frame.line) if frame.file else (frame.library or "??")
    op = render.op_label(frame.op) if frame.op else None
    return {"name": compact_cpp(frame.function or "??", params=True), "where": where, "kind": "native",
            "cls": frame.shown_class, "user": False, "op": op}


def _threads(doc: Document, all_threads: bool) -> List[EventThread]:
    return [t for t in doc.threads() if all_threads or t.runs_python()]


def stack_ends(root: Node, docs: Sequence[Document], all_threads: bool = False) -> Dict[int, List[str]]:
    """For each node (by ``id``) where some thread's stack ends: who those threads are, one line per process
    (``worker:1: 2 threads (python 101,103)``; one process: ``2 threads (python 101,103)``).  ``root`` is the
    tree of ``docs`` (whose glue its building marked)."""
    names = member_names(list(docs))
    found: Dict[int, Dict[str, List[EventThread]]] = {}
    for doc, name in zip(docs, names):
        for t in _threads(doc, all_threads):
            node = root
            for f in reversed(t.frames):
                if not (isinstance(f, NativeFrame) and f.glue):
                    node = node.children[frame_text(f)]
            found.setdefault(id(node), {}).setdefault(name, []).append(t)
    out: Dict[int, List[str]] = {}
    for key, by_member in found.items():
        lines = [group_title(ts) if len(docs) == 1 else "%s: %s" % (m, group_title(ts))
                 for m, ts in by_member.items()]
        if len(lines) > MAX_ENDS:
            lines = lines[:MAX_ENDS] + ["... and %d more processes" % (len(lines) - MAX_ENDS)]
        out[key] = lines
    return out


def page_nodes(root: Node, ends: Optional[Dict[int, List[str]]] = None) -> List[Json]:
    """The tree as a flat list in pre-order (a parent before its children; ``parent`` is an index, -1 for
    the root), without recursion: each node's frame fields, ``text`` (the frame as ``merge`` prints it),
    ``members`` (compressed), ``nmembers``, ``threads``, ``outlier`` and ``about`` (the outlier's process
    in words, where a scheduler named its rank), ``ends``."""
    words = {p["label"]: merge.where(p) for p in root.processes}
    out: List[Json] = []
    todo: List[Tuple[Node, int, bool]] = [(root, -1, False)]
    while todo:
        node, parent, odd = todo.pop()
        entry = frame_fields(node.frame)
        entry.update(id=len(out), parent=parent, text=node.key or "all", members=compress(node.members),
                     nmembers=len(node.members), threads=node.threads, outlier=odd,
                     ends=(ends or {}).get(id(node), []))
        if odd and len(node.members) == 1:
            entry["about"] = words.get(next(iter(node.members)))
        out.append(entry)
        mark = node.outlier
        todo.extend((c, entry["id"], c is mark) for c in reversed(list(node.children.values())))
    return out


def summary(root: Node) -> str:
    """``3 processes, 6 threads: worker:0-2`` (one process: ``1 process (pid 42 on vm), 6 threads``)."""
    if len(root.processes) == 1:
        p = root.processes[0]
        return "1 process (pid %s on %s), %d thread%s" % (p.get("pid"), p.get("host") or "localhost", root.threads,
                                                          "" if root.threads == 1 else "s")
    return "%d processes, %d threads: %s" % (len(root.members), root.threads, compress(root.members))


def _csp_hash(text: str) -> str:
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def _template() -> str:
    return resources.files(__package__ or "tfnative.output").joinpath(TEMPLATE).read_text(encoding="utf-8")


def render_tree(root: Node, title: str, ends: Optional[Dict[int, List[str]]] = None) -> str:
    """The page of a tree ``analysis/tree.build_tree`` made (``ends``: see ``stack_ends``), titled ``title``."""
    page = _template()
    data = {"title": title, "summary": summary(root), "processes": root.processes,
            "nodes": page_nodes(root, ends)}
    script = re.search(r"<script>(.*?)</script>", page, re.S)
    style = re.search(r"<style>(.*?)</style>", page, re.S)
    assert script is not None and style is not None, "the page template lost its script or style"
    csp = ("default-src 'none'; script-src %s; style-src %s; img-src data:; base-uri 'none'; form-action 'none'"
           % (_csp_hash(script.group(1)), _csp_hash(style.group(1))))
    # One pass, so that nothing substituted is searched again for a placeholder.
    values = {"CSP": csp, "TITLE": html.escape(title), "DATA": script_json(data)}
    return re.sub(r"\{\{(CSP|TITLE|DATA)\}\}", lambda m: values[m.group(1)], page)


def render_html(docs: Sequence[Document], root: Node, title: str, all_threads: bool = False) -> str:
    """The page of ``docs`` merged into ``root`` (``analysis/tree.build_tree`` of them: every thread of theirs
    with ``all_threads``, else those that run Python)."""
    return render_tree(root, title, stack_ends(root, docs, all_threads))
