"""Why the kernel refuses to let us trace or read a process, and what the user can do about it.

Read from ``/proc`` (``core/procfs.py``): another process that traces it (checked first: it refuses
everyone else, root included), Yama's ptrace scope, our capabilities and the target's, a seccomp
filter.  Every mode that meets a refusal (ptrace, ``/proc/PID/mem``, gdb's attach) says the same thing
through ``ptrace_refused_message``.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from ..core import procfs

CAP_SYS_PTRACE = 19


def has_cap_sys_ptrace() -> bool:
    """Whether this process holds CAP_SYS_PTRACE."""
    caps = procfs.capabilities(os.getpid())
    return caps is not None and bool(caps >> CAP_SYS_PTRACE & 1)


MAX_THREADS_ASKED = 100_000  # threads whose tracer a refusal looks up (a process has far fewer)


def other_tracer(pid: int) -> Optional[Tuple[int, int, str]]:
    """Another process that traces ``pid`` or one of its threads: (the thread, the tracer's pid, its name),
    the first thread first; None when none does (or ``pid`` is gone).  A tracer is the one thing that
    makes the kernel refuse ptrace to anyone else, root included: two tfnatives that race to hold the
    same process, a debugger attached."""
    try:
        tids = procfs.tids(pid)
    except OSError:
        return None
    me = os.getpid()
    for tid in sorted(tids, key=lambda t: (t != pid, t))[:MAX_THREADS_ASKED]:
        try:
            tracer = procfs.tracer(pid, tid)
        except (OSError, ValueError):
            continue
        if tracer and tracer != me:
            return tid, tracer, tracer_name(tracer)
    return None


def tracer_name(pid: int) -> str:
    """What to call a tracer: tfnative (``tfnative ...``, ``python -m tfnative ...``), else its command's name."""
    argv = procfs.cmdline(pid)
    if any(os.path.basename(a) == "tfnative" for a in argv[:3]):
        return "tfnative"
    return procfs.comm(pid) or "gone"


def ptrace_refused_message(pid: int, failed: Optional[str] = None) -> str:
    """Why the kernel refused to let us trace or read ``pid``, what failed, and how to fix it."""
    why = "the kernel refused ptrace on %d" % pid
    if failed:
        why += " (%s)" % failed
    held = other_tracer(pid)
    if held is not None:  # first: no other cause is worth naming while another process holds it
        tid, tracer, name = held
        return ("%s: %s is traced by PID %d (%s): a debugger, or another tfnative, holds it; run again once it "
                "has let go" % (why, "process %d" % pid if tid == pid else "its thread %d" % tid, tracer, name))
    scope = procfs.yama_scope()
    if scope == 1:
        fix = ("Yama ptrace_scope is 1 (only a parent may trace): run as root, or "
               "'sudo sysctl kernel.yama.ptrace_scope=0', or start the script with 'tfnative attach'")
    elif scope == 2:
        fix = "Yama ptrace_scope is 2 (admin only): run as root or give gdb CAP_SYS_PTRACE"
    elif scope == 3:
        fix = "Yama ptrace_scope is 3: attaching is disabled until reboot"
    elif not has_cap_sys_ptrace() and os.geteuid() == 0:
        fix = ("tfnative runs as root without CAP_SYS_PTRACE: in a container, run it with --cap-add SYS_PTRACE "
               "(and a seccomp profile that allows ptrace)")
    elif not has_cap_sys_ptrace():
        fix = ("no Yama restriction applies: the process may be protected (not dumpable, setuid) or traced by "
               "another debugger; run tfnative as root")
    elif procfs.status(os.getpid()).get("Seccomp") == "2":
        fix = ("tfnative runs under a seccomp filter (Seccomp: 2 in /proc/self/status) that may deny ptrace, as "
               "Docker's default profile does: run the container with --cap-add SYS_PTRACE (Docker then allows "
               "ptrace) or --security-opt seccomp=unconfined")
    else:
        fix = ("tfnative has CAP_SYS_PTRACE and no Yama restriction applies, so a security module (SELinux, "
               "AppArmor, Landlock, a BPF LSM) or the process's own namespace protects it%s"
               % (" (pid 1 is the system's init)" if pid == 1 else ""))
    missing = missing_capabilities(pid) if scope not in (1, 2, 3) else []
    if missing:
        fix = ("process %d holds capabilities that tfnative lacks (%s), so the kernel denies reading and tracing it"
               "; run tfnative with those capabilities"
               % (pid, ", ".join(missing)))
    return "%s: %s" % (why, fix)


_CAP_NAMES = ("CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE "
              "NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT "
              "SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE "
              "AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ "
              "PERFMON BPF CHECKPOINT_RESTORE").split()


def missing_capabilities(pid: int) -> List[str]:
    """Names (``CAP_...``) of effective capabilities of ``pid`` that this process lacks; [] if unknown.

    The kernel refuses ptrace (and ``/proc/PID/mem``) on a target whose capabilities exceed the tracer's.
    """
    theirs, ours = procfs.capabilities(pid), procfs.capabilities(os.getpid())
    if theirs is None or ours is None:
        return []
    extra = theirs & ~ours
    return ["CAP_" + _CAP_NAMES[b] if b < len(_CAP_NAMES) else "capability %d" % b
            for b in range(64) if extra >> b & 1]
