"""Load a custom op library (argv[1], tests/custom_op/self_lock.cc or async_never_done.cc) and hang in it.

argv[2]: "self_lock" (the main thread runs SelfLock: a self-deadlock on the kernel's own mutex),
"holder" (thread "holder" runs LockHolder, which takes a std::mutex and sleeps holding it; the main thread
runs LockWaiter, which waits for it), "tf_holder" (the same with a tensorflow::mutex: TfLockHolder,
TfLockWaiter) or "never_done" (the main thread runs KfAllReduce, whose ComputeAsync
returns without calling done).  argv[3]: the READY path, written just before the op that hangs.
"""

import sys
import threading
import time

import tensorflow as tf

ops = tf.load_op_library(sys.argv[1])
case, ready = sys.argv[2], sys.argv[3]


def mark_ready() -> None:
    with open(ready, "w") as f:
        f.write("ready")


if case == "self_lock":
    mark_ready()
    ops.self_lock([1, 2, 3])  # tfn: SelfLock hangs here
elif case == "holder":
    holder = threading.Thread(target=lambda: ops.lock_holder([1]), name="holder", daemon=True)
    holder.start()
    time.sleep(1.0)
    mark_ready()
    ops.lock_waiter([2])  # tfn: LockWaiter hangs here
elif case == "tf_holder":
    holder = threading.Thread(target=lambda: ops.tf_lock_holder([1]), name="holder", daemon=True)
    holder.start()
    time.sleep(1.0)
    mark_ready()
    ops.tf_lock_waiter([2])  # tfn: TfLockWaiter hangs here
else:
    mark_ready()
    ops.kf_all_reduce([1.0, 2.0])  # tfn: KfAllReduce hangs here
