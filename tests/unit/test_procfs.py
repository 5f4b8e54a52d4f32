"""The /proc readers on this test's own process; no gdb (the readers on a child in known states:
``tests/integration/test_procfs_children.py``)."""

from __future__ import annotations

import os
import sys
import threading
import time

from tfnative.core import procfs


def test_maps_of_this_process_name_its_interpreter_and_anonymous_memory():
    rows = procfs.maps(os.getpid())
    assert rows == sorted(rows)
    exe = os.path.realpath(sys.executable)
    mine = [r for r in rows if r.path == exe]
    assert mine and any("x" in r.perms for r in mine)
    assert all(r.start < r.end for r in rows)
    assert any(r.path == "[stack]" for r in rows)
    assert any(r.path == "" and r.inode == 0 for r in rows)


def test_threads_states_and_names():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="waiter")
    t.start()
    try:
        tids = procfs.tids(os.getpid())
        assert os.getpid() in tids and t.native_id in tids
        deadline = time.monotonic() + 10  # the thread may not be in its wait yet
        while procfs.state(os.getpid(), t.native_id) != "S" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.state(os.getpid(), t.native_id) == "S"
        assert procfs.comm(os.getpid()) == os.path.basename(sys.executable)[:15]
        assert procfs.tracer(os.getpid()) == 0
        assert procfs.status(os.getpid())["Pid"] == str(os.getpid())
        assert procfs.num_threads(os.getpid()) == len(procfs.tids(os.getpid())) == \
            int(procfs.status(os.getpid())["Threads"])  # the one count: stat's, as status says it
    finally:
        stop.set()
        t.join()


def test_stat_fields_are_read_past_a_thread_name_with_spaces_and_parentheses():
    """A thread may name itself anything (``prctl(PR_SET_NAME)``): ``stat``'s fields are counted from the
    name's last ``)``, for every reader of them (state, flags, CPU ticks, thread count)."""
    import ctypes

    stop, named = threading.Event(), threading.Event()

    def run():
        ctypes.CDLL(None).prctl(15, b") S 1 (x) R", 0, 0, 0)  # PR_SET_NAME
        named.set()
        stop.wait()

    t = threading.Thread(target=run)
    t.start()
    try:
        named.wait(10)
        pid, tid = os.getpid(), t.native_id
        assert procfs.comm(pid, tid) == ") S 1 (x) R"
        fields = procfs.stat_fields(pid, tid)
        assert fields is not None and fields[0] in (b"R", b"S") and int(fields[1]) == os.getppid()  # field 4: ppid
        deadline = time.monotonic() + 10
        while procfs.state(pid, tid) != "S" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.state(pid, tid) == "S" and not procfs.exiting(pid, tid)
        assert procfs.cpu_ticks(pid, tid) is not None and not procfs.kernel_thread(pid)
        assert procfs.num_threads(pid) == int(procfs.status(pid)["Threads"])
        assert procfs.start_code(pid) is not None and procfs.exit_status(pid) is None  # running: no status
    finally:
        stop.set()
        t.join()
    assert procfs.stat_fields(pid, tid) is None and procfs.state(pid, tid) is None and procfs.exiting(pid, tid)
