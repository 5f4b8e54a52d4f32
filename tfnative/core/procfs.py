"""Everything tfnative reads from ``/proc``, parsed in one place.

Each function reads one file of one process (or thread) and returns plain
values; a process that is gone gives ``ProcessLookupError`` or ``None`` as
each function says, never a half-parsed result.  Nothing here needs ptrace.
"""

from __future__ import annotations

import os
from typing import Dict, List, NamedTuple, Optional, Tuple


class Mapping(NamedTuple):
    """One line of ``/proc/PID/maps``."""

    start: int
    end: int
    perms: str  # "r-xp"
    offset: int
    dev: str  # "fd:01"
    inode: int
    path: str  # "" for anonymous memory; "[vdso]", "[stack]"...; "... (deleted)" as the kernel says


def maps(pid: int) -> List[Mapping]:
    """The mappings of ``pid``, in address order.  Raises ``OSError`` when the file cannot be read."""
    rows = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 5:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            rows.append(Mapping(lo, hi, parts[1], int(parts[2], 16), parts[3], int(parts[4]),
                                parts[5].rstrip("\n") if len(parts) > 5 else ""))
    return rows


def _task(pid: int, tid: Optional[int]) -> str:
    return "/proc/%d" % pid if tid is None else "/proc/%d/task/%d" % (pid, tid)


def stat_fields(pid: int, tid: Optional[int] = None) -> Optional[List[bytes]]:
    """The fields of ``/proc/PID[/task/TID]/stat`` after the command name (which may hold spaces and
    parentheses: cut at its last ``)``), so that ``[0]`` is field 3 of proc(5), the state; None when gone."""
    try:
        with open(_task(pid, tid) + "/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _number(fields: Optional[List[bytes]], field: int) -> Optional[int]:
    """proc(5)'s field number ``field`` of ``stat_fields`` as a number; None when gone or not there."""
    try:
        return None if fields is None else int(fields[field - 3])
    except (IndexError, ValueError):
        return None


def state(pid: int, tid: Optional[int] = None) -> Optional[str]:
    """The one-letter scheduler state (``R``, ``S``, ``D``, ``T``, ``t``, ``Z``...), or None when gone."""
    fields = stat_fields(pid, tid)
    return fields[0].decode("ascii", "replace") if fields else None


def exiting(pid: int, tid: Optional[int] = None) -> bool:
    """Whether the process (or thread) is gone, a zombie, or on its way out (``PF_EXITING`` in the flags of
    its ``stat``: it never runs user code again, and may sleep in the kernel before it is a zombie, as the
    last thread of a PID namespace's init does until the namespace is empty)."""
    fields = stat_fields(pid, tid)
    flags = _number(fields, 9) if fields and fields[0] not in (b"Z", b"X", b"x") else None
    return flags is None or bool(flags & PF_EXITING)


def exited(pid: int) -> bool:
    """Whether ``pid`` has exited: gone, or every thread of it ``exiting`` (an exit of the whole process
    whose threads a tracer has not reaped yet, say).  A zombie leader with live threads (it called
    pthread_exit) has not.  One ``stat`` read where the leader runs."""
    if not exiting(pid):
        return False
    try:
        names = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return True
    return all(exiting(pid, int(t)) for t in names)


PF_EXITING = 0x00000004  # ``flags`` of ``stat`` (field 9): the task is in do_exit
PF_KTHREAD = 0x00200000  # the same flags: a kernel thread


def kernel_thread(pid: int) -> bool:
    """Whether ``pid`` is a kernel thread (no user memory, nothing to unwind); False when gone."""
    flags = _number(stat_fields(pid), 9)
    return flags is not None and bool(flags & PF_KTHREAD)


def num_threads(pid: int) -> Optional[int]:
    """How many threads the process has (``stat`` field 20: one small read, where listing
    ``/proc/PID/task`` of a thousand threads takes milliseconds); None when gone.  Read from the leader's
    own ``task/PID/stat``: the process's ``stat`` adds up every thread's times first."""
    return _number(stat_fields(pid, pid), 20)


def start_code(pid: int) -> Optional[int]:
    """Where the executable's code starts (``stat`` field 26): an ``exec`` moves it (a new image, placed anew);
    None when gone."""
    return _number(stat_fields(pid), 26)


def exit_status(pid: int) -> Optional[int]:
    """The wait status of a process that has exited and not been reaped yet (a zombie), as ``waitpid`` gives it.

    None when the process runs, is gone, or the kernel does not say (field 52
    of ``stat``, Linux 3.5+).
    """
    fields = stat_fields(pid)
    if not fields or fields[0] != b"Z":
        return None
    return _number(fields, 52)


def children(pid: int) -> List[int]:
    """The pids of ``pid``'s children (every thread's), from ``/proc/PID/task/TID/children``."""
    out: List[int] = []
    try:
        for tid in tids(pid):
            try:
                with open("/proc/%d/task/%d/children" % (pid, tid)) as f:
                    out.extend(int(c) for c in f.read().split())
            except OSError:
                continue
    except ProcessLookupError:
        return []
    return out


def comm(pid: int, tid: Optional[int] = None) -> str:
    """The process's (or thread's) name as the kernel keeps it (15 characters at most); "" when gone."""
    try:
        with open(_task(pid, tid) + "/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def cmdline(pid: int, tid: Optional[int] = None) -> List[str]:
    """The arguments the process (or thread) was started with; [] when gone, unreadable or a zombie."""
    try:
        with open(_task(pid, tid) + "/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return []


def tids(pid: int) -> List[int]:
    """The thread ids of ``pid``.  Raises ``ProcessLookupError`` when the process is gone."""
    try:
        return [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    except FileNotFoundError:
        raise ProcessLookupError(pid) from None


def status(pid: int, tid: Optional[int] = None) -> Dict[str, str]:
    """The fields of ``/proc/PID/status`` (``State``, ``TracerPid``, ``NSpid``...), values as written; a
    thread's own (``/proc/PID/task/TID/status``) with ``tid``."""
    out: Dict[str, str] = {}
    with open(_task(pid, tid) + "/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def tracer(pid: int, thread: Optional[int] = None) -> int:
    """The process tracing ``pid`` (or its thread ``thread``; 0: none).  ``TracerPid`` names the tracing
    thread, which is not the process's first one where a thread of its own traces (``tfnative stack``'s
    hold): its ``Tgid`` is the process.  Raises ``OSError`` when the status cannot be read."""
    tid = int(status(pid, thread).get("TracerPid", "0").split()[0])
    if tid:
        try:
            return int(status(tid).get("Tgid", str(tid)))
        except (OSError, ValueError):  # the tracer is gone meanwhile
            return tid
    return tid


def yama_scope() -> Optional[int]:
    """Yama's ``ptrace_scope`` (0 to 3), or None where Yama is not in the kernel."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def environ(pid: int) -> Dict[str, str]:
    """The environment ``pid`` started with (``/proc/PID/environ``); empty when it cannot be read."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    out: Dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def exe(pid: int) -> str:
    """The path ``/proc/PID/exe`` links to, as the process's own mount namespace names it.  Raises ``OSError``."""
    return os.readlink("/proc/%d/exe" % pid)


def other_namespace(pid: int, kind: str) -> bool:
    """Whether ``pid`` lives in another namespace of ``kind`` ("mnt", "pid"...) than this process.  False when
    either link cannot be read (the same namespace is what a reader may then assume)."""
    try:
        return os.readlink("/proc/%d/ns/%s" % (pid, kind)) != os.readlink("/proc/self/ns/%s" % kind)
    except OSError:
        return False


def syscall(pid: int, tid: int) -> Optional[List[str]]:
    """The fields of ``/proc/PID/task/TID/syscall`` ("NR ARGS... SP PC", "-1 SP PC" outside a system call,
    "running"); None when it cannot be read."""
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            return f.read().split()
    except OSError:
        return None


def run_ns(pid: int, tid: int) -> Optional[int]:
    """The nanoseconds thread ``tid`` has run on a CPU (first field of ``/proc/PID/task/TID/schedstat``, the
    scheduler's own count, exact where ``stat``'s ticks are sampled); None when it cannot be read (gone, or a
    kernel without scheduler statistics)."""
    try:
        with open("/proc/%d/task/%d/schedstat" % (pid, tid), "rb") as f:
            return int(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None


def cpu_ticks(pid: int, tid: int) -> Optional[int]:
    """``utime + stime`` of thread ``tid`` (``stat`` fields 14 and 15, in clock ticks); None when gone."""
    fields = stat_fields(pid, tid)
    utime, stime = _number(fields, 14), _number(fields, 15)
    return None if utime is None or stime is None else utime + stime


def auxv(pid: int) -> bytes:
    """The raw auxiliary vector of ``pid`` (``/proc/PID/auxv``).  Raises ``OSError``."""
    with open("/proc/%d/auxv" % pid, "rb") as f:
        return f.read()


def cpuinfo() -> Tuple[str, List[str]]:
    """This machine's CPU model name and its flags (the first processor's), from ``/proc/cpuinfo``;
    ("unknown", []) when it cannot be read."""
    model: str = "unknown"
    flags: List[str] = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    break
    except OSError:
        pass
    return model, flags


def capabilities(pid: int) -> Optional[int]:
    """The effective capability set of ``pid`` (``CapEff``); None when it cannot be read."""
    try:
        return int(status(pid).get("CapEff", ""), 16)
    except (OSError, ValueError):
        return None


def core_pattern() -> Optional[str]:
    """``kernel.core_pattern``: where the kernel writes a core (a pipe to a helper when it starts with ``|``)."""
    try:
        with open("/proc/sys/kernel/core_pattern") as f:
            return f.read().strip()
    except OSError:
        return None


def in_container() -> Optional[str]:
    """What this process runs in, when it looks like a container ("docker", "podman", "kubernetes",
    "containerd", "lxc"); None on a host (or when nothing says)."""
    for marker, name in (("/.dockerenv", "docker"), ("/run/.containerenv", "podman")):
        if os.path.exists(marker):
            return name
    try:
        with open("/proc/1/cgroup") as f:
            text = f.read()
    except OSError:
        return None
    for word in ("kubepods", "docker", "containerd", "libpod", "lxc"):
        if word in text:
            return {"kubepods": "kubernetes", "libpod": "podman"}.get(word, word)
    return None
