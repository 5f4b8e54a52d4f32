"""Hangs inside the user's own kernels (custom ops, ``tests/custom_op/``), read by ``stack --pid``.

``self_lock.cc``'s ``SelfLock`` locks its member ``mutex`` (an ``absl::Mutex`` under TF 2.21) and calls a helper
that locks it again: with ``-g`` the wait-for graph reads the holder from the frames' ``mutex_lock`` objects
(gdb, DWARF) and says self-deadlock with the frame that holds it; with ``-g0`` the mutex's address is read from
absl's slow path and the verdict says what is not known (absl records no owner, no DWARF).  ``LockHolder`` /
``LockWaiter``: a ``std::mutex`` one thread's kernel holds and the main thread's kernel waits for (its holder from
the pthread mutex's ``__owner``).  ``TfLockHolder`` / ``TfLockWaiter``: the same with a ``tensorflow::mutex``,
whose holder only the holder's ``mutex_lock`` says (``-g``).
``async_never_done.cc``'s ``KfAllReduce`` returns from ``ComputeAsync`` without calling ``done``.

The hung processes are started together, once for the module (each imports TensorFlow), and each is held
by one ``stack`` run whose document every check of it reads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Dict, Iterator, Tuple

import pytest

from ..kernels import build_op, source
from ..utils import line_of, load_json, requires_gdb, requires_tf, run_tfnative, script, wait_for_file

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf,
              pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")]

SCRIPT = script("kernel_hang.py")
SELF_LOCK = source("self_lock")
CASES = {"self_lock-g": ("self_lock", "g", "self_lock"), "self_lock-g0": ("self_lock", "g0", "self_lock"),
         "holder-g0": ("self_lock", "g0", "holder"), "tf_holder-g": ("self_lock", "g", "tf_holder"),
         "tf_holder-g0": ("self_lock", "g0", "tf_holder"),
         "never_done-g0": ("async_never_done", "g0", "never_done")}


@pytest.fixture(scope="module")
def hung(tmp_path_factory) -> Iterator[Dict[str, Tuple[int, dict, str]]]:
    """Each case's (pid, ``stack --json`` document, ``stack`` stderr), its process hung in the kernel."""
    where = tmp_path_factory.mktemp("kernel_hangs")
    libs = {(name, flavour): build_op(name, flavour) for name, flavour, _case in CASES.values()}
    procs: Dict[str, subprocess.Popen] = {}
    try:
        for key, (name, flavour, case) in CASES.items():
            procs[key] = subprocess.Popen([sys.executable, SCRIPT, libs[(name, flavour)], case, str(where / key)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          stdin=subprocess.DEVNULL, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        out: Dict[str, Tuple[int, dict, str]] = {}
        for key, proc in procs.items():
            wait_for_file(str(where / key), 300, proc)
        for key, proc in procs.items():
            doc = where / ("%s.json" % key)
            r = run_tfnative(["stack", "--pid", str(proc.pid), "--json", str(doc)], timeout=300)
            assert r.returncode == 0, r.stderr
            out[key] = (proc.pid, load_json(doc), r.stderr)
            assert proc.poll() is None  # released, still hung
        yield out
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait(timeout=60)


def _triage(hung, key: str) -> dict:
    return hung[key][1]["events"][0]["triage"]


def _verdict_line(hung, key: str) -> str:
    [line] = [ln for ln in hung[key][2].splitlines() if ln.startswith("tfnative: verdict: ")]
    return line[len("tfnative: verdict: "):]


def test_self_deadlock_with_dwarf_names_the_frame_that_holds_the_mutex(hung):
    pid = hung["self_lock-g"][0]
    t = _triage(hung, "self_lock-g")
    assert t["pattern"] == "self_deadlock", t["verdict"]
    [edge] = t["cycle"]
    assert edge["thread"] == edge["waits_for"] == pid
    mutex = edge["resource"]
    assert mutex.startswith("mutex 0x")
    held = line_of(SELF_LOCK, "tfn: the kernel calls the helper")
    again = line_of(SELF_LOCK, "tfn: the helper takes it again")
    user = line_of(SCRIPT, "tfn: SelfLock hangs here")
    assert _verdict_line(hung, "self_lock-g") == (
        "op SelfLock: the main thread waits for %s which it already holds (self-deadlock) in "
        "SelfLockOp::Compute at self_lock.cc:%d: it locks it again in SelfLockOp::Refresh at self_lock.cc:%d, "
        "from kernel_hang.py:%d" % (mutex, held, again, user))
    [main] = [th for th in hung["self_lock-g"][1]["events"][0]["threads"] if th["tid"] == pid]
    assert main["lock_wait"]["owner"] == pid and main["lock_wait"]["held_at"] == "SelfLockOp::Compute at " \
        "self_lock.cc:%d" % held
    assert "tsl::mutex_lock l" in main["lock_wait"]["evidence"]


def test_self_deadlock_without_dwarf_says_what_is_known(hung):
    t = _triage(hung, "self_lock-g0")
    assert t["pattern"] == "kernel_lock_unknown", t["verdict"]
    [edge] = t["chain"]
    assert edge["waits_for"] is None and edge["resource"].startswith("mutex 0x")
    mutex = edge["resource"][len("mutex "):]
    user = line_of(SCRIPT, "tfn: SelfLock hangs here")
    assert _verdict_line(hung, "self_lock-g0") == (
        "op SelfLock: the main thread waits in SelfLockOp::Refresh in self_lock.so (from kernel_hang.py:%d) for "
        "mutex %s: blocked in absl::Mutex::LockSlow on mutex %s; no owner recorded (release absl); self_lock.so "
        "is built without DWARF, so the holder cannot be read from the frames" % (user, mutex, mutex))


def test_a_std_mutex_another_kernel_holds_names_the_holder_from_its_owner(hung):
    pid, doc, _err = hung["holder-g0"]
    t = _triage(hung, "holder-g0")
    assert t["pattern"] == "kernel_lock_held", t["verdict"]
    first = t["chain"][0]
    [holder] = [th for th in doc["events"][0]["threads"] if th["tid"] == first["waits_for"]]
    assert first["thread"] == pid != holder["tid"]
    assert _verdict_line(hung, "holder-g0") == (
        "op LockWaiter: the main thread waits in LockWaiterOp::Compute in self_lock.so (from kernel_hang.py:%d) "
        "for %s, held by thread %d %s (recorded as the mutex's __owner): it runs op LockHolder in "
        "LockHolderOp::Compute in self_lock.so, blocked in clock_nanosleep" % (
            line_of(SCRIPT, "tfn: LockWaiter hangs here"), first["resource"], holder["tid"], holder["name"]))


def test_a_tensorflow_mutex_another_kernel_holds_is_read_from_its_lock_object(hung):
    """absl records no owner: with -g the holder is the thread whose frame holds a mutex_lock on the mutex."""
    pid, doc, _err = hung["tf_holder-g"]
    t = _triage(hung, "tf_holder-g")
    assert t["pattern"] == "kernel_lock_held", t["verdict"]
    first = t["chain"][0]
    holder = first["waits_for"]
    assert first["thread"] == pid and holder not in (pid, None)
    held_at = "TfLockHolderOp::Compute at self_lock.cc:%d" % line_of(SELF_LOCK, "tfn: the holder waits holding it")
    [main] = [th for th in doc["events"][0]["threads"] if th["tid"] == pid]
    assert (main["lock_wait"]["owner"], main["lock_wait"]["held_at"]) == (holder, held_at)
    assert "thread %d holds it in %s (tsl::mutex_lock held)" % (holder, held_at) in main["lock_wait"]["evidence"]
    text = _verdict_line(hung, "tf_holder-g")
    assert text.startswith("op TfLockWaiter: the main thread waits in TfLockWaiterOp::Compute at self_lock.cc:%d "
                           "(from kernel_hang.py:%d) for %s, held by thread %d" % (
                               line_of(SELF_LOCK, "tfn: the waiter blocks on the tensorflow::mutex"),
                               line_of(SCRIPT, "tfn: TfLockWaiter hangs here"), first["resource"], holder))
    assert "(its frame %s holds it): it runs op TfLockHolder in %s" % (held_at, held_at) in text


def test_a_tensorflow_mutex_without_dwarf_has_no_holder(hung):
    t = _triage(hung, "tf_holder-g0")
    assert t["pattern"] == "kernel_lock_unknown", t["verdict"]
    assert t["chain"][0]["waits_for"] is None
    assert "no owner recorded (release absl); self_lock.so is built without DWARF" in _verdict_line(
        hung, "tf_holder-g0")


def test_an_async_kernel_that_never_calls_done(hung):
    t = _triage(hung, "never_done-g0")
    assert t["pattern"] == "async_never_done", t["verdict"]
    user = line_of(SCRIPT, "tfn: KfAllReduce hangs here")
    assert _verdict_line(hung, "never_done-g0").startswith(
        "op KfAllReduce: its async kernel returned without calling done; no thread works on it: the main thread "
        "waits in tensorflow::AsyncOpKernel::Compute from kernel_hang.py:%d, and every other thread waits" % user)


def test_through_gdb_the_absl_mutex_is_read_from_the_same_registers(hung, tmp_path):
    """``--with-gdb`` (as ``attach`` stops take it): gdb gives the slow path's registers; the same mutex."""
    pid = hung["self_lock-g0"][0]
    fast = _triage(hung, "self_lock-g0")["chain"][0]["resource"]
    out = tmp_path / "g.json"
    r = run_tfnative(["stack", "--pid", str(pid), "--with-gdb", "--json", str(out)], timeout=300)
    assert r.returncode == 0, r.stderr
    t = load_json(out)["events"][0]["triage"]
    assert t["pattern"] == "kernel_lock_unknown", t["verdict"]
    assert t["chain"][0]["resource"] == fast
    assert "blocked in absl::Mutex::LockSlow on %s; no owner recorded (release absl)" % fast in t["verdict"]
