"""docs/architecture.md is the one map of the code: every module is on it, every file it names exists,
and no other page carries a copy of the map."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "architecture.md")
PATH_RE = re.compile(r"`((?:tfnative|gdb_scripts|tests)/[\w/.-]+\.py)`")


def _modules():
    for top in ("tfnative", os.path.join("gdb_scripts", "tfnative_gdb")):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            if "__pycache__" in d:
                continue
            for name in files:
                if name.endswith(".py") and not (name == "__init__.py" and d != os.path.join(ROOT, "tfnative")):
                    yield os.path.relpath(os.path.join(d, name), ROOT)


def test_every_module_is_on_the_map():
    text = open(DOC).read()
    missing = sorted(m for m in _modules() if "`%s`" % m not in text and m != "tfnative/__init__.py")
    assert missing == []


def test_every_file_the_map_names_exists():
    named = set(PATH_RE.findall(open(DOC).read()))
    assert named and sorted(p for p in named if not os.path.exists(os.path.join(ROOT, p))) == []


def test_no_other_page_copies_the_map():
    """A file map is a table row per module; only architecture.md has one (the README links to it)."""
    for page in ["README.md", "CONTRIBUTING.md"] + ["docs/" + n for n in os.listdir(os.path.join(ROOT, "docs"))
                                                    if n.endswith(".md") and n != "architecture.md"]:
        path = os.path.join(ROOT, page)
        if not os.path.exists(path):
            continue
        rows = [ln for ln in open(path) if re.match(r"\| `tfnative/[\w/]+\.py`", ln)]
        assert rows == [], page
