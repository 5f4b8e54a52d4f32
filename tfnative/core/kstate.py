"""A thread's kernel state: the scheduler's letter and the system call it was in.

The letter (``R`` running, ``S`` sleeping, ``D`` uninterruptible, ...) comes from
``/proc/PID/task/TID/stat`` read just before the threads are held (held, every
thread reads ``t``).  The system call is the one ``/proc/PID/task/TID/syscall``
would name, taken from the held thread's registers: ``orig_rax`` is the call's
number while a thread is inside one (it is held there, the call interrupted and
restarted at the release), and -1 when it runs user code.  x86-64 numbers.

``ThreadSample`` and ``ProcessSample``: the counters ``watch`` reads of each thread, and of a process, at one
moment (``snapshot/progress.py`` reads them, ``analysis/progress.py`` judges them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import procfs
from .model import Thread
from .record import FrozenRecord, Record

# x86-64 system call numbers a thread is commonly blocked in (or found in); others read "syscall N".
SYSCALLS = {
    0: "read", 1: "write", 2: "open", 3: "close", 7: "poll", 9: "mmap", 11: "munmap", 16: "ioctl",
    17: "pread64", 18: "pwrite64", 19: "readv", 20: "writev", 23: "select", 24: "sched_yield", 34: "pause",
    35: "nanosleep", 42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
    56: "clone", 59: "execve", 61: "wait4", 72: "fcntl", 74: "fsync", 75: "fdatasync", 128: "rt_sigtimedwait",
    130: "rt_sigsuspend", 202: "futex", 219: "restart_syscall", 230: "clock_nanosleep", 232: "epoll_wait",
    247: "waitid",
    257: "openat", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4", 299: "recvmmsg",
    307: "sendmmsg", 318: "getrandom", 435: "clone3", 441: "epoll_pwait2", 449: "futex_waitv",
}
STATES = {"R": "running", "S": "sleeping", "D": "uninterruptible", "T": "stopped", "t": "traced",
          "Z": "zombie", "I": "idle", "X": "dead"}


def states(pid: int) -> Dict[int, str]:
    """The scheduler letter of each live thread of ``pid`` now (empty when the process is gone)."""
    out: Dict[int, str] = {}
    try:
        tids = procfs.tids(pid)
    except ProcessLookupError:
        return out
    for tid in tids:
        letter = procfs.state(pid, tid)
        if letter:
            out[tid] = letter
    return out


def syscall_name(orig_rax: Optional[int]) -> Optional[str]:
    """The system call a thread is in, from its ``orig_rax`` (None: in none, or unknown)."""
    if orig_rax is None:
        return None
    if orig_rax >= 1 << 63:
        orig_rax -= 1 << 64
    if orig_rax < 0:
        return None
    return SYSCALLS.get(orig_rax, "syscall %d" % orig_rax)


def kernel_state(letter: Optional[str], regs: Optional[Mapping[str, int]]) -> Optional[Dict[str, Any]]:
    """``{"state": "S", "syscall": "futex"}`` (each key only when known); None when nothing is known."""
    out: Dict[str, Any] = {}
    if letter:
        out["state"] = letter
    call = syscall_name((regs or {}).get("orig_rax"))
    if call:
        out["syscall"] = call
    return out or None


def annotate(threads: List[Thread], letters: Mapping[int, str], regs: Mapping[int, Mapping[str, int]]) -> None:
    """Set ``kernel`` on each thread of a capture that has a known state."""
    for t in threads:
        k = kernel_state(letters.get(t.tid), regs.get(t.tid))
        if k:
            t.kernel = k


def text(kernel: Optional[Mapping[str, Any]]) -> str:
    """``S in futex`` / ``R``: the kernel state as a thread header shows it ("" when unknown)."""
    if not kernel:
        return ""
    parts = [kernel["state"]] if kernel.get("state") else []
    if kernel.get("syscall"):
        parts.append("in %s" % kernel["syscall"])
    return " ".join(parts)


@dataclass(frozen=True, repr=False, eq=False)
class ThreadSample(FrozenRecord):
    """One thread's counters at one moment."""

    tid: int
    cpu_ns: Optional[int]  # CPU time it has run (ns)
    switches: Optional[int]  # voluntary + involuntary context switches
    state: Optional[str]  # the scheduler's letter
    wait: Optional[Tuple[int, str]]  # (system call number, first argument) while blocked in one, else None
    at: Optional[float] = None  # when it was read, where not its process's reading (one ``carry`` kept)


@dataclass(repr=False, eq=False)
class ProcessSample(Record):
    """One process's threads at one moment (``at``: seconds on a monotonic clock)."""

    pid: int
    at: float
    threads: Dict[int, ThreadSample] = field(default_factory=dict)
    runtime: Optional[Tuple[int, int]] = None  # [start, end) of the interpreter's runtime state (the GIL in it)


# A process as the watch's facts name it: (its Slurm node, "" for the processes of one machine; its pid).  Pids
# are per node: two ranks on two nodes may have the same one, and the head of ``watch --slurm-job`` joins every
# node's facts.
ProcKey = Tuple[str, int]


@dataclass(frozen=True, repr=False, eq=False)
class ProcessFacts(FrozenRecord):
    """What ``watch`` knows of a process beyond its snapshot, read before a report holds it (which
    ``analysis/culprit.py`` judges)."""

    state: Optional[str] = None  # its scheduler state (``/proc/PID/stat``), read before the report held it
    stopped_by: Optional[str] = None  # the signal of its group stop, where the crash catcher answered one
    cpu_percent: Optional[float] = None  # its threads' CPU over the last interval, in % of one CPU
    # Read only where the watch names a culprit before it holds anything (``snapshot/progress.facts``, ``deep``):
    task: Optional[str] = None  # its task among its peers ("worker:1": its TF_CONFIG; "rank:3": its launcher's)
    tasks: Tuple[str, ...] = ()  # every task of its cluster
    # its main thread's Python frames (function, file, line), innermost first, read without stopping it
    main_frames: Optional[Tuple[Tuple[Optional[str], Optional[str], Optional[int]], ...]] = None
    main_call: Optional[str] = None  # the system call its main thread was blocked in at the last reading
    node: Optional[str] = None  # its Slurm node (``SLURMD_NODENAME``), as its document's scheduler names it

    def stopped(self) -> bool:
        return self.stopped_by is not None or self.state == "T"
