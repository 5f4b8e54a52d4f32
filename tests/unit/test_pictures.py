"""The pictures of merged documents: the HTML page (escaping, the outlier, the thread groups, nothing from the
network) and the speedscope file (its structure checked against the schema's required fields)."""

import base64
import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from tfnative.analysis.frames import mark_documents
from tfnative.analysis.tree import build_tree
from tfnative.core.model import Document
from tfnative.errors import TfnativeError
from tfnative.output import flamegraph, merge, speedscope
from tfnative.output.threadgroups import frame_text

from ..utils import TFNATIVE

DATA = Path(__file__).parent / "data"
EVIL = "</script><script>alert(1)</script><!--"


def py(fn, line, file="/app/train.py"):
    return {"kind": "python", "function": fn, "file": file, "line": line}


def nat(fn, lib="libc.so.6", op=None):
    out = {"kind": "native", "function": fn, "file": None, "line": None, "library": lib, "address": "0x1"}
    if op:
        out["op"] = op
    return out


WAIT = [nat("futex_wait"), nat("_PyEval_Vector", "python3.11"), py("step", 20), py("main", 30)]
MATMUL = {"type": "MatMul", "name": "dense/MatMul"}
ODD = [nat("tensorflow::MatMulOp::Compute(tensorflow::OpKernelContext*)", "libtensorflow_framework.so.2", MATMUL),
       py(EVIL, 9), py("main", 28)]


def job(n=6, odd=4, host="vm", scheduler=False):
    """``n`` workers, each with two threads; worker ``odd``'s main thread elsewhere."""
    docs = []
    for i in range(n):
        d = {"tfnative": 1, "pid": 100 + i, "host": host, "task": {"type": "worker", "index": i},
             "events": [{"kind": "snapshot", "pid": 100 + i, "threads": [
                 {"tid": 1, "name": "python", "frames": ODD if i == odd else WAIT},
                 {"tid": 2, "name": "loader", "frames": WAIT}]}]}
        if scheduler:
            del d["task"]
            d["scheduler"] = {"kind": "slurm", "rank": i, "job": "12", "step": "0"}
        docs.append(Document.from_json(d))
    return docs


def page_of(docs, title, all_threads=False):
    """The page of ``docs``, their tree made by analysis as ``merge --html`` makes it."""
    return flamegraph.render_html(docs, build_tree(frame_text, docs, all_threads), title, all_threads)


def analysed(docs):
    """``docs`` read back, marked by analysis as ``merge`` marks them (their glue) before speedscope's file."""
    mark_documents(docs)
    return docs


def data_of(page):
    m = re.search(r'<script id="tfnative-data" type="application/json">(.*?)</script>', page, re.S)
    assert m, "no data element"
    return json.loads(m.group(1))


def test_strings_from_documents_cannot_inject():
    docs = job(host='vm"><img src=x onerror=alert(2)>')
    page = page_of(docs, "title </title><script>alert(3)</script>")
    # the template's two script elements, and no other element opened by a document's string
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "<img" not in page and "<!--" not in page and "alert(3)</script>" not in page
    assert "<title>title &lt;/title&gt;&lt;script&gt;alert(3)&lt;/script&gt;</title>" in page
    # the data keeps every string as it was, for the script to show as text
    data = data_of(page)
    assert any(n["name"] == EVIL for n in data["nodes"])
    assert any(p["host"] == 'vm"><img src=x onerror=alert(2)>' for p in data["processes"])
    # the script never writes markup from data
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    assert "innerHTML" not in script and "outerHTML" not in script and "document.write" not in script


def test_self_contained_and_csp_allows_only_its_own_code():
    page = page_of(job(), "t")
    assert not re.search(r"""(src|href)\s*=|https?://|@import|url\(""", page.split('id="tfnative-data"')[0])
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp
    for tag in ("script", "style"):
        body = re.search(r"<%s>(.*?)</%s>" % (tag, tag), page, re.S).group(1)
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert "%s-src 'sha256-%s'" % (tag, digest) in csp


def test_outlier_marked_with_its_branch_and_members():
    nodes = data_of(page_of(job(), "t"))["nodes"]
    odd = [n for n in nodes if n["outlier"]]
    assert len(odd) == 1 and odd[0]["members"] == "worker:4" and odd[0]["threads"] == 1
    assert odd[0]["text"] == "[py] main at /app/train.py:28  <-- your code"
    assert odd[0]["user"] and odd[0]["cls"] == "user"
    kernel = [n for n in nodes if n["op"]]
    assert len(kernel) == 1 and kernel[0]["op"] == 'MatMul "dense/MatMul"' and kernel[0]["kind"] == "native"
    assert kernel[0]["name"] == "tensorflow::MatMulOp::Compute(...)" and kernel[0]["cls"] == "tensorflow-native"
    # parents come first, and a node's threads are its children's and those that end there
    root = nodes[0]
    assert root["parent"] == -1 and root["threads"] == 12 and root["members"] == "worker:0-5"
    for n in nodes[1:]:
        assert n["parent"] < n["id"]
    assert not any(n["name"] == "_PyEval_Vector" for n in nodes)  # glue hidden, as in the text


def test_outlier_named_by_its_scheduler():
    nodes = data_of(page_of(job(scheduler=True), "t"))["nodes"]
    (odd,) = [n for n in nodes if n["outlier"]]
    assert odd["members"] == "rank:4" and odd["about"] == merge.where(
        {"scheduler": {"kind": "slurm", "rank": 4, "job": "12", "step": "0"}, "host": "vm", "pid": 104})
    assert "pid 104" in odd["about"]


def test_no_outlier_when_tied_and_one_process_grouped_as_the_text():
    doc = Document.from_json(json.loads((DATA / "doc_stack_a.json").read_text()))
    data = data_of(page_of([doc], "one", all_threads=True))
    assert not any(n["outlier"] for n in data["nodes"])
    assert data["summary"] == "1 process (pid %s on %s), 7 threads" % (doc.pid, doc.host)
    ends = [e for n in data["nodes"] for e in n["ends"]]
    assert sum(int(e.split()[0]) for e in ends) == 7  # every thread ends somewhere, once
    assert any(re.match(r"\d+ threads \(python \d+", e) for e in ends)


def test_no_documents():
    with pytest.raises(TfnativeError, match="no documents"):
        page_of([], "t")
    with pytest.raises(TfnativeError, match="no documents"):
        speedscope.speedscope([])


def check_speedscope(data):
    """The required fields of https://www.speedscope.app/file-format-schema.json (FileFormat.File, Frame,
    SampledProfile) and their types, and what the importer insists on (samples and weights alike long,
    indices into the shared frames)."""
    for key in ("$schema", "shared", "profiles"):
        assert key in data, key
    assert data["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = data["shared"]["frames"]
    assert isinstance(frames, list)
    for f in frames:
        assert isinstance(f["name"], str)
        assert set(f) <= {"name", "file", "line", "col"}
        assert isinstance(f.get("file", ""), str) and isinstance(f.get("line", 0), int)
    assert isinstance(data.get("name", ""), str) and isinstance(data.get("exporter", ""), str)
    assert 0 <= data.get("activeProfileIndex", 0) < max(1, len(data["profiles"]))
    for p in data["profiles"]:
        for key in ("type", "name", "unit", "startValue", "endValue", "samples", "weights"):
            assert key in p, key
        assert p["type"] == "sampled" and isinstance(p["name"], str)
        assert p["unit"] in ("none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes")
        assert isinstance(p["startValue"], (int, float)) and p["endValue"] >= p["startValue"]
        assert len(p["samples"]) == len(p["weights"])
        assert all(isinstance(w, (int, float)) for w in p["weights"])
        for stack in p["samples"]:
            assert all(isinstance(i, int) and 0 <= i < len(frames) for i in stack)


def test_speedscope_structure_and_order():
    data = speedscope.speedscope(analysed(job()), name="job")
    json.dumps(data)
    check_speedscope(data)
    frames = data["shared"]["frames"]
    assert [p["name"] for p in data["profiles"]] == ["worker:%d (pid %d on vm)" % (i, 100 + i) for i in range(6)]
    odd = data["profiles"][4]
    assert odd["weights"] == [1, 1] and odd["endValue"] == 2
    first = [frames[i] for i in odd["samples"][0]]  # outermost first
    assert first[0] == {"name": "main", "file": "/app/train.py", "line": 28}
    assert first[-1] == {"name": 'tensorflow::MatMulOp::Compute(tensorflow::OpKernelContext*) [op MatMul '
                                 '"dense/MatMul"]', "file": "libtensorflow_framework.so.2"}
    assert not any(f["name"] == "_PyEval_Vector" for f in frames)
    # shared: the waiting stack's frames once for all six processes
    assert len([f for f in frames if f["name"] == "step"]) == 1


def test_speedscope_of_a_real_document():
    doc = Document.from_json(json.loads((DATA / "doc_stack_a.json").read_text()))
    data = speedscope.speedscope(analysed([doc]), all_threads=True)
    check_speedscope(data)
    assert len(data["profiles"]) == 1 and len(data["profiles"][0]["samples"]) == 7
    python_only = speedscope.speedscope([doc])
    assert len(python_only["profiles"][0]["samples"]) == 2


def run_merge(args, stdin):
    return subprocess.run([*TFNATIVE, "merge", *args], input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_cli_merge_pictures(tmp_path):
    text = "".join(json.dumps(d.to_json()) + "\n" for d in job())
    page, prof = tmp_path / "p.html", tmp_path / "p.json"
    r = run_merge(["-", "--html", str(page), "--speedscope", str(prof)], text)
    assert r.returncode == 0, r.stderr
    assert "<== OUTLIER" in r.stdout  # the text as before
    assert data_of(page.read_text())["summary"].startswith("6 processes, 12 threads")
    check_speedscope(json.loads(prof.read_text()))
    r = run_merge(["-", "--html", "-"], text)
    assert r.returncode == 0 and r.stdout.startswith("<!DOCTYPE html>") and "OUTLIER" not in r.stdout.split("<")[0]
    r = run_merge(["-", "--html", "-", "--json", "-"], text)
    assert r.returncode != 0 and "only one of --json, --tree, --html and --speedscope" in r.stderr
    r = run_merge(["-", "--speedscope", "-"], "")
    assert r.returncode != 0 and "no documents" in r.stderr and "Traceback" not in r.stderr


def test_cli_stack_refuses_stdout_for_pictures():
    r = subprocess.run([*TFNATIVE, "stack", "--pid", "1", "--html", "-"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "--html and --speedscope write a file" in r.stderr


def test_slurm_job_pictures(monkeypatch, tmp_path):
    """``stack --slurm-job J --html F --speedscope S``: the job's documents (here without Slurm) drawn as
    ``merge`` draws them, beside the text tree."""
    import io

    from tfnative.cli.stack import JobOutput, run_slurm_stack
    from tfnative.snapshot import slurm
    from tfnative.snapshot.options import StackOptions

    docs = job(scheduler=True)
    monkeypatch.setattr(slurm, "client", lambda name: name)
    monkeypatch.setattr(slurm, "job_of", lambda j: slurm.Job(j, j, "RUNNING", "me", ["vm"]))
    monkeypatch.setattr(slurm, "collect", lambda *a: docs)
    page, prof = tmp_path / "job.html", tmp_path / "job.json"
    opts = StackOptions(html_path=str(page), speedscope_path=str(prof))
    out, err = io.StringIO(), io.StringIO()
    assert run_slurm_stack("12", "tfnative", opts, JobOutput(), err, out) == 0
    assert "<== OUTLIER" in out.getvalue()
    data = data_of(page.read_text())
    assert data["title"] == "tfnative stack: Slurm job 12"
    assert [n["members"] for n in data["nodes"] if n["outlier"]] == ["rank:4"]
    check_speedscope(json.loads(prof.read_text()))
