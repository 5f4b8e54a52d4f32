"""Pure logic of many-process stacks: --label, which processes, the snapshot pool's
outcomes, JSON Lines, thread groups and member names.  No process is inspected here."""

import json
import threading

import pytest

from tfnative.core import docread, treemodel
from tfnative.core.model import Document, EventThread, Outcome
from tfnative.errors import TfnativeError
from tfnative.output import processes, report, threadgroups
from tfnative.snapshot import many as multistack


def test_parse_labels():
    assert multistack.parse_labels(["rank=3", "node=n1=a", "empty="]) == {"rank": "3", "node": "n1=a", "empty": ""}
    for bad in ("rank", "=3", " =3"):
        with pytest.raises(TfnativeError, match="KEY=VALUE"):
            multistack.parse_labels([bad])


def test_is_tfnative():
    assert multistack._is_tfnative(["/venv/bin/tfnative", "stack", "--match", "x"])
    assert multistack._is_tfnative(["python3", "-m", "tfnative", "stack"])
    assert multistack._is_tfnative(["/usr/bin/python3", "/venv/bin/tfnative", "stack"])
    assert not multistack._is_tfnative(["python3", "train.py", "--tfnative-like"])
    assert not multistack._is_tfnative(["python3", "-m", "trainer"])


def test_targets_keep_order_once():
    assert multistack.targets([30, 10, 30, 20], [], []) == [30, 10, 20]
    with pytest.raises(TfnativeError, match="no process to snapshot"):
        multistack.targets([], [], [])
    with pytest.raises(TfnativeError, match="not a regular expression"):
        multistack.targets([], [], ["(unclosed"])


def _doc(pid):
    return report.Document(argv=["python", "w.py"], pid=pid)


def test_snapshot_all_outcomes_in_order_errors_kept():
    seen = []

    def take(pid):
        seen.append(threading.current_thread().name)
        if pid == 2:
            raise TfnativeError("process 2 exited")
        return _doc(pid)

    out = multistack.snapshot_all([3, 2, 1, 4, 5], take, jobs=3)
    assert [o.pid for o in out] == [3, 2, 1, 4, 5]
    assert [o.doc.pid if o.doc else None for o in out] == [3, None, 1, 4, 5]
    assert out[1].error == "process 2 exited"
    assert all(name.startswith("tfnative-stack") for name in seen)


def test_snapshot_all_other_errors_cancel_the_rest():
    done = []

    def take(pid):
        if pid == 1:
            raise KeyError("bug")
        done.append(pid)
        return _doc(pid)

    with pytest.raises(KeyError):
        multistack.snapshot_all([1, 2], take, jobs=1)
    assert done == []  # one at a time: the second was not started, it was cancelled


def test_report_all_none_read_is_an_error(capsys):
    import io

    out = [Outcome(5, error="no process with pid 5")]
    with pytest.raises(TfnativeError, match="none of the 1 process"):
        processes.report_all(out, None, report.Printer(io.StringIO()), io.StringIO())


def test_json_lines_one_document_per_line():
    a, b = _doc(1), _doc(2)
    a.host, a.task, a.labels = "h", {"type": "worker", "index": 0}, {"rank": "0"}
    text = report.json_lines([a, b]).decode()
    lines = text.splitlines()
    assert len(lines) == 2 and text.endswith("\n")
    first = json.loads(lines[0])
    assert first["tfnative"] == 1 and first["pid"] == 1 and first["host"] == "h"
    assert first["task"] == {"type": "worker", "index": 0} and first["labels"] == {"rank": "0"}
    assert "task" not in json.loads(lines[1])
    assert docread.parse_documents([("x", text)])[0].pid == 1


def test_process_title():
    d = _doc(7)
    d.host, d.task = "n1", {"type": "worker", "index": 2}
    assert processes.process_title(d) == "process 7 worker:2 on n1: python w.py"
    d = _doc(8)
    d.host = "n1"
    assert processes.process_title(d) == "process 8 on n1: python w.py"


def nat(fn, addr="0x1"):
    return {"kind": "native", "function": fn, "file": None, "line": None, "library": "libc.so.6", "address": addr}


def test_thread_groups_and_titles():
    wait = [nat("syscall", "0x10"), nat("Worker", "0x20")]
    threads = [{"tid": 101 + i, "name": "tf_Compute", "frames": [dict(f, address="0x%x" % (i + 5)) for f in wait]}
               for i in range(14)]
    threads.insert(3, {"tid": 99, "name": "python", "frames": [nat("epoll_wait")]})
    threads.append({"tid": 200, "name": "tf_Compute", "frames": list(wait)})  # same stack, other state
    threads.append({"tid": 120, "name": "Eigen", "frames": list(wait)})
    headed = [(EventThread.from_json(t), " [S in futex]" if t["tid"] != 200 else " [R running]") for t in threads]
    groups = threadgroups.group_threads(headed)
    assert [len(g) for g in groups] == [15, 1, 1]  # addresses do not matter, headers do; first-seen order
    assert threadgroups.group_title(groups[0]) == "15 threads (tf_Compute 101-114, Eigen 120)"
    assert groups[1][0].tid == 99 and groups[2][0].tid == 200
    assert threadgroups.ranges([5, 1, 2, 3, 9, 7, 8, 3]) == "1-3,5,7-9"


def test_member_names_fall_back_when_shared():
    docs = [{"tfnative": 1, "pid": p, "host": "h", "labels": {"node": "n1"}} for p in (1, 2)]
    docs.append({"tfnative": 1, "pid": 3, "host": "h", "labels": {"rank": "5"}})
    docs.append({"tfnative": 1, "pid": 3, "host": "h", "labels": {"rank": "5"}})  # the same process again
    assert treemodel.member_names([Document.from_json(d) for d in docs]) == ["h:1", "h:2", "rank:5", "rank:5"]


def test_threads_with_other_locals_are_not_grouped():
    frame = {"kind": "python", "function": "work", "file": "/app/w.py", "line": 3}
    a = {"tid": 1, "name": "python", "frames": [dict(frame, variables=[{"name": "i", "value": "1"}])]}
    b = {"tid": 2, "name": "python", "frames": [dict(frame, variables=[{"name": "i", "value": "2"}])]}
    c = {"tid": 3, "name": "python", "frames": [dict(frame, variables=[{"name": "i", "value": "2"}])]}
    a, b, c = (EventThread.from_json(t) for t in (a, b, c))
    assert [[t.tid for t in g] for g in threadgroups.group_threads([(a, ""), (b, ""), (c, "")])] == [[1], [2, 3]]
