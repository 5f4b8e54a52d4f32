"""Fitting the text report to a terminal's width (pure, but for ``terminal_width``).

On a terminal the default text keeps every line within the terminal's width:
a C++ name loses its template arguments first (``Op<...>::Compute(...)``, as
TensorFlow's own "Check failure stack trace" writes them), then its middle;
a path loses its leading directories; prose (headers, notes, the triage) is
wrapped, never cut.  Piped to a file, or under ``--full``, nothing is cut: the
width is ``None`` and every function here leaves the text as it is.
"""

import os
import re
import textwrap
from typing import List, Optional, TextIO

__all__ = ["MIN_WIDTH", "terminal_width", "compact_cpp", "cut_middle", "cut_name", "cut_path", "cut_line", "wrap"]

MIN_WIDTH = 40  # narrower terminals are treated as this wide (lines then wrap there)
ELLIPSIS = "..."


def terminal_width(stream: TextIO) -> Optional[int]:
    """The width to fit text written to ``stream`` to: ``None`` unless ``stream`` is a terminal.

    ``COLUMNS`` (a positive number) wins, as for ``shutil.get_terminal_size``
    and click; else the terminal's own size; 80 when neither can be read.
    """
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError, OSError):
        return None
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else 0
    if not width:
        try:
            width = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            width = 0
    return max(width or 80, MIN_WIDTH)


def cut_middle(text: str, width: int) -> str:
    """``text`` cut in the middle to ``width``: its start (namespace, class) and its end (the method, its last
    arguments) stay."""
    if len(text) <= width:
        return text
    if width <= len(ELLIPSIS):
        return text[:width]
    head = width // 3
    return text[:head] + ELLIPSIS + text[len(text) - (width - head - len(ELLIPSIS)):]


def cut_name(name: str, width: int) -> str:
    """A (compacted) C++ name within ``width``: its leading namespaces go first (``...Op<...>::Compute(...)``),
    so that the class and the method stay; else it is cut in the middle."""
    if len(name) <= width:
        return name
    depth, cuts = 0, []
    for i, c in enumerate(name):
        if c in "(<{":
            depth += 1
        elif c in ")>}":
            depth -= 1
        elif depth == 0 and name.startswith("::", i):
            cuts.append(i + 2)
    for i in cuts[:-1]:  # not the last: the method alone, without its class, says too little
        rest = name[i:]
        if len(ELLIPSIS) + len(rest) <= width:
            return ELLIPSIS + rest
    return cut_middle(name, width)


def cut_path(path: str, width: int) -> str:
    """``path`` within ``width``: its leading directories go first (``.../eager/execute.py``), the file name
    last."""
    if len(path) <= width:
        return path
    cut = path
    while "/" in cut[1:]:
        cut = cut[cut.index("/", 1):]
        if len(ELLIPSIS) + len(cut) <= width:
            return ELLIPSIS + cut
    return cut_middle(path, width)


def cut_line(line: str, width: Optional[int], keep_end: str = "") -> str:
    """A last resort: ``line`` within ``width``, cut in its middle; ``keep_end`` (a mark at its end) stays
    whole where it can."""
    if width is None or len(line) <= width:
        return line
    if keep_end and line.endswith(keep_end) and len(keep_end) <= width // 2:
        return cut_middle(line[:len(line) - len(keep_end)], width - len(keep_end)) + keep_end
    return line[:max(width - len(ELLIPSIS), 0)] + ELLIPSIS


# Inline namespaces that only version a library's ABI (absl's ``lts_20250814``, libstdc++'s ``__cxx11``).
_ABI_NAMESPACE_RE = re.compile(r"\b(?:lts_\d+|__cxx11|__1)::")
_OPERATOR_CHARS = "<>=!+-*/%&|^~[],"


def compact_cpp(name: str, params: bool = False) -> str:
    """A demangled C++ name without its template arguments (``Op<...>::Compute(tensorflow::OpKernelContext*)``)
    and ABI namespaces; ``params``: without its parameters too (``Compute(...)``).

    A name that does not parse (unbalanced brackets) comes back as it was, but for the namespaces.
    """
    name = _ABI_NAMESPACE_RE.sub("", name)
    out: List[str] = []
    depth = 0  # of <...> (parentheses and braces inside them ride along)
    i, n = 0, len(name)
    while i < n:
        if name.startswith("operator", i) and (i == 0 or not (name[i - 1].isalnum() or name[i - 1] == "_")):
            j = i + len("operator")
            if name.startswith("()", j):
                j += 2
            else:
                while j < n and name[j] in _OPERATOR_CHARS:
                    j += 1
            if depth == 0:
                out.append(name[i:j])
            i = j
            continue
        c = name[i]
        if c == "<":
            if depth == 0:
                out.append("<" + ELLIPSIS + ">")
            depth += 1
        elif c == ">" and not (i > 0 and name[i - 1] == "-"):
            depth -= 1
            if depth < 0:
                return name
        elif depth == 0:
            out.append(c)
        i += 1
    if depth != 0:
        return name
    text = "".join(out)
    if params:
        text = _drop_params(text)
    return text


def _drop_params(text: str) -> str:
    """``f(int, char const*) const`` -> ``f(...) const``: the last parenthesised group at the top level (not the
    ``(anonymous namespace)`` of a qualified name)."""
    depth, start, end = 0, -1, -1
    for i, c in enumerate(text):
        if c in "({":
            if depth == 0 and c == "(":
                start = i
            depth += 1
        elif c in ")}":
            depth -= 1
            if depth == 0 and c == ")" and start >= 0:
                end = i
    if start < 0 or end <= start + 1 or text.startswith("::", end + 1):
        return text
    return text[:start + 1] + ELLIPSIS + text[end:]


def wrap(text: str, width: Optional[int], indent: str = "    ", sep: str = "; ") -> List[str]:
    """Prose as lines within ``width``: broken after ``sep`` where it can (``" "``: between words), else between
    words (a word longer than a line is cut); lines after the first start with ``indent``, the first keeps
    its own leading spaces.  No width: the text as one line."""
    if width is None or len(text) <= width:
        return [text]
    width = max(width, len(indent) + 10)
    lead = text[:len(text) - len(text.lstrip(" "))]
    pieces = [p for p in text[len(lead):].split(sep)]
    glue = sep.rstrip()
    lines: List[str] = []
    current = lead
    for k, piece in enumerate(pieces):
        piece += glue if k < len(pieces) - 1 else ""
        if not piece:
            continue
        candidate = current + (" " if current.strip() else "") + piece
        if len(candidate) <= width:
            current = candidate
            continue
        if current.strip():
            lines.append(current)
            current = indent
        if len(current + piece) <= width:
            current += piece
            continue
        parts = textwrap.wrap(piece, width=width, initial_indent=current, subsequent_indent=indent,
                              break_long_words=True, break_on_hyphens=False)
        lines.extend(parts[:-1])
        current = parts[-1] if parts else indent
    if current.strip():
        lines.append(current)
    return lines
