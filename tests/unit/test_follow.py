"""``--follow-children``'s pure parts: the kernel's process events as the watch reads them, how an event
names its process, and a child's events beside the parent's in one document."""

import socket
import struct

from tfnative.analysis.event import document_triage
from tfnative.attach import procwatch
from tfnative.core.model import Document, Event
from tfnative.output.report import process_phrase


def message(what: int, *fields: int) -> bytes:
    """A netlink proc-connector message as the kernel sends it: headers, ``what``, cpu, timestamp, data."""
    data = struct.pack("=I", what) + struct.pack("=IQ", 0, 0) + struct.pack("=%dI" % len(fields), *fields)
    data += b"\0" * (procwatch._DATA + 16 - procwatch._EVENT - len(data))
    return b"\0" * procwatch._EVENT + data


def watch(root: int):
    heard = []
    a, b = socket.socketpair()
    w = procwatch.ChildWatch(a, root, lambda what, pid: heard.append((what, pid)))
    return w, heard, (a, b)


def test_listener_hears_the_tree_only():
    w, heard, socks = watch(100)
    try:
        w._handle(message(procwatch.PROC_EVENT_FORK, 100, 100, 200, 200))  # a child of the root
        w._handle(message(procwatch.PROC_EVENT_FORK, 200, 200, 201, 200))  # a thread of it: not a process
        w._handle(message(procwatch.PROC_EVENT_FORK, 999, 999, 300, 300))  # someone else's child
        w._handle(message(procwatch.PROC_EVENT_FORK, 200, 200, 400, 400))  # a grandchild
        w._handle(message(procwatch.PROC_EVENT_EXEC, 400, 400))
        w._handle(message(procwatch.PROC_EVENT_EXEC, 100, 100))  # the root's own exec: not a new process
        w._handle(message(procwatch.PROC_EVENT_EXIT, 400, 400, 11))  # killed by SIGSEGV
        w._handle(message(procwatch.PROC_EVENT_EXIT, 300, 300, 0))
    finally:
        for s in socks:
            s.close()
    assert heard == [("fork", 200), ("fork", 400), ("exec", 400), ("exit", 400)]
    assert [(k.pid, k.signal) for k in w.killed] == [(400, "SIGSEGV")]


def test_process_phrase():
    assert process_phrase({"pid": 12, "cmdline": "python3 w.py"}) == "in child 12 (python3 w.py)"
    long = "python3 -c " + "x" * 200
    assert process_phrase({"pid": 12, "cmdline": long}) == "in child 12 (%s...)" % long[:77]
    assert process_phrase({"pid": 3, "cmdline": "python3 w.py", "task": {"type": "worker", "index": 2}}) == \
        "in child 3 (python3 w.py, worker:2)"


def test_child_events_leave_the_parents_exit_and_triage_alone():
    child = {"pid": 20, "cmdline": "python3 -c ..."}
    crash = Event(kind="signal", signal="SIGSEGV", thread=20, process=child)
    hit = Event(kind="breakpoint", location="uname", thread=10)
    doc = Document(argv=["python3", "s.py"], pid=10, events=[hit, crash], has_exit=True)
    assert doc.own(hit) and not doc.own(crash)
    doc.set_exit(3)
    assert crash.fatal is None  # the child's signal is the child's: the parent exited with status 3
    tri = document_triage(doc)
    assert tri.signal is None and tri.breakpoints == {"uname": 1}
    assert crash.to_json()["process"] == child and "process" not in hit.to_json()
    assert Event.from_json(crash.to_json()).process == child
    # the child's own document sees the same event as its own
    cdoc = Document(argv=["python3"], pid=20, attached=True, events=[crash], has_exit=True)
    cdoc.set_exit(-11)
    assert crash.fatal is True and document_triage(cdoc).signal == "SIGSEGV"
