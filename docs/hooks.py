"""MkDocs hooks (``hooks:`` in mkdocs.yml): the parts of the site that are generated, not written.

* ``<!-- options: CMD -->`` becomes the option reference of ``tfnative CMD``, read from the click
  command itself (``tfnative.cli.main``): an option added in code appears on its page without anyone
  writing it (tests/unit/test_docs.py checks every option of every command is on its page).
* ``<!-- include: PATH [strip-title] [shift=N] -->`` becomes the file PATH (relative to the repository's
  top), its first ``# `` title dropped with ``strip-title`` and its headings made N levels deeper with
  ``shift=N``: docs/benchmarks.md takes its tables from bench/results/*.md (the numbers live there only),
  docs/contributing.md is CONTRIBUTING.md.
* ``<!-- version -->`` becomes tfnative's version, read from ``tfnative/__init__.py`` (the one place it is
  written): the site names the release it documents.
* Links from a page to the files at the top of the repository (``../CONTRIBUTING.md``, ``../README.md``),
  written so that the pages also read well on GitHub, point at the site's pages instead.

A marker quoted in backticks (`` `<!-- options: CMD -->` ``) is left as it is.  The functions below take and
return text, so the tests call them without building the site.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS_MARK = re.compile(r"(?<!`)<!-- options: ([\w-]+) -->")
INCLUDE_MARK = re.compile(r"(?<!`)<!-- include: (\S+)((?: [\w=-]+)*) -->")
VERSION_MARK = re.compile(r"(?<!`)<!-- version -->")
# A link to a file at the top of the repository, from a page in docs/ (or from included text, whose links
# are relative to the top): the site page that holds it.
TOP_LINKS = {"CONTRIBUTING.md": "contributing.md", "README.md": "index.md"}


def _main() -> Any:
    """The click group of this checkout (not of whatever tfnative the interpreter has installed)."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from tfnative.cli import main

    return main


def commands() -> List[str]:
    """Every command of ``tfnative`` (each must have a page with its options marker)."""
    import click

    main = _main()
    return sorted(main.list_commands(click.Context(main, info_name="tfnative")))


def _cell(text: str) -> str:
    """Text that stays in one Markdown table cell and is not read as HTML or emphasis."""
    text = " ".join(text.split())
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def _value(param: Any) -> str:
    """What an option takes: nothing for a flag, else its metavar and the kind of value."""
    if getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None):
        return "flag"
    if getattr(param, "is_flag", False):
        return "flag pair"
    kind = getattr(param.type, "name", "text")
    describe = getattr(param.type, "_describe_range", None)
    if describe is not None:
        kind = "%s, %s" % (kind, describe())
    choices = getattr(param.type, "choices", None)
    if choices:
        kind = "one of " + ", ".join(str(c) for c in choices)
    metavar = param.metavar or str(getattr(param.type, "name", "text")).upper()
    if kind == "text" or metavar == kind.upper():
        return "`%s`" % metavar
    return "`%s` (%s)" % (metavar, kind)


def _default(param: Any) -> str:
    """The default as a reader would want it: nothing where there is none, the running Python by name."""
    default = param.default
    if callable(default) or not isinstance(default, (str, int, float, tuple, list)) or isinstance(default, bool):
        return "on" if default is True else ""
    if default in ((), [], ""):
        return ""
    if default == sys.executable or (isinstance(default, str) and os.path.basename(default).startswith("python")
                                     and os.path.isabs(default)):
        return "the Python that runs tfnative"
    return "`%s`" % (default,)


def options_table(name: str) -> str:
    """The reference of ``tfnative NAME``: its usage line, its arguments and a table of its options."""
    import click

    main = _main()
    parent = click.Context(main, info_name="tfnative")
    cmd = main.get_command(parent, name)
    ctx = click.Context(cmd, info_name=name, parent=parent)
    lines = ["```", cmd.get_usage(ctx), "```", ""]
    args = [p for p in cmd.params if isinstance(p, click.Argument)]
    if args:
        lines.append("Arguments: " + ", ".join("`%s`%s" % (p.make_metavar(ctx), "" if p.required else " (optional)")
                                               for p in args) + ".")
        lines.append("")
    lines += ["| option | value | default | what it does |", "| --- | --- | --- | --- |"]
    for p in cmd.params:
        if not isinstance(p, click.Option) or p.hidden:
            continue
        flags = ", ".join("`%s`" % o for o in p.opts)
        if p.secondary_opts:
            flags += " / " + ", ".join("`%s`" % o for o in p.secondary_opts)
        helptext = p.help or ""
        if p.multiple and "repeatable" not in helptext:
            helptext += " (repeatable)"
        if p.required:
            helptext += " (required)"
        lines.append("| %s | %s | %s | %s |" % (flags, _value(p), _default(p), _cell(helptext)))
    lines += ["", "`-h`, `--help` prints this list in the terminal."]
    return "\n".join(lines)


def _shift_headings(text: str, levels: int) -> str:
    """Every ATX heading ``levels`` deeper (code blocks left alone)."""
    out, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and re.match(r"#{1,6} ", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


def include(path: str, flags: str = "") -> str:
    """The text of PATH (relative to the repository's top) as a page includes it."""
    with open(os.path.join(ROOT, path)) as f:
        text = f.read().strip("\n")
    words = flags.split()
    if "strip-title" in words and text.startswith("# "):
        text = text.split("\n", 1)[1].lstrip("\n") if "\n" in text else ""
    for w in words:
        if w.startswith("shift="):
            text = _shift_headings(text, int(w.split("=", 1)[1]))
    # The included file's links are relative to the top of the repository: docs/X.md is X.md here.
    return re.sub(r"\]\(docs/", "](", text)


def version() -> str:
    """``__version__`` as tfnative/__init__.py writes it (read, not imported)."""
    with open(os.path.join(ROOT, "tfnative", "__init__.py")) as f:
        found = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    if found is None:
        raise ValueError("tfnative/__init__.py names no __version__")
    return found.group(1)


def render(markdown: str) -> str:
    """A page's Markdown with every marker replaced and top-level links pointed at the site's pages."""
    markdown = INCLUDE_MARK.sub(lambda m: include(m.group(1), m.group(2)), markdown)
    markdown = OPTIONS_MARK.sub(lambda m: options_table(m.group(1)), markdown)
    markdown = VERSION_MARK.sub(lambda m: version(), markdown)
    for top, page in TOP_LINKS.items():
        markdown = markdown.replace("](../%s" % top, "](%s" % page)
    return markdown


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None,
                     **kwargs: Any) -> Optional[str]:
    """MkDocs' hook: called with each page's Markdown before it is converted."""
    return render(markdown)
