"""``tests/matrix/run --write-docs`` on a machine that ran only some pairs: the others keep their last rows
from the page (``from_page``), cell by cell, with their reasons and versions; checks added since show ``-``."""

import importlib.machinery
import importlib.util
import os
import re
import sys

from ..utils import ROOT

PAGE = os.path.join(ROOT, "docs", "matrix.md")


def load_run():
    sys.path.insert(0, os.path.join(ROOT, "tests", "matrix"))
    try:
        loader = importlib.machinery.SourceFileLoader("matrix_run", os.path.join(ROOT, "tests", "matrix", "run"))
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader("matrix_run", loader))
        loader.exec_module(module)
        return module
    finally:
        sys.path.pop(0)


def section(text, name):
    return text.split("## %s" % name, 1)[1].split("\n## ", 1)[0]


def test_pairs_not_run_here_keep_their_rows_from_the_page(tmp_path, monkeypatch):
    monkeypatch.setenv("TFNATIVE_CACHE", str(tmp_path / "empty-cache"))
    run = load_run()
    before = open(PAGE).read()
    records = run.from_page(PAGE)
    assert set(records) == set(run.pairs.PAIRS)
    notf = records["py3.15-notf"]
    assert notf["cells"]["py_stack"] == {"result": "pass", "reason": ""}
    skipped = notf["cells"]["tf_newsession"]
    assert skipped["result"] == "skip" and "no TensorFlow" in skipped["reason"]
    out = tmp_path / "matrix.md"
    out.write_text(before)
    run.write_docs(str(out))
    after = out.read_text()
    assert section(after, "Versions found") == section(before, "Versions found")
    rows = {}
    for text in (before, after):
        lines = [ln for ln in section(text, "Checks").splitlines() if ln.startswith("| ")]
        head = [c.strip() for c in lines[0].strip("|").split("|")]
        rows[text is after] = {ln.split("|")[1].strip(): dict(zip(head, (c.strip() for c in ln.strip("|").split("|"))))
                               for ln in lines[1:]}
    for pair, cells in rows[False].items():
        for head, word in cells.items():
            assert rows[True][pair][head] == word, (pair, head)
        new = set(rows[True][pair]) - set(cells)
        assert all(rows[True][pair][h] == "-" for h in new)
    notes = lambda text: re.findall(r"^\d+\. .*$", section(text, "Checks"), re.M)  # noqa: E731
    assert notes(after) == notes(before)
