"""verdict.py on hand-made snapshot events: each pattern, what it names, and no guess where none fits.

Frames are shaped as ``analysis.event.make_event`` gives them (glue hidden, ``user`` set), after the real stacks of
``tests/scripts/tf_stuck.py`` and ``gil_holder.py``.
"""

from tfnative.analysis import threadwords, verdict
from tfnative.core.model import Event, Thread

PID = 100
APP = "/home/me/app.py"
WORKER_LOOP = "Eigen::ThreadPoolTempl<tsl::thread::EigenEnvironment>::WorkerLoop(int)"
PYFUNC = [{"kind": "native", "function": "tensorflow::PyFuncOp::Compute(tensorflow::OpKernelContext*)",
           "library": "lib_pywrap_tensorflow_common.so", "op": {"type": "EagerPyFunc", "name": "EagerPyFunc"}},
          {"kind": "native", "function": "tensorflow::(anonymous namespace)::ExecutorState<tensorflow::"
           "SimplePropagatorState>::Process(tensorflow::SimplePropagatorState::TaggedNode const&, long)",
           "library": "libtensorflow_framework.so.2"},
          {"kind": "native", "function": WORKER_LOOP, "library": "libtensorflow_framework.so.2"}]


def n(function, library="libc.so.6"):
    return {"kind": "native", "function": function, "library": library}


def py(function, line, file=APP):
    return {"kind": "python", "function": function, "file": file, "line": line, "user": file == APP}


CTYPES_SLEEP = [n("clock_nanosleep"), n("nanosleep"), n("sleep"), n("??", "libffi.so.8"), n("ffi_call", "libffi.so.8"),
                n("_ctypes_callproc", "_ctypes.cpython-311-x86_64-linux-gnu.so"),
                n("PyCFuncPtr_call", "_ctypes.cpython-311-x86_64-linux-gnu.so")]
EVENT_WAIT = [n("__futex_abstimed_wait_common"), n("__new_sem_wait_slow64.constprop.0"),
              n("PyThread_acquire_lock_timed", "libpython3.11.so.1.0"),
              n("lock_PyThread_acquire_lock", "libpython3.11.so.1.0"),
              py("Condition.wait", 327, "/usr/lib/python3.11/threading.py"),
              py("Event.wait", 629, "/usr/lib/python3.11/threading.py")]
TAKE_GIL = [n("__futex_abstimed_wait_common"), n("pthread_cond_timedwait"), n("take_gil", "libpython3.11.so.1.0")]
TFE_WAIT = [n("syscall"), n("TFE_Execute", "libtensorflow_cc.so.2"),
            dict(py("quick_execute", 53, "/site-packages/tensorflow/python/eager/execute.py"), user=False)]


def caller(tid, fn, line, function="main", name="python"):
    return {"tid": tid, "name": name, "frames": TFE_WAIT + [py(function, line)],
            "tf_function": {"name": "__inference_%s_8" % fn, "python_function": fn},
            "gil": None, "kernel": {"state": "S", "syscall": "futex"}}


def worker(tid, inner, gil=None, state="S"):
    return {"tid": tid, "name": "tf_Compute", "frames": inner + PYFUNC, "gil": gil,
            "tf_function": {"name": "__inference_step_8", "python_function": "step",
                            "how": "only tf.function in flight", "called_by": PID},
            "kernel": {"state": state}}


def spinner(tid):
    return {"tid": tid, "name": "python", "frames": TAKE_GIL + [py("spin", 34)], "gil": "waiting",
            "kernel": {"state": "S", "syscall": "futex"}}


def event(*threads, pool=None):
    return {"kind": "snapshot", "pid": PID, "threads": list(threads), "pool": pool}


def triage(event):
    """The verdict on an event given as its JSON, read into the model as ``analysis.event.make_event`` gives it."""
    return verdict.triage(Event.from_json(event)).to_json()


def blocked_in(frames):
    return threadwords.blocked_in(Thread.from_json({"tid": 1, "frames": frames}))


def test_native_code_holds_the_gil_while_others_wait():
    holder = worker(7, CTYPES_SLEEP + [py("hold_gil", 42)], gil="held")
    t = triage(event(caller(PID, "step", 91), holder, spinner(8), spinner(9),
                             pool={"threads": 2, "busy": [7], "idle": [6]}))
    assert t["pattern"] == "gil_held_blocked"
    assert t["verdict"] == ("thread 7 tf_Compute holds the GIL in hold_gil at app.py:42, blocked in sleep(); "
                            "2 threads wait for it (8, 9); the main thread waits for tf.function step at app.py:91")
    assert t["gil_holder"] == {"tid": 7, "name": "tf_Compute", "blocked_in": "sleep", "function": "hold_gil",
                               "file": APP, "line": 42}
    assert t["waiting_for_gil"] == [8, 9]
    assert t["stuck"] is None  # no samples taken
    # running (R) rather than blocked, and stuck across samples
    holder["kernel"] = {"state": "R"}
    holder.update(progress="stuck", stuck_s=2.0)
    t = triage(event(holder, spinner(8)))
    assert t["verdict"].startswith("thread 7 tf_Compute holds the GIL in hold_gil at app.py:42, running sleep() "
                                   "(stuck 2.0 s); 1 thread waits for it (8)")
    assert t["stuck"] == [7] and t["moving"] == []


def test_a_holder_running_python_or_without_waiters_is_no_gil_pattern():
    runner = {"tid": PID, "name": "python", "frames": [py("loop", 3)], "gil": "held", "kernel": {"state": "R"}}
    t = triage(event(runner, spinner(8)))
    assert t["pattern"] is None
    assert t["verdict"] == ("no known hang pattern fits: the main thread holds the GIL in loop at app.py:3, "
                            "running Python; 1 thread(s) wait for it")
    alone = {"tid": PID, "name": "python", "frames": CTYPES_SLEEP + [py("hold", 3)], "gil": "held"}
    assert triage(event(alone))["pattern"] is None


def test_inter_op_pool_exhausted():
    w1, w2 = worker(6, EVENT_WAIT + [py("wait_for_event", 48)]), worker(7, EVENT_WAIT + [py("wait_for_event", 48)])
    threads = [caller(PID, "set_step", 86), w1, w2, caller(11, "step", 72, "wait_step"),
               caller(12, "step", 72, "wait_step")]
    t = triage(event(*threads, pool={"name": "tf_Compute", "threads": 2, "busy": [6, 7], "idle": []}))
    assert t["pattern"] == "pool_exhausted"
    assert t["verdict"] == (
        "TensorFlow's inter-op pool is exhausted: all 2 tf_Compute threads are inside tf.py_function callbacks or "
        "wait for the GIL (threads 6, 7 in the tf.py_function callback wait_for_event at app.py:48, blocked in "
        "lock.acquire() under Condition.wait); the main thread waits for tf.function set_step at app.py:86; "
        "threads 11, 12 wait for tf.function step at app.py:72, and no pool thread is free to run their work")
    assert [w["tid"] for w in t["waiting_for_function"]] == [PID, 11, 12]
    # one idle worker: not exhausted (the chain pattern instead)
    t = triage(event(*threads, pool={"name": "tf_Compute", "threads": 3, "busy": [6, 7], "idle": [5]}))
    assert t["pattern"] == "waiting_on_executor"
    # a busy worker in a native kernel (no callback): not this pattern either
    kernel = dict(worker(7, [n("syscall")]), frames=[n("syscall")] + PYFUNC)
    t = triage(event(caller(PID, "step", 86), w1, kernel,
                             pool={"name": "tf_Compute", "threads": 2, "busy": [6, 7], "idle": []}))
    assert t["pattern"] == "waiting_on_executor"


def test_main_thread_waits_for_the_function_whose_work_is_on_an_executor_thread():
    w = worker(7, EVENT_WAIT + [py("wait_for_event", 48)])
    t = triage(event(caller(PID, "step", 89), w, pool={"name": "tf_Compute", "threads": 2, "busy": [7],
                                                                 "idle": [6]}))
    assert t["pattern"] == "waiting_on_executor"
    assert t["verdict"] == ("the main thread waits for tf.function step at app.py:89; the work is on tf_Compute "
                            "thread 7 in the tf.py_function callback wait_for_event at app.py:48, blocked in "
                            "lock.acquire() under Condition.wait")
    # a kernel with no Python: named by its op
    k = dict(worker(7, []), frames=[n("syscall"), n("tensorflow::MyOp::Compute(tensorflow::OpKernelContext*)",
                                                    "libmyop.so")] + PYFUNC[1:])
    k["frames"][1]["op"] = {"type": "MyOp", "name": "model/my_op"}
    t = triage(event(caller(PID, "step", 89), k, pool={"threads": 2, "busy": [7], "idle": [6]}))
    assert t["verdict"].endswith('the work is on tf_Compute thread 7 in kernel MyOp "model/my_op", blocked in '
                                 "syscall()")
    # another Python thread busy (R): the wait is not the whole story
    busy = {"tid": 20, "name": "python", "frames": [py("crunch", 5)], "gil": "held", "kernel": {"state": "R"}}
    t = triage(event(caller(PID, "step", 89), w, busy, pool={"threads": 2, "busy": [7], "idle": [6]}))
    assert t["pattern"] is None
    assert "the main thread waits for tf.function step at app.py:89" in t["verdict"]


def test_function_pending_with_no_thread_running_its_ops():
    pool = {"name": "tf_Compute", "threads": 2, "busy": [], "idle": [5, 6]}
    t = triage(dict(event(caller(PID, "train_step", 30), pool=pool),
                            cluster={"task": "worker:1", "tasks": ["worker:0", "worker:1"]}))
    assert t["pattern"] == "function_without_thread"
    assert t["verdict"] == ("the main thread waits for tf.function train_step at app.py:30, and no thread runs its "
                            "ops (all 2 tf_Compute threads wait for work): this process is task worker:1 of a 2-task "
                            "cluster (TF_CONFIG), so a collective op waits for its peers")
    t = triage(event(caller(PID, "train_step", 30), pool=pool))
    assert t["verdict"].endswith("its ops wait for an event from outside this process's threads")
    # without the pool's summary (a capture that did not count it) nothing is claimed
    assert triage(event(caller(PID, "train_step", 30)))["pattern"] is None


def test_nothing_fits():
    idle = {"tid": PID, "name": "python", "frames": EVENT_WAIT + [py("main", 4)], "gil": None,
            "kernel": {"state": "S"}, "progress": "stuck", "stuck_s": 1.0}
    t = triage(event(idle))
    # nothing fits: what was seen is said, the GIL and the waits the graph found (issue #25)
    wait = {"thread": PID, "waits_for": None, "resource": "threading.Event",
            "evidence": "Event.wait at app.py:4; no owner is recorded for it", "at": "app.py:4"}
    assert t == {"verdict": "no known hang pattern fits: no thread holds the GIL; stuck: 100; the main thread "
                            "waits at app.py:4 for threading.Event", "pattern": None,
                 "gil_holder": None, "waiting_for_gil": [], "waiting_for_function": [], "stuck": [PID],
                 "moving": [], "pool": None, "waits": [wait], "cycle": None, "chain": [wait]}
    assert triage(event())["verdict"] == "no known hang pattern fits: no thread holds the GIL"


def test_blocked_in():
    assert blocked_in(CTYPES_SLEEP + [py("f", 1)]) == "sleep"
    assert blocked_in(EVENT_WAIT) == "lock.acquire"
    assert blocked_in([py("f", 1)] + CTYPES_SLEEP) is None  # runs Python
    stripped = [n("__futex_abstimed_wait_common"), n("??", "python3.11"), py("f", 1)]
    assert blocked_in(stripped) == "a built-in function"
    assert blocked_in([n("??", "libfoo.so"), py("f", 1)]) == "?? in libfoo.so"
    assert blocked_in([n("__futex_abstimed_wait_common"), n("worker_main", "libfoo.so")]) \
        == "__futex_abstimed_wait_common"


def test_blocked_in_a_gcc_clone_of_a_builtin():
    """Debian's 3.14 (LTO) names time.sleep's C function ``time_sleep.lto_priv.0``."""
    frames = [n("clock_nanosleep"), n("time_sleep.lto_priv.0", "python3.14"), py("f", 1)]
    assert blocked_in(frames) == "time.sleep"
    assert blocked_in([n("g.constprop.0.isra.0", "libfoo.so"), py("f", 1)]) == "g"


def unnamed(t):
    """A worker as TensorFlow 2.16-2.20 leave it: the process's name."""
    return dict(t, name="python")


def test_unnamed_inter_op_pool():
    """TensorFlow 2.16-2.20 name no pool thread: the verdicts say "the inter-op pool" where 2.21 says
    tf_Compute, and claim an exhausted pool only where every worker's pool is known (``exact``)."""
    w1, w2 = unnamed(worker(6, EVENT_WAIT + [py("wait_for_event", 48)])), unnamed(worker(7, EVENT_WAIT + [
        py("wait_for_event", 48)]))
    threads = [caller(PID, "set_step", 86), w1, w2]
    pool = {"name": None, "threads": 2, "busy": [6, 7], "idle": [], "exact": True,
            "pools": {"inter-op": [6, 7], "intra-op": [3, 4]}}
    t = triage(event(*threads, pool=pool))
    assert t["pattern"] == "pool_exhausted"
    assert t["verdict"].startswith("TensorFlow's inter-op pool is exhausted: all 2 threads of the inter-op pool are "
                                   "inside tf.py_function callbacks or wait for the GIL (threads 6, 7 in the "
                                   "tf.py_function callback wait_for_event at app.py:48")
    # idle Eigen workers whose pool no frame and no registry shows: no claim of exhaustion
    unsure = dict(pool, threads=4, idle=[3, 4], exact=False, pools={"inter-op": [6, 7], "unknown": [3, 4]})
    t = triage(event(*threads, pool=unsure))
    assert t["pattern"] == "waiting_on_executor"
    assert t["verdict"] == (
        "the main thread waits for tf.function set_step at app.py:86; the work is on the inter-op pool's threads "
        "6, 7 in the tf.py_function callback wait_for_event at app.py:48, blocked in lock.acquire() under "
        "Condition.wait")
    # the GIL held by an unnamed worker
    holder = unnamed(worker(7, CTYPES_SLEEP + [py("hold_gil", 42)], gil="held"))
    t = triage(event(caller(PID, "step", 91), holder, spinner(8), pool=dict(pool, busy=[7], idle=[6])))
    assert t["verdict"].startswith("the inter-op pool's thread 7 holds the GIL in hold_gil at app.py:42, blocked "
                                   "in sleep(); 1 thread waits for it (8)")
    # nothing runs: how many threads wait, by what is known of them
    idle = dict(pool, busy=[], idle=[6, 7])
    t = triage(event(caller(PID, "train_step", 30), pool=idle))
    assert "(all 2 threads of the inter-op pool wait for work)" in t["verdict"]
    t = triage(event(caller(PID, "train_step", 30), pool=dict(unsure, busy=[], idle=[3, 4, 6, 7])))
    assert "(all 4 worker threads of TensorFlow's pools wait for work)" in t["verdict"]


SHUTDOWN = EVENT_WAIT[:4] + [py("_shutdown", 1623, "/usr/lib/python3.11/threading.py")]


def test_exit_waits_for_its_non_daemon_threads():
    main = {"tid": PID, "name": "python", "python_name": "MainThread", "frames": SHUTDOWN,
            "kernel": {"state": "S"}}
    uploader = {"tid": 101, "name": "python", "python_name": "uploader", "daemon": False,
                "frames": EVENT_WAIT + [py("upload", 18)], "kernel": {"state": "S"}}
    beat = {"tid": 102, "name": "python", "python_name": "heartbeat", "daemon": True,
            "frames": EVENT_WAIT + [py("beat", 22)], "kernel": {"state": "S"}}
    out = triage(event(main, uploader, beat))
    assert out["pattern"] == "exit_waits_for_threads"
    assert out["verdict"] == ('the program has ended: the main thread waits in threading._shutdown for 1 '
                              'non-daemon thread: thread 101 "uploader" in upload at app.py:18, blocked in '
                              'lock.acquire() under Condition.wait')


def test_shutting_down_interpreter_blocked_in_a_destructor():
    main = {"tid": PID, "name": "python", "frames": [n("clock_nanosleep"), n("time_sleep", "libpython3.12.so.1.0"),
                                                     py("Blocks.__del__", 27)], "kernel": {"state": "S"}}
    ev = dict(event(main), finalizing=True)
    out = triage(ev)
    assert out["pattern"] == "interpreter_finalizing"
    assert out["verdict"] == ("the interpreter is shutting down (Py_FinalizeEx has begun) and the main thread is "
                              "in Blocks.__del__ at app.py:27, blocked in time.sleep()")
    assert triage(event(main))["pattern"] is None  # the same stack in a running interpreter: no guess


def _eager_kernel(tid, inner, kernel_class="user"):
    """The main thread running an eager op whose kernel (``kernel_class``'s) waits in ``inner``."""
    kernel = dict(n("UserParkOp::Compute(tensorflow::OpKernelContext*)", "user_kern.so"), op={"type": "UserPark"})
    kernel["class"] = kernel_class
    device = dict(n("tensorflow::ThreadPoolDevice::Compute(tensorflow::OpKernel*, tensorflow::OpKernelContext*)",
                    "libtensorflow_framework.so.2"), op={"type": "UserPark"})
    return {"tid": tid, "name": "python", "frames": inner + [kernel, device] + TFE_WAIT[1:] + [py("<module>", 17)],
            "gil": None, "kernel": {"state": "S", "syscall": "clock_nanosleep"}}


def test_your_kernel_that_does_not_return():
    """An eager op's kernel of the user's that sleeps, every other thread waiting: the op, the kernel, the call it
    waits in (the C++ library's templates passed over), the user's line."""
    sleeping = [n("clock_nanosleep"), n("__GI___nanosleep"), n("__sleep")]
    idle = worker(7, EVENT_WAIT, state="S")
    t = triage(event(_eager_kernel(PID, sleeping), idle, pool={"threads": 2, "busy": [], "idle": [7]}))
    assert t["pattern"] == "kernel_does_not_return"
    assert t["verdict"] == ("op UserPark: the main thread runs your kernel UserParkOp::Compute in user_kern.so and it "
                            "does not return, waiting in sleep, called from <module> at app.py:17")
    condvar = [n("__futex_abstimed_wait_common"), n("___pthread_cond_wait"),
               n("std::condition_variable::wait<UserParkOp::Compute(tensorflow::OpKernelContext*)::{lambda()#1}>"
                 "(std::unique_lock<std::mutex>&, UserParkOp::Compute(tensorflow::OpKernelContext*)::{lambda()#1})",
                 "user_kern.so")]
    t = triage(event(_eager_kernel(PID, condvar)))
    assert "waiting in pthread_cond_wait," in t["verdict"], t["verdict"]
    # another thread at work: the wait is not the whole story
    busy = {"tid": 20, "name": "python", "frames": [py("crunch", 5)], "gil": "held", "kernel": {"state": "R"}}
    assert triage(event(_eager_kernel(PID, sleeping), busy))["pattern"] != "kernel_does_not_return"
    # TensorFlow's own kernel that waits is the other patterns' to explain
    assert triage(event(_eager_kernel(PID, sleeping, "tensorflow-native")))["pattern"] is None
