"""One version, in one place (tfnative/__init__.py): the package metadata reads it, ``--version`` prints it, every
JSON document names it, the docs site shows it, and the CHANGELOG's top entry is its release."""

import importlib.util
import json
import os
import re

from tfnative import __version__
from tfnative.analysis import tree as mtree
from tfnative.core.model import Document, Event
from tfnative.output import merge, mergetree
from tfnative.output.threadgroups import frame_text

from ..utils import ROOT, run_tfnative

_spec = importlib.util.spec_from_file_location("tfnative_docs_hooks", os.path.join(ROOT, "docs", "hooks.py"))
assert _spec is not None and _spec.loader is not None
hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hooks)


def test_written_in_one_place():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        pyproject = f.read()
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]
    assert not re.search(r"^version\s*=", project, re.M), "pyproject.toml's [project] writes a version of its own"
    assert 'dynamic = ["version"]' in pyproject and 'version = { attr = "tfnative.__version__" }' in pyproject
    assert hooks.version() == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_the_changelogs_top_entry_is_this_release():
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        top = next(line for line in f if line.startswith("## "))
    assert re.match(r"## %s \(\d{4}-\d\d-\d\d\)$" % re.escape(__version__), top), top


def test_the_command_prints_it():
    r = run_tfnative(["--version"], timeout=60)
    assert r.returncode == 0 and r.stdout == "tfnative, version %s\n" % __version__


def test_every_document_names_the_tfnative_that_wrote_it():
    doc = Document(pid=7, argv=["x.py"], events=[Event(kind="snapshot")])
    written = doc.to_json()
    assert list(written)[:2] == ["tfnative", "version"] and written["version"] == __version__
    # a document read back keeps what it said, one of 0.1 (none) included: written again byte for byte
    for version in ("0.1.9", None):
        old = dict(written, version=version) if version else {k: v for k, v in written.items() if k != "version"}
        text = json.dumps(old, indent=1)
        assert json.dumps(Document.from_json(json.loads(text)).to_json(), indent=1) == text
    root = mtree.reduce(frame_text, [doc])
    assert merge.merge_json(root)["version"] == __version__
    assert json.loads(merge.merge_json_text(root))["version"] == __version__
    assert json.loads(mergetree.tree_json_text(root))["version"] == __version__


def test_the_docs_site_names_it():
    with open(os.path.join(ROOT, "docs", "index.md")) as f:
        page = hooks.render(f.read())
    assert "documents tfnative %s" % __version__ in page
