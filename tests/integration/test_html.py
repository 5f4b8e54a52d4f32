"""The ``--html`` page in a real headless browser (Debian's Chromium): real documents (recorded ones, a
``stack --pid`` of a waiting Python program, three processes merged with an outlier), loaded from a file with
no network: the script runs without a console error, the outlier is in the page, ``#zoom=ID`` and
``#search=TEXT`` change what is drawn, strings from a target stay text, and a screenshot is not blank.

Skipped where there is no ``chromium``, except under ``CI`` (``.ci/setup`` installs it), where that fails.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tfnative.analysis.tree import build_tree
from tfnative.core.model import Document
from tfnative.output import flamegraph
from tfnative.output.threadgroups import frame_text

from ..utils import ROOT, TFNATIVE, kill_all, line_of, run_tfnative, script, start_merge_workers

WORKER = script("merge_worker.py")
DATA = Path(ROOT) / "tests" / "unit" / "data"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BACKGROUND_MIN = 0.04  # the least fraction of coloured pixels a drawn graph has (a blank page: none)


def page_of(docs, title, all_threads=False):
    """The page of ``docs``, their tree made by analysis as ``merge --html`` makes it."""
    return flamegraph.render_html(docs, build_tree(frame_text, docs, all_threads), title, all_threads)


@pytest.fixture(scope="module")
def chromium():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have chromium (.ci/setup installs it) for the HTML page's tests", pytrace=False)
        pytest.skip("no chromium here (apt-get install chromium): the HTML page is not loaded in a browser")
    return CHROMIUM


def browse(chromium, tmp_path, page, fragment="", *flags):
    """Load ``page`` (a file) in headless Chromium: (stdout, the console's messages)."""
    url = Path(page).resolve().as_uri() + fragment
    cmd = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           "--hide-scrollbars", "--user-data-dir=%s" % (tmp_path / "chromium-profile"), "--enable-logging=stderr",
           "--v=0", "--virtual-time-budget=3000", *flags, url]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    return r.stdout, console


def dom_of(chromium, tmp_path, page, fragment=""):
    """The page's DOM after its script ran; no console message (an error, a CSP violation) allowed."""
    dom, console = browse(chromium, tmp_path, page, fragment, "--dump-dom")
    assert console == [], "\n".join(console)
    assert 'data-ready="1"' in dom, "the script did not finish"
    return dom


class Elements(HTMLParser):
    """Each drawn frame (a ``div`` of class ``node``): its classes, ``data-id`` and text; the text of
    the elements with an ``id`` (``outliers``, ``matches``, ``crumbs``...)."""

    def __init__(self, dom):
        super().__init__()
        self.nodes, self.by_id, self.open = [], {}, []
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and "node" in (a.get("class") or "").split():
            self.nodes.append({"class": a["class"].split(), "id": int(a["data-id"]), "text": ""})
            self.open.append(("node", self.nodes[-1]))
        elif a.get("id"):
            self.by_id[a["id"]] = ""
            self.open.append(("id", a["id"]))
        else:
            self.open.append(None)

    def handle_endtag(self, tag):
        if self.open and tag not in ("meta", "input", "br", "img"):
            self.open.pop()

    def handle_data(self, data):
        for entry in self.open:
            if entry and entry[0] == "node":
                entry[1]["text"] += data
            elif entry:
                self.by_id[entry[1]] = self.by_id[entry[1]] + data


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA, non-interlaced PNG: zlib and the filters."""
    blob = Path(path).read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(blob):
        length, kind = struct.unpack(">I4s", blob[pos:pos + 8])
        body = blob[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride, prev, rows = zlib.decompress(idat), width * bpp, bytearray(width * bpp), []
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def coloured_fraction(chromium, tmp_path, page, fragment="", quiet=True):
    """The fraction of a 1000x700 screenshot's pixels that are coloured (not white, grey or black: the
    frames' colours, not the page's background or text); ``quiet``: no console message allowed."""
    shot = tmp_path / "shot.png"
    _, console = browse(chromium, tmp_path, page, fragment, "--screenshot=%s" % shot, "--window-size=1000,700")
    assert console == [] or not quiet, "\n".join(console)
    width, height, rows = png_pixels(shot)
    coloured = sum(1 for row in rows for (r, g, b) in row if max(r, g, b) - min(r, g, b) > 40)
    return coloured / float(width * height)


def test_recorded_document_page(chromium, tmp_path):
    """A recorded ``stack --all-threads`` document of a hung TensorFlow program: every thread drawn, ops
    and user frames marked, thread groups, no console error, and a screenshot that is not blank."""
    doc = Document.from_json(json.loads((DATA / "doc_stack_a.json").read_text()))
    page = tmp_path / "one.html"
    page.write_text(page_of([doc], "recorded", all_threads=True))
    seen = Elements(dom_of(chromium, tmp_path, page))
    assert seen.by_id["title"] == "recorded" and seen.by_id["summary"].endswith("7 threads")
    names = [n["text"] for n in seen.nodes]
    assert any(t.startswith("main") and "your code" not in t for t in names)
    assert [n for n in seen.nodes if "c-user" in n["class"] and n["text"].startswith("main")]
    assert [n for n in seen.nodes if "op" in n["class"] and "\u2699 op EagerPyFunc" in n["text"]], names
    assert seen.by_id["outliers"] == ""  # one process: no outlier
    assert coloured_fraction(chromium, tmp_path, page) > BACKGROUND_MIN


def test_blank_page_fails_the_screenshot_check(chromium, tmp_path):
    """The screenshot check's other side: a page whose script does not run draws nothing, below the bar
    (here the script is changed, so its hash no longer matches the page's Content-Security-Policy)."""
    page = tmp_path / "blank.html"
    page.write_text(page_of(
        [Document.from_json(json.loads((DATA / "doc_stack_a.json").read_text()))], "blank",
        all_threads=True).replace("draw();\n  document.body", "document.body"))
    assert coloured_fraction(chromium, tmp_path, page, quiet=False) < BACKGROUND_MIN / 4


def test_stack_html_of_a_live_process(chromium, tmp_path):
    """``tfnative stack --pid P --html F --speedscope S`` of a waiting Python program."""
    (proc,) = start_merge_workers(tmp_path, ["peer"])
    try:
        page, prof = tmp_path / "stack.html", tmp_path / "stack.speedscope.json"
        r = run_tfnative(["stack", "--pid", str(proc.pid), "--html", str(page), "--speedscope", str(prof)])
        assert r.returncode == 0, r.stderr
        assert "wait_for_peers" in r.stdout  # the text as before
    finally:
        kill_all([proc])
    seen = Elements(dom_of(chromium, tmp_path, page))
    assert seen.by_id["title"].startswith("tfnative stack: pid %d" % proc.pid)
    (wait,) = [n for n in seen.nodes if n["text"].startswith("wait_for_peers")]
    assert "c-user" in wait["class"] and "1 thread" in wait["text"]
    profile = json.loads(prof.read_text())
    frames = profile["shared"]["frames"]
    (sample,) = profile["profiles"][0]["samples"]
    assert {"name": "wait_for_peers", "file": WORKER, "line": line_of(WORKER, "the peers wait here")} in \
        [frames[i] for i in sample]


def test_merge_html_outlier_zoom_search(chromium, tmp_path):
    """Three real processes, one elsewhere: merged by ``merge --html`` and by ``stack --pid ... --html`` (the
    same page); the outlier is shown; ``#zoom=`` draws its branch only; ``#search=`` marks the frame."""
    procs = start_merge_workers(tmp_path, ["peer", "peer", "odd"])
    try:
        docs = []
        for p in procs:
            r = run_tfnative(["stack", "--pid", str(p.pid), "--json", "-"])
            assert r.returncode == 0, r.stderr
            docs.append(r.stdout)
        page = tmp_path / "merge.html"
        r = subprocess.run(TFNATIVE + ["merge", "-", "--html", str(page)], input="".join(docs), capture_output=True,
                           text=True, timeout=120, cwd=ROOT)
        assert r.returncode == 0 and "<== OUTLIER" in r.stdout, r.stderr
        many = tmp_path / "many.html"
        args = ["stack", "--html", str(many)] + [a for p in procs for a in ("--pid", str(p.pid))]
        r = run_tfnative(args)
        assert r.returncode == 0, r.stderr
    finally:
        kill_all(procs)
    host, odd_pid = os.uname().nodename, procs[2].pid
    for p in (many, page):  # the merge page's outlier last: zoomed into below
        seen = Elements(dom_of(chromium, tmp_path, p))
        assert seen.by_id["summary"].startswith("3 processes, 3 threads")
        (odd,) = [n for n in seen.nodes if "outlier" in n["class"]]
        assert odd["text"].startswith("OUTLIER") and "[%s:%d] 1 thread" % (host, odd_pid) in odd["text"]
        assert "OUTLIER [%s:%d]" % (host, odd_pid) in seen.by_id["outliers"]
        branch = [n for n in seen.nodes if "branch" in n["class"]]
        assert any(n["text"].startswith("stall_elsewhere") for n in branch)
        assert not any(n["text"].startswith("wait_for_peers") for n in branch)
    # zoomed into the outlier: its branch, its ancestors, nothing of the peers
    seen = Elements(dom_of(chromium, tmp_path, page, "#zoom=%d" % odd["id"]))
    texts = [n["text"] for n in seen.nodes]
    assert any(t.startswith("stall_elsewhere") for t in texts) and not any(t.startswith("wait_for_peers")
                                                                          for t in texts)
    assert seen.by_id["crumbs"].startswith("zoomed: all > ")
    # searched: the peers' frame marked, the count said
    seen = Elements(dom_of(chromium, tmp_path, page, "#search=wait_for"))
    marked = [n["text"] for n in seen.nodes if "match" in n["class"]]
    assert len(marked) == 1 and marked[0].startswith("wait_for_peers"), marked
    assert seen.by_id["matches"] == "1 frame shown match"
    # a regular expression that does not parse: said, no console error
    seen = Elements(dom_of(chromium, tmp_path, page, "#search=%2F(%2F"))
    assert seen.by_id["matches"] == "not a regular expression"
    assert coloured_fraction(chromium, tmp_path, page, "#zoom=%d" % odd["id"]) > BACKGROUND_MIN


def test_strings_from_a_target_stay_text(chromium, tmp_path):
    """Frames, files and labels that look like markup: shown as text, nothing runs (a script or an
    ``onerror`` would also be a CSP violation on the console)."""
    evil = "<img src=x onerror=console.error(1)></script><script>console.error(2)</script>"
    frames = [{"kind": "native", "function": "poll" + evil, "library": "libc.so.6" + evil, "address": "0x1"},
              {"kind": "python", "function": "f" + evil, "file": "/app/" + evil + ".py", "line": 3}]
    docs = [Document.from_json({"tfnative": 1, "pid": 7 + i, "host": "h" + evil, "labels": {"rank": str(i) + evil},
                                "events": [{"kind": "snapshot", "pid": 7 + i, "threads": [
                                    {"tid": 1, "name": evil, "frames": frames[i:]}]}]}) for i in range(2)]
    page = tmp_path / "evil.html"
    page.write_text(page_of(docs, "t" + evil))
    dom = dom_of(chromium, tmp_path, page, "#search=" + re.sub(r"[^a-z]", "", "onerror"))
    assert "<img" not in dom and dom.count("<script") == 2
    seen = Elements(dom)
    assert seen.by_id["title"] == "t" + evil
    assert any(n["text"].startswith("f" + evil) and "match" in n["class"] for n in seen.nodes)
