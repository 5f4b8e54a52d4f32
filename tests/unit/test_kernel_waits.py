"""Waits inside the user's kernels, on recorded captures (``tests/hangs/captures/kernel_*.json``, taken by
``tests/integration/test_kernel_hangs.py``'s processes) and on the pure readers of ``core/locks.py``.

The verdicts are computed anew from each capture's threads: a self-deadlock (a cycle of one edge, the holding
frame from the lock objects gdb read), an absl::Mutex wait whose holder nothing records, a std::mutex another
kernel holds, an async kernel that never called ``done``.  ``kernel_self_lock_nsync_*``: the same self-lock
under TF 2.16 (the oldest pair), whose ``tsl::mutex`` is nsync's ``nsync_mu``.
"""

from __future__ import annotations

import pytest

from tfnative.core import locks
from tfnative.core.model import EventNativeFrame, EventThread, NativeFrame

from .test_waitgraph import again, docs


def _edge_of(doc, tid):
    return next(w for w in again(doc).waits or [] if w.thread == tid)


def test_a_self_deadlock_is_a_cycle_of_one_thread_with_the_frame_that_holds_the_mutex():
    (doc,) = docs("kernel_self_lock_g")
    t = again(doc)
    assert t.pattern == "self_deadlock", t.verdict
    [edge] = t.cycle
    assert edge.thread == edge.waits_for == doc.pid
    assert t.verdict.startswith("op SelfLock: the main thread waits for %s which it already holds (self-deadlock) "
                                "in SelfLockOp::Compute at self_lock.cc:" % edge.resource)
    assert "it locks it again in SelfLockOp::Refresh at self_lock.cc:" in t.verdict


def test_without_the_holding_frame_the_self_deadlock_is_not_claimed():
    (doc,) = docs("kernel_self_lock_g")
    main = next(th for th in doc.events[0].threads if th.tid == doc.pid)
    mutex = main.lock_wait["mutex"]
    main.lock_wait = {"resource": "mutex 0x%x" % mutex, "owner": None, "mutex": mutex,
                      "evidence": "locking mutex 0x%x" % mutex}
    t = again(doc)
    assert t.pattern == "kernel_lock_unknown" and "already holds" not in t.verdict, t.verdict
    assert t.cycle is None


def test_an_absl_mutex_without_dwarf_says_what_is_known():
    (doc,) = docs("kernel_self_lock_g0")
    t = again(doc)
    assert t.pattern == "kernel_lock_unknown", t.verdict
    assert "no owner recorded (release absl); self_lock.so is built without DWARF" in t.verdict
    assert t.verdict.startswith("op SelfLock: the main thread waits in SelfLockOp::Refresh in self_lock.so")


def test_a_mutex_held_by_another_kernel_names_the_holder():
    (doc,) = docs("kernel_holder_g0")
    t = again(doc)
    assert t.pattern == "kernel_lock_held", t.verdict
    holder = t.chain[0].waits_for
    assert holder != doc.pid and "held by thread %d" % holder in t.verdict
    assert "it runs op LockHolder in LockHolderOp::Compute in self_lock.so" in t.verdict


def test_an_async_kernel_that_never_called_done():
    (doc,) = docs("kernel_never_done_g0")
    t = again(doc)
    assert t.pattern == "async_never_done", t.verdict
    assert t.verdict.startswith("op KfAllReduce: its async kernel returned without calling done; no thread "
                                "works on it")


def test_an_async_kernel_with_a_thread_at_work_is_not_claimed_dead():
    """Another thread runs a kernel: the async kernel's done may still come."""
    (doc,) = docs("kernel_never_done_g0")
    doc.events[0].threads.append(EventThread(tid=doc.pid + 1, name="tf_Compute", kernel={"state": "R"}, frames=[
        EventNativeFrame(function="MatMulOp::Compute(tensorflow::OpKernelContext*)"),
        EventNativeFrame(function="tensorflow::ThreadPoolDevice::Compute(tensorflow::OpKernel*, tensorflow::"
                    "OpKernelContext*)")]))
    assert again(doc).pattern != "async_never_done"


def test_a_queue_dequeue_is_no_async_kernel_that_forgot_done():
    (doc,) = docs("fifo_eager")
    assert again(doc).pattern == "queue_without_producer"


def test_this_register_decodes_mov_rdi():
    assert locks.this_register(b"\x55\x48\x89\xe5\x41\x57\x48\x89\xfb") == 3  # mov %rdi,%rbx
    assert locks.this_register(b"\x55\x49\x89\xfc\x48\x89\xfb") == 12  # the first copy counts
    assert locks.this_register(b"\x55\x48\x89\xe5\xc3") is None


def test_lock_objects_wait_prefers_the_threads_own_frame_then_another_thread():
    objects = {1: {"acquiring": {"mutex": 0x1000, "where": "A at a.cc:5"},
                   "held": [{"mutex": 0x1000, "variable": "l", "type": "tsl::mutex_lock", "where": "B at a.cc:9"}]},
               2: {"acquiring": None, "held": [{"mutex": 0x1000, "variable": "g", "type": "std::lock_guard",
                                                "where": "C at c.cc:3"}]},
               3: {"acquiring": {"mutex": 0x2000, "where": "D at d.cc:1"}, "held": []}}
    mine = locks.lock_objects_wait(1, objects, None)
    assert mine is not None and mine["owner"] == 1 and mine["held_at"] == "B at a.cc:9"
    assert "a self-deadlock" in mine["evidence"]
    del objects[1]["held"]
    other = locks.lock_objects_wait(1, objects, None)
    assert other is not None and other["owner"] == 2 and other["held_at"] == "C at c.cc:3"
    nobody = locks.lock_objects_wait(3, objects, None)
    assert nobody is not None and nobody["owner"] is None and "no lock object on it" in nobody["evidence"]
    assert locks.lock_objects_wait(2, objects, None) is None


@pytest.mark.parametrize("frames,expected", [
    (["syscall", "absl::lts_1::Mutex::Block(x)", "absl::lts_1::Mutex::LockSlowLoop(y)",
      "absl::lts_1::Mutex::LockSlow(z)", "SelfLockOp::Refresh(c)"], 4),
    (["syscall", "absl::lts_1::Mutex::Block(x)", "absl::lts_1::Mutex::LockSlowWithDeadline(y)",
      "absl::lts_1::Notification::WaitForNotification() const", "tensorflow::AsyncOpKernel::Compute(c)"], None),
    (["syscall", "SomethingElse"], None),
    (["syscall", "nsync::nsync_mu_semaphore_p(nsync::nsync_semaphore_s_*)",
      "nsync::nsync_mu_lock_slow_(nsync::nsync_mu_s_*, nsync::waiter*, unsigned int, nsync::lock_type_s*)",
      "nsync::nsync_mu_lock(nsync::nsync_mu_s_*)", "tsl::mutex_lock::mutex_lock", "SelfLockOp::Refresh"], 4),
    (["syscall", "nsync::nsync_mu_semaphore_p_with_deadline(nsync::nsync_semaphore_s_*, timespec)",
      "nsync::nsync_cv_wait_with_deadline_generic(nsync::nsync_cv_s_*, void*, ...)",
      "tsl::condition_variable::wait(tsl::mutex_lock&)"], None),
])
def test_absl_lock_frames_tells_a_lock_from_a_condition_wait(frames, expected):
    assert locks.absl_lock_frames([NativeFrame(function=f) for f in frames]) == expected


def test_a_nameless_libc_frame_of_the_lock_is_not_the_code_that_locks():
    """Python 3.14's libc names no ``__lll_lock_wait``: the innermost frame is ``??`` in libc.so.6."""
    (doc,) = docs("kernel_holder_g0")
    main = next(th for th in doc.events[0].threads if th.tid == doc.pid)
    inner = main.frames[0]
    assert isinstance(inner, NativeFrame) and inner.frame_class == "system", inner
    inner.function = "??"
    t = again(doc)
    assert t.pattern == "kernel_lock_held", t.verdict
    assert t.verdict.startswith("op LockWaiter: the main thread waits in LockWaiterOp::Compute in self_lock.so"), \
        t.verdict


def test_a_tensorflow_mutex_held_by_another_kernel_is_read_from_its_lock_object():
    (doc,) = docs("kernel_tf_holder_g")
    t = again(doc)
    assert t.pattern == "kernel_lock_held", t.verdict
    holder = t.chain[0].waits_for
    assert holder != doc.pid and "held by thread %d" % holder in t.verdict
    assert "(its frame TfLockHolderOp::Compute at self_lock.cc:" in t.verdict


@pytest.mark.parametrize("op_type", ["If", "StatefulPartitionedCall", "QueueDequeueV2", "CollectiveReduceV2"])
def test_tensorflows_own_waiting_async_kernels_are_not_claimed(op_type):
    """An async kernel that waits by design (a queue, a collective) or runs a function is no forgotten done."""
    (doc,) = docs("kernel_never_done_g0")
    for th in doc.events[0].threads:
        for f in th.frames:
            if isinstance(f, NativeFrame) and f.op is not None:
                f.op.type = op_type
    assert again(doc).pattern != "async_never_done"


def test_the_absl_mutex_from_gdbs_registers_of_the_slow_path():
    """gdb's registers by frame level (``-tfnative-lock-objects TID``), the prologue and the mutex word read."""
    import struct

    memory = {0x1000: b"\x55\x48\x89\xe5\x41\x57\x48\x89\xfb" + b"\x90" * 39,  # LockSlowLoop: mov %rdi,%rbx
              0x2000: struct.pack("<Q", 0x7F0000001000 | locks.ABSL_MU_WRITER | locks.ABSL_MU_WAIT)}

    def read(addr, size):
        for base, data in memory.items():
            if base <= addr and addr + size <= base + len(data):
                return data[addr - base:addr - base + size]
        raise OSError("unmapped")

    names = ["syscall", "absl::lts_1::Mutex::Block(x)", "absl::lts_1::Mutex::LockSlowLoop(y)",
             "absl::lts_1::Mutex::LockSlow(z)", "SelfLockOp::Refresh(c)"]
    frames = [NativeFrame(function=n, level=i, start=0x1000 if "LockSlowLoop" in n else None)
              for i, n in enumerate(names)]
    objects = {7: {"acquiring": None, "held": [], "frames": [{"level": 2, "regs": {"3": 0x2000}}]}}
    found = locks.lock_objects_wait(7, objects, None, read, frames)
    assert found is not None and found["mutex"] == 0x2000 and found["owner"] is None
    assert found["evidence"].startswith("blocked in absl::Mutex::LockSlow on mutex 0x2000; no owner recorded")
    memory[0x2000] = struct.pack("<Q", locks.ABSL_MU_WRITER)  # held, nobody waits: not this mutex
    assert locks.lock_objects_wait(7, objects, None, read, frames) is None


def test_a_self_deadlock_on_an_nsync_mutex_names_the_frames_that_hold_and_lock_it():
    """TF 2.16's ``tsl::mutex`` (nsync): the lock frames are nsync's, the code that locks is the kernel's."""
    (doc,) = docs("kernel_self_lock_nsync_g")
    t = again(doc)
    assert t.pattern == "self_deadlock", t.verdict
    assert "which it already holds (self-deadlock) in SelfLockOp::Compute at self_lock.cc:" in t.verdict
    assert "it locks it again in SelfLockOp::Refresh at self_lock.cc:" in t.verdict


def test_an_nsync_mutex_without_dwarf_says_what_is_known():
    (doc,) = docs("kernel_self_lock_nsync_g0")
    t = again(doc)
    assert t.pattern == "kernel_lock_unknown", t.verdict
    assert t.verdict.startswith("op SelfLock: the main thread waits in SelfLockOp::Refresh in self_lock.so")
    assert "blocked in nsync::nsync_mu_lock on mutex 0x" in t.verdict
    assert "nsync records no owner; self_lock.so is built without DWARF" in t.verdict


def test_the_nsync_mutex_from_the_slow_paths_registers():
    """nsync_mu_lock_slow_'s prologue (TF 2.16's bytes: ``mov %rdi,%r15`` after the pushes) and the 32-bit
    word: held by a writer with waiters, else no wait is claimed."""
    import struct

    prologue = bytes.fromhex("554889e541574156415541545348 83ec184189d44989f64989ff".replace(" ", ""))
    memory = {0x1000: prologue + b"\x90" * 48,
              0x2000: struct.pack("<IQ", locks.NSYNC_MU_WLOCK | locks.NSYNC_MU_WAITING, 0x7F0000003000)}

    def read(addr, size):
        for base, data in memory.items():
            if base <= addr and addr + size <= base + len(data):
                return data[addr - base:addr - base + size]
        raise OSError("unmapped")

    assert locks.this_register(memory[0x1000][:locks.PROLOGUE]) == 15
    names = ["syscall", "nsync::nsync_mu_semaphore_p(x)", "nsync::nsync_mu_lock_slow_(y)",
             "nsync::nsync_mu_lock(z)", "SelfLockOp::Refresh(c)"]
    frames = [NativeFrame(function=n, level=i, start=0x1000 if "lock_slow_" in n else None)
              for i, n in enumerate(names)]
    objects = {7: {"acquiring": None, "held": [], "frames": [{"level": 2, "regs": {"15": 0x2000}}]}}
    found = locks.lock_objects_wait(7, objects, None, read, frames)
    assert found is not None and found["mutex"] == 0x2000 and found["owner"] is None
    assert found["evidence"].startswith("blocked in nsync::nsync_mu_lock on mutex 0x2000 (a tsl::mutex on nsync); "
                                        "nsync records no owner")
    regs = [{}, {}, {15: 0x2000}, {}, {}]
    own = locks.absl_mutex_wait(read, frames, regs)  # tfnative's unwinder's registers (no gdb): the same mutex
    assert own is not None and own["mutex"] == 0x2000 and found["evidence"].startswith(own["evidence"])
    memory[0x2000] = struct.pack("<IQ", locks.NSYNC_MU_WLOCK, 0)  # held, nobody waits: not this mutex
    assert locks.lock_objects_wait(7, objects, None, read, frames) is None
