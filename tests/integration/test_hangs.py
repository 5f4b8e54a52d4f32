"""Issue #25: the verdict of ``tfnative stack`` on the real hang programs of ``tests/hangs`` (see its README).

Each program writes a ready file just before its blocking call and marks the user's blocking lines with
``# hangs here: WHO``.  The module takes one snapshot per program (``stack --pid PID --json``; a program
that forks: ``--pid PID --children PID``, JSON Lines), once the marked lines are on the stacks, then kills
the program's whole tree with SIGKILL and checks nothing is left: only one program runs at a time.

The checks are written against the wait-for-graph contract of issue #25, which the engine will produce:
``triage["verdict"]`` names the blocking thread ("the main thread" / "thread N"), the user's line
``basename.py:LINE`` and the resource; ``triage["pattern"]`` says which hang it is ("deadlock" only where
the waits form a cycle); ``triage["waits"]`` lists the edges ``{"thread", "waits_for", "resource",
"evidence"}``.  ``TFNATIVE_HANGS_CAPTURE=1`` also writes each snapshot to ``tests/hangs/captures/NAME.json``
(this worktree's path replaced by ``<worktree>``) for the engine's author.
"""

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from ..utils import ROOT, assert_gone, has_tensorflow, line_of, requires_gdb, run_tfnative

HANGS = os.path.join(ROOT, "tests", "hangs")
CAPTURES = os.path.join(HANGS, "captures")
MWMS_LAUNCHER = os.path.join(ROOT, "tests", "scripts", "mwms_launcher.py")
MWMS_WORKER = os.path.join(ROOT, "tests", "scripts", "mwms_worker.py")
TF = [pytest.mark.tf, pytest.mark.skipif(not has_tensorflow(), reason="tensorflow is not installed in this Python")]

# name -> (needs TF, several processes, markers that must be on a stack before the snapshot)
PROGRAMS = {
    "data_map_event": (True, False, ["main", "callback"]),
    "data_generator_queue": (True, False, ["main", "generator"]),
    "rlock_order": (False, False, ["main", "loader", "saver"]),
    "gil_mutex": (False, False, ["main"]),
    "fork_matmul": (True, True, ["main", "child"]),
    "pool_map_fork": (True, True, ["main", "worker"]),
    "process_after_predict": (True, True, ["main", "child"]),
    "fifo_eager": (True, False, ["main"]),
    "fifo_function": (True, False, ["main"]),
    "tf1_queue_runner": (True, False, ["main"]),
    "tf1_session_in_py_func": (True, False, ["main", "callback"]),
    "function_pyfunc_pool": (True, False, ["main", "callback"]),
    "mwms_missing_peer": (True, False, ["main"]),
    "busy_control": (False, False, []),
    "busy_matmul_control": (True, False, []),
}


def path_of(name):
    return os.path.join(HANGS, name + ".py")


def marker(name, who):
    """``basename.py:LINE`` of the line marked ``# hangs here: WHO``."""
    return "%s.py:%d" % (name, line_of(path_of(name), "# hangs here: %s" % who))


def parse(text):
    """The documents of ``stack --json``: one, or JSON Lines (several processes)."""
    text = text.strip()
    try:
        return [json.loads(text)]
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def user_lines(doc):
    """Every ``basename.py:LINE`` of a Python frame in the document's threads."""
    return {"%s:%s" % (os.path.basename(f.get("file") or ""), f.get("line"))
            for t in doc["events"][0]["threads"] for f in t["frames"] if f.get("kind") == "python"}


def tree(pid):
    try:
        return [psutil.Process(pid)] + psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def kill_all(procs):
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    assert_gone(procs)


class Capture:
    def __init__(self, name, docs, text, ready_s, pid):
        self.name, self.docs, self.text, self.ready_s, self.pid = name, docs, text, ready_s, pid

    def doc(self, pid):
        (d,) = [d for d in self.docs if d["pid"] == pid]
        return d


def save(name, text, args=None):
    """With TFNATIVE_HANGS_CAPTURE=1: NAME.json, the snapshot the checks saw, and (``args`` given: the process is
    still there) NAME.all-threads.json, the same with ``--all-threads`` (TensorFlow's pools included)."""
    if not os.environ.get("TFNATIVE_HANGS_CAPTURE"):
        return
    os.makedirs(CAPTURES, exist_ok=True)
    with open(os.path.join(CAPTURES, name + ".json"), "w") as f:
        f.write(text.replace(ROOT, "<worktree>"))
    if args is not None:
        r = run_tfnative(["stack", *args, "--all-threads", "--json", "-"], timeout=300)
        assert r.returncode == 0, r.stderr
        with open(os.path.join(CAPTURES, name + ".all-threads.json"), "w") as f:
            f.write(r.stdout.replace(ROOT, "<worktree>"))


def snapshot_until(args, wanted, deadline, tmp, settled=lambda docs: True):
    """``stack ARGS --json`` until every ``basename:LINE`` in ``wanted`` shows on a stack and ``settled(docs)``
    holds (or the deadline): the stack output's text and documents of the last one."""
    out = os.path.join(tmp, "snapshot.json")
    while True:
        r = run_tfnative(["stack", *args, "--json", out], timeout=300)
        assert r.returncode == 0, r.stderr
        with open(out) as f:
            text = f.read()
        docs = parse(text)
        seen = set().union(*(user_lines(d) for d in docs))
        if set(wanted) <= seen and settled(docs) or time.monotonic() > deadline:
            assert set(wanted) <= seen, "never on a stack: %s" % sorted(set(wanted) - seen)
            assert settled(docs), "the program never reached its hang"
            return text, docs
        time.sleep(0.5)


def all_wait(docs):
    """Every process of a forking program waits (an edge from its main thread): a child caught while it still
    starts its op is not hung yet."""
    return all(any(w.get("thread") == d["pid"] for w in (d.get("triage") or {}).get("waits") or []) for d in docs)


def gil_waited(docs):
    """gil_mutex's C thread sleeps 0.5 s holding its mutex before it asks for the GIL: until then there is
    no cycle yet."""
    return any(t.get("gil") == "waiting" for d in docs for t in d["events"][0]["threads"])


@pytest.fixture(scope="module")
def hangs(tmp_path_factory):
    """name -> Capture, taken the first time a test asks (one program at a time; each killed at once)."""
    done = {}
    started = []

    def get(name):
        if name in done:
            return done[name]
        _tf, several, who = PROGRAMS[name]
        tmp = str(tmp_path_factory.mktemp(name))
        ready = os.path.join(tmp, "ready")
        argv = [sys.executable, path_of(name), ready]
        if name == "gil_mutex":  # the C library, built here
            argv.append(os.path.join(tmp, "gil_mutex.so"))
            subprocess.run(["g++", "-shared", "-fPIC", "-O0", "-g", "-o", argv[-1],
                            os.path.join(HANGS, "gil_mutex.cpp"), "-lpthread"], check=True)
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        started.append(proc)
        procs = tree(proc.pid)
        try:
            while not (os.path.exists(ready) and os.path.getsize(ready)):
                assert proc.poll() is None, "%s exited with %s before it was ready" % (name, proc.returncode)
                assert time.monotonic() - t0 < 180, "%s never got ready" % name
                time.sleep(0.05)
            ready_s = time.monotonic() - t0
            target = ["--pid", str(proc.pid)] + (["--children", str(proc.pid)] if several else [])
            # the control: samples mark its thread moving
            args = target + (["--samples", "3", "--interval", "0.5"] if name.endswith("_control") else [])
            text, docs = snapshot_until(args, [marker(name, w) for w in who], time.monotonic() + 90, tmp,
                                        gil_waited if name == "gil_mutex" else all_wait if several
                                        else lambda docs: True)
            print("%s: ready after %.1f s, its marked lines on the stacks after %.1f s"
                  % (name, ready_s, time.monotonic() - t0))
            procs = tree(proc.pid)
            assert proc.poll() is None, "%s is not hung: it exited" % name
            save(name, text, target)
        finally:
            kill_all(procs + tree(proc.pid))
            proc.wait()
        done[name] = Capture(name, docs, text, ready_s, proc.pid)
        return done[name]

    try:
        yield get
    finally:
        for proc in started:
            if proc.poll() is None:
                kill_all(tree(proc.pid))
                proc.wait()
        assert all(p.poll() is not None for p in started)


# ---- the graph, as a user reads it ----

def edges(doc):
    waits = doc["triage"].get("waits")
    assert isinstance(waits, list), "no triage['waits'] in %r" % doc["triage"]
    for e in waits:
        assert {"thread", "waits_for", "resource", "evidence"} <= set(e), e
        assert isinstance(e["resource"], str) and isinstance(e["evidence"], str), e
    return waits


def edge_from(doc, tid):
    found = [e for e in edges(doc) if e["thread"] == tid]
    assert found, "no wait edge from thread %d: %r" % (tid, edges(doc))
    return found[0]


def chain(doc, tid):
    """The edges from thread ``tid`` on, following ``waits_for`` until it ends or comes back."""
    out, seen = [], set()
    while tid is not None and tid not in seen:
        seen.add(tid)
        e = edge_from(doc, tid)
        out.append(e)
        tid = e["waits_for"]
    return out


def tid_named(doc, python_name):
    (tid,) = [t["tid"] for t in doc["events"][0]["threads"] if t.get("python_name") == python_name]
    return tid


def tids_in(doc, function):
    """Threads with a Python frame of ``function``."""
    return [t["tid"] for t in doc["events"][0]["threads"]
            if any(f.get("kind") == "python" and f.get("function") == function for f in t["frames"])]


def assert_names(verdict, *parts):
    assert "\n" not in verdict, "the verdict is not one line: %r" % verdict
    for part in parts:
        assert part in verdict, "%r not in the verdict %r" % (part, verdict)


# ---- one check per program: the pattern, the blocking thread and line, the resource, the edge ----

SINGLE = [
    # name, pattern, resource named in the verdict and at the end of the main thread's chain, other lines
    ("data_map_event", "waiting_on_tf_data", "Event", ["callback"]),
    ("data_generator_queue", "waiting_on_tf_data", "queue.Queue", ["generator"]),
    ("fifo_eager", "queue_without_producer", "FIFOQueue", []),
    ("fifo_function", "queue_without_producer", "FIFOQueue", []),
    ("tf1_queue_runner", "queue_without_producer", "FIFOQueue", []),
    ("tf1_session_in_py_func", "pool_exhausted", None, ["callback"]),
    ("function_pyfunc_pool", "pool_exhausted", None, ["callback"]),
    ("mwms_missing_peer", "waiting_on_peer", "worker 1", []),
]


def check_single(name, docs, pid):
    """The verdict of a program whose main thread waits (a row of ``SINGLE``)."""
    (_name, pattern, resource, others), = [s for s in SINGLE if s[0] == name]
    (doc,) = docs
    t = doc["triage"]
    assert t["pattern"] == pattern, t["verdict"]
    assert_names(t["verdict"], "the main thread", marker(name, "main"), *[marker(name, w) for w in others])
    path = chain(doc, pid)
    assert path[0]["thread"] == pid
    if resource:
        assert_names(t["verdict"], resource)
        assert resource in path[-1]["resource"], path
    if name in ("data_map_event", "data_generator_queue"):
        # the main thread's chain reaches the tf.data thread that runs the user's callback, and ends there
        (sink,) = tids_in(doc, "wait_for_event" if name == "data_map_event" else "records")
        assert path[-1]["thread"] == sink and path[-1]["waits_for"] is None, path
    if pattern == "pool_exhausted":
        callbacks = set(tids_in(doc, "transform" if name == "tf1_session_in_py_func" else "callback"))
        assert callbacks & {e["thread"] for e in path}, path
    assert t["pattern"] != "deadlock"


def check_rlock_order(docs, pid):
    (doc,) = docs
    t = doc["triage"]
    loader, saver = tid_named(doc, "loader"), tid_named(doc, "saver")
    assert t["pattern"] == "deadlock", t["verdict"]
    a, b = edge_from(doc, loader), edge_from(doc, saver)
    assert (a["waits_for"], b["waits_for"]) == (saver, loader)
    assert "lock_b" in a["resource"] and "lock_a" in b["resource"]
    assert_names(t["verdict"], "thread %d" % loader, "thread %d" % saver, "lock_a", "lock_b",
                 marker("rlock_order", "loader"), marker("rlock_order", "saver"))
    # the main thread waits in join() for a thread of the cycle
    assert edge_from(doc, pid)["waits_for"] in (loader, saver)


def check_gil_mutex(docs, pid):
    (doc,) = docs
    t = doc["triage"]
    worker = tid_named(doc, "ext-worker")
    assert t["pattern"] == "deadlock", t["verdict"]
    main, ext = edge_from(doc, pid), edge_from(doc, worker)
    assert main["waits_for"] == worker and "mutex" in main["resource"], main
    assert ext["waits_for"] == pid and ext["resource"] == "the GIL", ext
    assert_names(t["verdict"], "the main thread", "thread %d" % worker, marker("gil_mutex", "main"), "the GIL",
                 "mutex")


def check_fork(name, docs, pid):
    """A program that forked after TensorFlow started its pools: the parent's document and its children's."""
    (parent,) = [d for d in docs if d["pid"] == pid]
    children = [d for d in docs if d["pid"] != pid]
    assert children, "no document for the forked children"
    for child in children:
        t = child["triage"]
        assert t["pattern"] == "fork_without_pools", t["verdict"]
        assert_names(t["verdict"], "the main thread", marker(name, "worker" if name == "pool_map_fork" else "child"))
        edge_from(child, child["pid"])
    t = parent["triage"]
    assert t["pattern"] == "fork_without_pools", t["verdict"]
    assert_names(t["verdict"], "the main thread", marker(name, "main"))
    main = edge_from(parent, pid)
    if name != "pool_map_fork":
        assert str(children[0]["pid"]) in main["resource"] or str(children[0]["pid"]) in t["verdict"], main


def check_control(docs, pid):
    """A slow process is not hung: no deadlock; the busy matmul (the frames of fork_matmul's child, but with its
    pool threads there and working) is no fork without pools either."""
    (doc,) = docs
    t = doc["triage"]
    assert t["pattern"] not in ("deadlock", "fork_without_pools"), t["verdict"]
    assert "deadlock" not in t["verdict"]


# name -> check(docs, pid): the verdict each program of PROGRAMS must give, ``docs`` the documents of its
# processes (``stack --json``'s, or a watch's hang report), ``pid`` the program's own (its main thread's) pid
EXPECTED = {
    **{s[0]: functools.partial(check_single, s[0]) for s in SINGLE},
    "rlock_order": check_rlock_order,
    "gil_mutex": check_gil_mutex,
    **{n: functools.partial(check_fork, n) for n in ("fork_matmul", "pool_map_fork", "process_after_predict")},
    "busy_control": check_control,
    "busy_matmul_control": check_control,
}
assert set(EXPECTED) == set(PROGRAMS)


@pytest.mark.parametrize("name,pattern,resource,others",
                         [pytest.param(*s, id=s[0], marks=TF if PROGRAMS[s[0]][0] else []) for s in SINGLE])
def test_the_main_thread_waits(hangs, name, pattern, resource, others):
    cap = hangs(name)
    check_single(name, cap.docs, cap.pid)


def test_rlock_order_deadlock_is_a_cycle(hangs):
    cap = hangs("rlock_order")
    check_rlock_order(cap.docs, cap.pid)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@requires_gdb  # the library has debug info: stack reads it through gdb
def test_gil_mutex_deadlock_is_a_cycle(hangs):
    cap = hangs("gil_mutex")
    check_gil_mutex(cap.docs, cap.pid)


@pytest.mark.parametrize("name", [pytest.param(n, marks=TF) for n in ("fork_matmul", "pool_map_fork",
                                                                              "process_after_predict")])
def test_fork_after_tensorflow_started_its_pools(hangs, name):
    cap = hangs(name)
    check_fork(name, cap.docs, cap.pid)


@pytest.mark.tf
@pytest.mark.skipif(not has_tensorflow(), reason="tensorflow is not installed in this Python")
def test_three_workers_one_stalls_before_the_step(tmp_path):
    """The 3-worker MultiWorkerMirroredStrategy job of test_multiworker: workers 0 and 1 wait for worker 2."""
    ready = tmp_path / "mwms"
    ready.mkdir()
    launcher = subprocess.Popen([sys.executable, MWMS_LAUNCHER, str(ready)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [psutil.Process(launcher.pid)]
    try:
        deadline = time.monotonic() + 600
        while not all((ready / ("worker-%d" % i)).exists() for i in range(3)):
            assert launcher.poll() is None and time.monotonic() < deadline, "the workers never got ready"
            time.sleep(0.5)
        workers = [int((ready / ("worker-%d" % i)).read_text().split()[0]) for i in range(3)]
        procs = tree(launcher.pid)
        step = "mwms_worker.py:%d" % line_of(MWMS_WORKER, 'print("step", train_step')
        text, docs = snapshot_until(["--children", str(launcher.pid)], [step, "mwms_worker.py:%d" % line_of(
            MWMS_WORKER, "time.sleep(0.05)  # the stalled worker waits here")], deadline, str(tmp_path))
        save("mwms_stalled_worker", text, ["--children", str(launcher.pid)])
    finally:
        kill_all(procs + tree(launcher.pid))
        launcher.wait()
    by_pid = {d["pid"]: d for d in docs}
    for w in workers[:2]:
        t = by_pid[w]["triage"]
        assert t["pattern"] == "waiting_on_peer", t["verdict"]
        assert_names(t["verdict"], "the main thread", step, "worker 2")
        assert "worker 2" in chain(by_pid[w], w)[-1]["resource"]
    assert by_pid[workers[2]]["triage"]["pattern"] != "deadlock"


@pytest.mark.parametrize("name", ["busy_control", pytest.param("busy_matmul_control", marks=TF)])
def test_a_busy_process_is_not_a_deadlock(hangs, name):
    cap = hangs(name)
    check_control(cap.docs, cap.pid)
