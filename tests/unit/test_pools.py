"""TensorFlow's pools on real captures: workers recognised by what they run, the pool each belongs to, the
thread-name registry read from recorded memory, and the verdicts on named (2.21) and unnamed (2.18) pools.

The captures (``tests/unit/data/pool_tf218.json``, ``pool_tf221.json``; how they were made: README there)
are ``tfnative stack --all-threads --json`` of ``tests/scripts/tf_hang.py`` (a ``tf.function`` blocked in a
``tf.py_function`` callback) on tensorflow-cpu 2.18.1 and 2.21.0: 2.21 names its inter-op workers
``tf_Compute``, 2.18 names no thread (all show ``python``).
"""

import copy
import importlib.util
import json
import os
import struct

import pytest

from tfnative.analysis import verdict
from tfnative.core.model import Event, Thread
from tfnative.core.tensorflow import executors
from tfnative.core.tensorflow.executors import INTER_OP, INTRA_OP, OTHER, pool_of, pool_summary
from tfnative.core.tensorflow.threadnames import read_registry, registered_names, registry_symbols, thread_names

DATA = os.path.join(os.path.dirname(__file__), "data")


def doc_named(name):
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)


def doc(version):
    return doc_named("pool_tf%s.json" % version)


def threads_of(d):
    return {t["tid"]: Thread.from_json(t) for t in d["threads"]}


class Recorded:
    """The target memory that ``read_registry`` read from the 2.18 process, replayed (``edit``: bytes
    changed at an address, to break the layout)."""

    def __init__(self, reads, edit=None):
        self.reads = {int(a, 16): bytes.fromhex(b) for a, b in reads.items()}
        for addr, data in (edit or {}).items():
            self.reads[addr] = data

    def read(self, addr, size):
        data = self.reads.get(addr)
        if data is None or len(data) < size:
            raise MemoryError("0x%x not recorded" % addr)
        return data[:size]


def tf218_names(d, edit=None):
    reg = d["registry"]
    memory = Recorded(reg["reads"], edit)
    pthreads = {int(tid): int(p, 16) for tid, p in d["pthreads"].items()}
    return registered_names(memory.read, [int(reg["pointer"], 16)], pthreads)


def test_tf221_named_pool():
    d = doc("221")
    ts = threads_of(d)
    assert pool_summary(list(ts.values())).to_json() == {"name": "tf_Compute", "threads": 2, "busy": [6924],
                                                         "idle": [6923]}
    assert [pool_of(ts[t]) for t in (6923, 6924, 6925)] == [INTER_OP, INTER_OP, OTHER]  # tf_graph_runner
    assert pool_of(ts[6921]) is None and executors.worker_loop(ts[6921]) == "eigen"  # unnamed, idle
    assert executors.worker_loop(ts[6832]) is None  # OpenBLAS's thread: no pool of TensorFlow's
    assert executors.worker_loop(ts[6824]) is None  # the main thread


def test_tf218_frames_alone_find_the_busy_worker():
    d = doc("218")
    ts = threads_of(d)
    assert {t.name for t in ts.values()} == {"python"}  # 2.18 names no thread
    assert pool_of(ts[5740]) == INTER_OP  # it runs the executor and PyFuncOp
    assert executors.is_pool_worker(ts[5740]) and executors.runs_kernel(ts[5740])
    idle = [5737, 5738, 5739, 5741]
    assert [pool_of(ts[t]) for t in idle] == [None] * 4  # idle, in WaitForWork: no frame says whose
    s = pool_summary(list(ts.values()))
    assert (s.name, s.busy, sorted(s.idle), s.threads, s.exact) == (None, (5740,), idle, 5, False)
    assert not executors.is_pool_worker(ts[5590]) and executors.worker_loop(ts[5590]) is None  # OpenBLAS


def test_tf218_registry_places_every_worker():
    d = doc("218")
    names = tf218_names(d)
    assert names == {5741: "tf_graph_runner", 5740: "tf_Compute", 5739: "tf_Compute",
                     5738: "tf_numa_-1_Eigen", 5737: "tf_numa_-1_Eigen"}
    ts = threads_of(d)
    assert [pool_of(ts[t], names.get(t)) for t in (5737, 5738, 5739, 5740, 5741)] == [
        INTRA_OP, INTRA_OP, INTER_OP, INTER_OP, OTHER]
    assert pool_summary(list(ts.values()), names).to_json() == {
        "name": None, "threads": 2, "busy": [5740], "idle": [5739], "exact": True,
        "pools": {"inter-op": [5740, 5739], "intra-op": [5737, 5738], "other": [5741]}}
    assert d["pool"]["threads"] == 2 and d["pool"]["exact"]  # what the live capture said


def _framework():
    """This venv's ``libtensorflow_framework`` (found without importing TensorFlow), None where absent."""
    spec = importlib.util.find_spec("tensorflow")
    for d in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(d, "libtensorflow_framework.so.2")
        if os.path.exists(path):
            return path
    return None


class RecordedTarget:
    """The 2.18 process's recorded memory as ``thread_names`` reads a process (``threadnames.Target``): its
    mapped files, their biases, the symbol addresses a debugger gives (both as given)."""

    def __init__(self, d, files, biases, symbols):
        self.read = Recorded(d["registry"]["reads"]).read
        self._files, self.biases, self.symbols = files, biases, symbols

    def files(self):
        return self._files

    def bias(self, path):
        return self.biases.get(path)

    def symbol_address(self, name):
        return self.symbols.get(name)


def test_thread_names_finds_the_registry_by_symbol_or_by_bias():
    """The one reader that the pipeline (file address + bias) and gdb's capture (gdb's symbol address, else
    the bias) call: a real libtensorflow_framework's registry symbol, placed where the 2.18 process had it."""
    framework = _framework()
    if framework is None:
        pytest.skip("no libtensorflow_framework in this venv")
    d = doc("218")
    pthreads = {int(tid): int(p, 16) for tid, p in d["pthreads"].items()}
    pointer = int(d["registry"]["pointer"], 16)
    ((name, vaddr),) = registry_symbols(framework).items()
    expected = tf218_names(d)
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    by_bias = RecordedTarget(d, [libc, framework], {framework: pointer - vaddr, libc: 0}, {})
    assert thread_names(by_bias, pthreads) == expected  # the pipeline's way
    by_symbol = RecordedTarget(d, [framework], {}, {name: pointer})
    assert thread_names(by_symbol, pthreads) == expected  # gdb's way, without a bias
    wrong_bias = RecordedTarget(d, [framework], {framework: 0}, {name: pointer})
    assert thread_names(wrong_bias, pthreads) == expected  # the debugger's address comes first
    assert thread_names(RecordedTarget(d, [framework], {}, {}), pthreads) == {}  # neither: nothing to read
    assert thread_names(RecordedTarget(d, [libc], {libc: pointer - vaddr}, {name: pointer}), pthreads) == {}
    gone = os.path.join(os.path.dirname(framework), "gone", "libtensorflow_framework.so.2")
    assert thread_names(RecordedTarget(d, [gone], {gone: pointer - vaddr}, {}), pthreads) == {}  # unreadable
    calls = []
    assert thread_names(by_bias, pthreads, lambda path: calls.append(path) or {name: vaddr}) == expected
    assert calls == [framework]  # only TensorFlow's framework library is searched


def test_registry_of_another_shape_gives_no_names():
    d = doc("218")
    pointer = int(d["registry"]["pointer"], 16)
    tree = struct.unpack("<Q", bytes.fromhex(d["registry"]["reads"]["0x%x" % pointer]))[0]
    header = tree + 8
    raw = bytearray(bytes.fromhex(d["registry"]["reads"]["0x%x" % header]))
    memory = Recorded(d["registry"]["reads"])
    assert len(read_registry(memory.read, pointer)) == 5
    for field, value in ((32, 1 << 20), (32, 4), (16, 0)):  # too many; fewer than the tree holds; no leftmost
        bad = bytearray(raw)
        bad[field:field + 8] = struct.pack("<Q", value)
        assert tf218_names(d, {header: bytes(bad)}) == {}
    root = struct.unpack_from("<Q", raw, 8)[0]
    node = bytearray(bytes.fromhex(d["registry"]["reads"]["0x%x" % (root + 8)]))
    node[0:8] = struct.pack("<Q", 0x1000)  # the root's parent is not the header
    assert tf218_names(d, {root + 8: bytes(node)}) == {}
    assert read_registry(Recorded({}).read, pointer) == {}  # unreadable
    assert tf218_names(d, {pointer: struct.pack("<Q", 0)}) == {}  # never set: no thread started yet


def test_a_thread_that_a_worker_started_is_no_worker():
    ts = threads_of(doc("221"))
    frames = [f for f in ts[6924].frames]
    loop = next(i for i, f in enumerate(frames) if "WorkerLoop" in (f.function or ""))
    child = copy.deepcopy(ts[6924])
    child.tid, child.frames = 7000, frames[:loop]  # its name inherited, a kernel on its stack, no loop
    assert child.name == "tf_Compute" and executors.runs_kernel(child)
    assert pool_of(child) is None and not executors.is_any_pool_worker(child)
    assert pool_summary(list(ts.values()) + [child]).threads == 2


def test_pool_by_frames_inside_the_loop():
    loop = {"kind": "native", "function": "Eigen::ThreadPoolTempl<tsl::thread::EigenEnvironment>::WorkerLoop(int)"}

    def worker(*inner, name="python"):
        return Thread.from_json({"tid": 1, "name": name,
                                 "frames": [{"kind": "native", "function": f} for f in inner] + [loop]})

    intra = worker("Eigen::internal::EvalRange<Eigen::TensorEvaluator<...>, long, true>::run(...)",
                   "Eigen::ThreadPoolDevice::parallelFor(long, ...)::{lambda(long, long)#1}::operator()(long, long)")
    assert pool_of(intra) == INTRA_OP and not executors.is_pool_worker(intra)
    data = worker("tensorflow::data::(anonymous namespace)::ParallelMapIterator::RunnerThread(...)")
    assert pool_of(data) == executors.TF_DATA
    unbounded = Thread.from_json({"tid": 2, "name": "python", "frames": [
        {"kind": "native", "function": "tsl::UnboundedWorkQueue::PooledThreadFunc()"}]})
    assert executors.worker_loop(unbounded) == "unbounded" and pool_of(unbounded) == executors.TF_DATA
    assert pool_of(worker(name="tf_data_private_threadpool")) == executors.TF_DATA
    assert pool_of(worker(name="tf_Compute")) == INTER_OP


def event_with_pool(d, threads, names=None):
    e = {k: v for k, v in d.items() if k in ("kind", "pid")}
    e["threads"] = threads
    e["pool"] = pool_summary([Thread.from_json(t) for t in threads], names).to_json()
    return Event.from_json(e)


def test_verdict_tf218_matches_tf221():
    d18, d21 = doc("218"), doc("221")
    v18 = verdict.triage(event_with_pool(d18, d18["threads"], tf218_names(d18)))
    v21 = verdict.triage(event_with_pool(d21, d21["threads"]))
    assert v21.verdict == (
        "the main thread waits for tf.function step at tf_hang.py:28; the work is on tf_Compute thread 6924 in "
        "the tf.py_function callback slow_callback at tf_hang.py:17, blocked in time.sleep()")
    assert v18.verdict == (
        "the main thread waits for tf.function step at tf_hang.py:28; the work is on the inter-op pool's thread "
        "5740 in the tf.py_function callback slow_callback at tf_hang.py:17, blocked in time.sleep()")
    assert v18.pattern == v21.pattern == "waiting_on_executor"
    assert d18["triage"]["verdict"] == v18.verdict  # what tfnative said on the live 2.18 process
    # without the registry, the frames alone give the same verdict
    assert verdict.triage(event_with_pool(d18, d18["threads"])).verdict == v18.verdict


def test_exhausted_unnamed_pool_only_when_every_worker_is_placed():
    """Both inter-op workers of the 2.18 capture in the callback (the idle one given the busy one's stack)."""
    d = doc("218")
    threads = copy.deepcopy(d["threads"])
    busy = next(t for t in threads if t["tid"] == 5740)
    idle = next(t for t in threads if t["tid"] == 5739)
    idle["frames"], idle["tf_function"], idle["kernel"] = busy["frames"], busy.get("tf_function"), busy.get("kernel")
    t = verdict.triage(event_with_pool(d, threads, tf218_names(d)))
    assert t.pattern == "pool_exhausted"
    assert t.verdict.startswith(
        "TensorFlow's inter-op pool is exhausted: all 2 threads of the inter-op pool are inside tf.py_function "
        "callbacks or wait for the GIL (threads 5740, 5739 in the tf.py_function callback slow_callback at "
        "tf_hang.py:17, blocked in time.sleep()); the main thread waits for tf.function step at tf_hang.py:28")
    # frames alone cannot tell the idle Eigen workers' pool: no claim that the pool is exhausted
    t = verdict.triage(event_with_pool(d, threads))
    assert t.pattern == "waiting_on_executor"
    assert "the work is on the inter-op pool's threads 5740, 5739 in the tf.py_function callback" in t.verdict


def test_function_without_thread_on_unnamed_pool():
    """The 2.18 capture with its busy worker idle: the function's ops wait for something outside."""
    d = doc("218")
    threads = copy.deepcopy(d["threads"])
    busy = next(t for t in threads if t["tid"] == 5740)
    idle = next(t for t in threads if t["tid"] == 5739)
    busy["frames"], busy["kernel"] = idle["frames"], idle.get("kernel")
    busy.pop("tf_function", None)
    t = verdict.triage(event_with_pool(d, threads, tf218_names(d)))
    assert t.verdict == ("the main thread waits for tf.function step at tf_hang.py:28, and no thread runs its "
                            "ops (all 2 threads of the inter-op pool wait for work): its ops wait for an event "
                            "from outside this process's threads")
    t = verdict.triage(event_with_pool(d, threads))
    assert "(all 5 worker threads of TensorFlow's pools wait for work)" in t.verdict


def test_tf_data_threads_by_their_frames():
    """``tests/scripts/tf_data_hang.py``: a parallel map whose ``tf.py_function`` blocks, iterated eagerly.
    tf.data's threads are named like every other (``python``) on 2.18 and 2.21 alike: their frames place them
    (the private pool's Eigen workers under tf.data's runner, the iterator threads of its
    ``UnboundedThreadPool``); the inter-op and intra-op pools' workers stay out."""
    for version in ("218", "221"):
        d = doc_named("tfdata_tf%s.json" % version)
        ts = threads_of(d)
        data = sorted(tid for tid, t in ts.items() if pool_of(t) == executors.TF_DATA)
        callbacks = sorted(tid for tid, t in ts.items() if any(f.function == "slow_map" for f in t.frames))
        assert len(callbacks) == 2 and set(callbacks) <= set(data), version
        loops = {executors.worker_loop(ts[tid]) for tid in data}
        assert loops == {"eigen", "unbounded"}, version  # the private pool's workers, the iterator threads
        assert not any(executors.is_pool_worker(ts[tid]) for tid in data)  # none is the inter-op pool's
        t = verdict.triage(Event.from_json(d))
        assert t.pattern == "waiting_on_tf_data", t.verdict
        assert t.verdict == (
            "the main thread waits for the next element of a tf.data iterator at tf_data_hang.py:24; the work is "
            "on tf.data threads %s in the tf.py_function callback slow_map at tf_data_hang.py:17, blocked in "
            "time.sleep()" % ", ".join(map(str, callbacks)))
        assert d["triage"]["verdict"] == t.verdict  # as tfnative said on the live process


def test_tf_data_verdict_needs_a_busy_tf_data_thread():
    d = doc_named("tfdata_tf221.json")
    busy = [t for t in d["threads"] if any(f.get("function") == "slow_map" for f in t["frames"])]
    rest = [t for t in d["threads"] if t not in busy]
    assert verdict.triage(Event.from_json(dict(d, threads=rest))).pattern is None


def test_thread_titles_say_the_pool_where_names_do_not():
    from tfnative.output.report import pool_phrase

    d = doc("218")
    pool = pool_summary([Thread.from_json(t) for t in d["threads"]], tf218_names(d))
    assert [pool_phrase(tid, pool) for tid in (5740, 5739, 5737, 5741, 5547, 5590)] == [
        " (inter-op pool)", " (inter-op pool)", " (intra-op pool)", " (a TensorFlow pool)", "", ""]
    # frames alone: the idle workers' pool unknown, nothing said of them
    pool = pool_summary([Thread.from_json(t) for t in d["threads"]])
    assert [pool_phrase(tid, pool) for tid in (5740, 5739)] == [" (inter-op pool)", ""]
    # 2.21 names its pool's threads: the name says it
    d = doc("221")
    pool = pool_summary([Thread.from_json(t) for t in d["threads"]])
    assert pool_phrase(6924, pool) == ""


def test_worker_loop_inlined_into_the_start_routine():
    """A build that inlines WorkerLoop leaves the start routine (``EigenEnvironment::CreateThread``'s lambda)."""
    d = doc("218")
    ts = threads_of(d)
    for tid in (5740, 5739):
        t = copy.deepcopy(ts[tid])
        t.frames = [f for f in t.frames if "WorkerLoop" not in (f.function or "")]
        assert executors.worker_loop(t) == "eigen"
        assert pool_of(t) == pool_of(ts[tid])
    assert pool_of(ts[5740]) == INTER_OP
