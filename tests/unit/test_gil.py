from tfnative.core.model import Thread, frames_from_json
from tfnative.core.python.gil import gil_state_from_native
from tfnative.core.threads import Threads, select_threads


def nat(*names):
    return frames_from_json([{"kind": "native", "function": n} for n in names])


def test_waiting_in_take_gil_below_condition_wait():
    frames = nat("__futex_abstimed_wait_common", "pthread_cond_timedwait@@GLIBC_2.3.2", "take_gil",
                 "PyEval_RestoreThread", "time_sleep", "_PyEval_EvalFrameDefault")
    assert gil_state_from_native(frames) == "waiting"


def test_stripped_interpreter_exported_caller_names_the_wait():
    frames = nat("__futex_abstimed_wait_common", "pthread_cond_timedwait", "??", "PyEval_RestoreThread")
    assert gil_state_from_native(frames) == "waiting"


def test_running_thread_and_deep_caller_are_not_waiting():
    assert gil_state_from_native(nat("sleep", "ffi_call", "_PyEval_EvalFrameDefault")) is None
    deep = nat(*(["f%d" % i for i in range(20)] + ["take_gil"]))
    assert gil_state_from_native(deep) is None
    assert gil_state_from_native(frames_from_json([{"kind": "python", "function": "take_gil"}])) is None
    assert gil_state_from_native([]) is None


def test_holder_always_selected():
    entries = [Thread.from_json(t) for t in (
        {"tid": 1, "gil": None, "frames": [{"kind": "python", "function": "main"}]},
        {"tid": 2, "gil": "held", "frames": [{"kind": "native", "function": "sleep"}]},
        {"tid": 3, "gil": None, "frames": [{"kind": "native", "function": "sleep"}]},
        {"tid": 4, "gil": None, "merge": "mismatch", "python_frames": [{"kind": "python", "function": "run"}]})]
    assert [t.tid for t in select_threads(entries, Threads.PYTHON)] == [1, 2, 4]
    assert [t.tid for t in select_threads(entries, Threads.ALL)] == [1, 4, 2, 3]


def test_stripped_eval_breaker_wait_is_a_cond_wait_from_the_interpreter():
    frames = frames_from_json([{"kind": "native", "function": "__futex_abstimed_wait_common", "library": "libc.so.6"},
                               {"kind": "native", "function": "pthread_cond_timedwait", "library": "libc.so.6"},
                               {"kind": "native", "function": "??", "library": "/usr/bin/python3.11"},
                               {"kind": "python", "function": "wait"}])
    assert gil_state_from_native(frames) == "waiting"
    frames[2].library = "libtensorflow_framework.so.2"
    assert gil_state_from_native(frames) is None


def test_in_collection_by_flag_or_by_the_collectors_frames():
    from tfnative.core.python.gil import in_collection

    plain = frames_from_json([{"kind": "native", "function": "sleep", "library": "libc.so.6"}])
    assert in_collection(plain, holds_gil=True, collecting=True)
    assert not in_collection(plain, holds_gil=False, collecting=True)  # the collector runs on the holder
    assert not in_collection(plain, holds_gil=True, collecting=False)
    gc = plain + frames_from_json([{"kind": "native", "function": "gc_collect_main",
                                    "library": "libpython3.12.so.1.0"}])
    assert in_collection(gc, holds_gil=False, collecting=False)
    # not the interpreter's
    other = plain + frames_from_json([{"kind": "native", "function": "collect", "library": "libfoo.so"}])
    assert not in_collection(other, holds_gil=False, collecting=False)


WORKER_LOOP = "Eigen::ThreadPoolTempl<tsl::thread::EigenEnvironment>::WorkerLoop(int)"


def pool_thread(tid, *names, name="tf_Compute"):
    return Thread.from_json({"tid": tid, "name": name, "gil": None,
                             "frames": [{"kind": "native", "function": n} for n in names + (WORKER_LOOP,)]})


def test_pool_summary_and_busy_workers_selected():
    from tfnative.core.tensorflow.executors import pool_summary

    idle = pool_thread(1, "Eigen::EventCount::CommitWait(Eigen::EventCount::Waiter*)")
    busy = pool_thread(2, "tensorflow::PyFuncOp::Compute(tensorflow::OpKernelContext*)")
    child = Thread.from_json({"tid": 3, "name": "tf_Compute", "gil": None,  # started by a worker: no worker
                              "frames": [{"kind": "native",
                                          "function": "tensorflow::Foo::Compute(tensorflow::OpKernelContext*)"}]})
    other = pool_thread(4, "tensorflow::Foo::Compute(tensorflow::OpKernelContext*)", name="tf_graph_runner")
    entries = [idle, busy, child, other]
    assert pool_summary(entries).to_json() == {"name": "tf_Compute", "threads": 2, "busy": [2], "idle": [1]}
    assert [t.tid for t in select_threads(entries, Threads.PYTHON)] == [2]
