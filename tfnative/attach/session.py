"""gdb for a session, and ``tfnative stack``: what every mode that drives gdb shares.

Starting gdb (``start_gdb``), attaching it (``_attach``, with why the kernel
refused), the signal dispositions of a session, the capture command, turning
our own SIGINT/SIGTERM into ``Interrupted``, detaching.  ``tfnative attach``
(a launched script or a running pid) is the loop in ``attachloop.py``;
``run_stack`` is one snapshot of a process someone else started.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, TextIO

import psutil
import tfnative_gdb

from ..core import procfs, ranks
from ..core.model import Capture, NativeFrame
from ..errors import TfnativeError
from ..files import is_stdout
from ..gdb import ops as tfops
from ..gdb.mi import Gdb, GdbDied, GdbError, find_gdb, mi_quote
from ..gdb.symbols import SymbolLoader
from ..output import report, verdict
from ..snapshot import pipeline as snapshot
from ..snapshot import samples as sampling
from ..sources import modules, ptrace, sessionsock
from ..toolchain import bazelpaths
from .tfenv import NUMERICS_SIGNAL, DebugSwitches

FATAL_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT")
NUMERICS_SIGNAL_NAME = "SIG%d" % NUMERICS_SIGNAL  # gdb's name for a real-time signal
GDBINIT = os.path.join(os.path.dirname(os.path.abspath(tfnative_gdb.__file__)), "gdbinit.py")
TF_BT_SCRIPT = GDBINIT
CAPTURE_TIMEOUT = 600.0  # the first capture may read a lot of debug info


class Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class GdbOptions:
    gdb_path: Optional[str] = None
    debuginfod: bool = False
    log: Optional[str] = None
    full_symbols: bool = False


@dataclass
class AttachOptions:
    script: Optional[str]  # None with module
    args: List[str]
    python: str
    module: Optional[str] = None  # -m MODULE, as python -m runs it
    breaks: List[str] = field(default_factory=list)
    break_ops: List[str] = field(default_factory=list)
    source_dirs: List[str] = field(default_factory=list)
    max_hits: int = 1
    all_threads: bool = False
    native_all: bool = False
    json_path: Optional[str] = None
    interactive: bool = False
    full: bool = False
    switches: DebugSwitches = field(default_factory=DebugSwitches)
    gdb: GdbOptions = field(default_factory=GdbOptions)
    op_origins: bool = False  # --op-origins: the script's hook records where each graph op is created
    pid: Optional[int] = None  # --pid: attach to this running process instead of starting a script
    timeout: Optional[float] = None  # --timeout S: a ``timeout`` snapshot after S seconds, then end (exit 124)
    core: Optional[str] = None  # --core FILE: the core at the first fatal signal
    follow_children: bool = False  # --follow-children: every descendant running Python gets a session (follow.py)

    @property
    def target_argv(self) -> List[str]:
        """What follows the interpreter on the command line: ``SCRIPT ARGS`` or ``-m MODULE ARGS``."""
        if self.module is not None:
            return ["-m", self.module, *self.args]
        return [self.script or "", *self.args]


def start_gdb(opts: GdbOptions, source_dirs: Optional[List[str]] = None, die_with_parent: bool = True) -> Gdb:
    exe = find_gdb(opts.gdb_path)
    early = [
        "set debuginfod enabled %s" % ("on" if opts.debuginfod else "off"),
        "set pagination off",
        "set confirm off",
        "set width 0",
        "set height 0",
        "set breakpoint pending on",
        "set print demangle on",
        "set print asm-demangle on",
        # No auto-loaded scripts (pretty-printers, python-gdb.py, libthread_db):
        # the capture needs none of them, and looking for them in every one of a
        # TensorFlow process's libraries is a measurable part of the attach
        # (README, "Fast attach").  Stricter, not looser, than gdb's default:
        # safe-path is untouched.
        "set auto-load off",
    ] + SymbolLoader.early_commands(opts.full_symbols)
    # gcc under Bazel records DW_AT_comp_dir=/proc/self/cwd, and gdb looks for
    # split-DWARF .dwo files relative to its own cwd: run it in the execroot.
    gdb = Gdb(exe, early, debug_log=opts.log, cwd=bazelpaths.gdb_cwd(source_dirs or []),
              die_with_parent=die_with_parent)
    gdb.command("-gdb-set mi-async on")
    gdb.console_command("source %s" % GDBINIT)
    return gdb


def _attach(gdb: Gdb, pid: int) -> None:
    program = loaded_program(pid)
    if program is not None:  # run through the loader: gdb would take ld.so (/proc/PID/exe) for the program
        try:
            gdb.command("-gdb-set exec-file-mismatch off", timeout=CAPTURE_TIMEOUT)
            gdb.command("-file-exec-and-symbols %s" % mi_quote(program), timeout=CAPTURE_TIMEOUT)
        except GdbError:
            pass
    try:
        gdb.command("-target-attach %d" % pid, timeout=CAPTURE_TIMEOUT)
    except GdbError as exc:
        msg = str(exc)
        if "not permitted" in msg or "EPERM" in msg:
            raise TfnativeError(ptrace_refused_message(pid))
        raise TfnativeError("gdb could not attach to %d: %s" % (pid, msg))
    if gdb.wait_event("stopped", CAPTURE_TIMEOUT) is None:
        raise TfnativeError("gdb attached to %d but the process did not stop" % pid)


def loaded_program(pid: int) -> Optional[str]:
    """The interpreter a process runs when it was started through the loader (``ld-linux-x86-64.so.2
    --library-path ... python3.14 script``): /proc/PID/exe names the loader, the mappings the program.
    None for a process started the usual way (or whose files cannot be read)."""
    try:
        if not os.path.basename(os.readlink("/proc/%d/exe" % pid)).startswith("ld-linux"):
            return None
        mapped = [m.path for m in procfs.maps(pid) if m.path.startswith("/")]
    except OSError:
        return None
    return next((p for p in mapped if re.fullmatch(r"python3\.\d+d?", os.path.basename(p))), None)


CAP_SYS_PTRACE = 19


def _has_cap_sys_ptrace() -> bool:
    try:
        return bool(int(procfs.status(os.getpid()).get("CapEff", "0"), 16) >> CAP_SYS_PTRACE & 1)
    except (OSError, ValueError):
        return False


def ptrace_refused_message(pid: int, failed: Optional[str] = None) -> str:
    """Why the kernel refused to let us trace or read ``pid``, what failed, and how to fix it."""
    why = "the kernel refused ptrace on %d" % pid
    if failed:
        why += " (%s)" % failed
    scope = procfs.yama_scope()
    if scope == 1:
        fix = ("Yama ptrace_scope is 1 (only a parent may trace): run as root, or "
               "'sudo sysctl kernel.yama.ptrace_scope=0', or start the script with 'tfnative attach'")
    elif scope == 2:
        fix = "Yama ptrace_scope is 2 (admin only): run as root or give gdb CAP_SYS_PTRACE"
    elif scope == 3:
        fix = "Yama ptrace_scope is 3: attaching is disabled until reboot"
    elif not _has_cap_sys_ptrace() and os.geteuid() == 0:
        fix = ("tfnative runs as root without CAP_SYS_PTRACE: in a container, run it with --cap-add SYS_PTRACE "
               "(and a seccomp profile that allows ptrace)")
    elif not _has_cap_sys_ptrace():
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


def _cap_eff(pid: str) -> Optional[int]:
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        return None
    return None


def missing_capabilities(pid: int) -> List[str]:
    """Names (``CAP_...``) of effective capabilities of ``pid`` that this process lacks; [] if unknown.

    The kernel refuses ptrace (and ``/proc/PID/mem``) on a target whose capabilities exceed the tracer's.
    """
    theirs, ours = _cap_eff(str(pid)), _cap_eff("self")
    if theirs is None or ours is None:
        return []
    extra = theirs & ~ours
    return ["CAP_" + _CAP_NAMES[b] if b < len(_CAP_NAMES) else "capability %d" % b
            for b in range(64) if extra >> b & 1]


def _setup_signals(gdb: Gdb, numerics: bool = False) -> None:
    gdb.console_command("handle all nostop noprint pass")
    for sig in ("SIGINT", "SIGTRAP"):
        # SIGINT from the terminal is the script's own; gdb must not eat it.
        if sig == "SIGINT":
            gdb.console_command("handle SIGINT nostop noprint pass")
    for sig in FATAL_SIGNALS:
        gdb.console_command("handle %s stop print pass" % sig)
    if numerics:
        gdb.console_command("handle %s stop print nopass" % NUMERICS_SIGNAL_NAME)


def capture(gdb: Gdb, all_threads: bool, python_only: bool = False, variables: bool = False) -> Capture:
    """The stopped target's mixed stacks as gdb's ``-tfnative-capture`` gives them (read from its JSON).
    Raises GdbError on gdb's error, KeyError/ValueError on an answer that is no capture."""
    arg = " --all-threads" if all_threads else (" --python-threads" if python_only else "")
    if variables:
        arg += " --locals"
    payload = gdb.command("-tfnative-capture" + arg, timeout=CAPTURE_TIMEOUT)
    return Capture.from_json(json.loads(payload["json"]))


class _SignalGuard:
    """Turn SIGINT/SIGTERM/SIGHUP into an ``Interrupted`` exception in the main thread."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> _SignalGuard:
        self.old = {s: signal.getsignal(s) for s in self.SIGNALS}
        self.count = 0

        def handler(signum: int, frame: Any) -> None:
            self.count += 1
            if self.count == 1:
                raise Interrupted(signum)

        for s in self.SIGNALS:
            signal.signal(s, handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, h in self.old.items():
            signal.signal(s, h)


def _stop_target_for_detach(gdb: Gdb, pid: Optional[int]) -> None:
    """Bring a running target to a stop so that gdb can detach cleanly.

    Not with ``-exec-interrupt``: on Linux gdb sends SIGINT to the target's
    whole process group (ours too) and hands it to the script on detach.  A
    SIGSTOP that gdb swallows (``nopass``) stops it without a trace.
    """
    try:
        if pid is not None:
            gdb.console_command("handle SIGSTOP stop print nopass", timeout=5)
            os.kill(pid, signal.SIGSTOP)
            if gdb.wait_event("stopped", 5) is not None:
                return
        gdb.command("-exec-interrupt --all", timeout=5)
        gdb.wait_event("stopped", 5)
    except (GdbError, GdbDied, ProcessLookupError):
        pass


def _detach(gdb: Gdb, running: bool, pid: Optional[int] = None) -> None:
    if gdb.dead:
        return
    if running:
        _stop_target_for_detach(gdb, pid)
    try:
        gdb.command("-target-detach", timeout=10)
    except (GdbError, GdbDied):
        pass


def _source_paths(gdb: Gdb, source_dirs: List[str], err: TextIO) -> None:
    """``directory`` for each --source-dir, and Bazel's relative paths mapped back to the tree."""
    for d in source_dirs:
        gdb.command("-environment-directory %s" % mi_quote(os.path.abspath(d)))
    for old, new in _substitutions(source_dirs, err):
        gdb.console_command("set substitute-path %s %s" % (old, new))


def _substitutions(source_dirs: List[str], err: TextIO) -> List[tuple]:
    """Bazel's path mappings that gdb's ``set substitute-path`` can carry (no blank or quote in them)."""
    out = []
    for old, new in bazelpaths.substitutions(source_dirs):
        if any(c in old + new for c in " \t\"'\\"):
            err.write("tfnative: warning: cannot map %s to %s in gdb (blank or quote in the path)\n" % (old, new))
            continue
        out.append((old, new))
    return out


def _gdb_tail(gdb: Gdb) -> str:
    lines = [ln.strip() for ln in list(gdb.console)[-3:] if ln.strip()]
    return (": " + " | ".join(lines)) if lines else ""


def _live_threads(pid: int) -> int:
    """``Threads:`` of /proc/PID/status (0 when it cannot be read)."""
    try:
        return int(procfs.status(pid).get("Threads", "0"))
    except (OSError, ValueError):
        return 0


def _argv(proc: psutil.Process) -> List[str]:
    """The command line of ``proc``; of a live thread when the leader is a zombie (it called pthread_exit)."""
    try:
        return proc.cmdline()
    except psutil.ZombieProcess:
        try:
            tids = procfs.tids(proc.pid)
        except ProcessLookupError:
            return []
        return next((argv for argv in (procfs.cmdline(proc.pid, tid) for tid in tids) if argv), [])
    except psutil.NoSuchProcess:
        raise TfnativeError("process %d exited" % proc.pid) from None


def _exited(pid: int) -> None:
    """Raise "process N exited" when ``pid`` has exited (a failure then is not the kernel's or gdb's)."""
    try:
        gone = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE and _live_threads(pid) <= 1
    except psutil.NoSuchProcess:
        gone = True
    except psutil.AccessDenied:
        gone = False
    if gone:
        raise TfnativeError("process %d exited" % pid)


def _live_task(pid: int) -> int:
    """``pid``, or a live thread of it when its leader has exited (``/proc/PID/mem``, maps are gone then)."""
    if procfs.state(pid) != "Z":
        return pid
    try:
        return next((tid for tid in sorted(procfs.tids(pid)) if procfs.state(pid, tid) not in (None, "Z")), pid)
    except ProcessLookupError:
        return pid


def check_pid(pid: int) -> psutil.Process:
    try:
        proc = psutil.Process(pid)
        status = proc.status()
    except psutil.NoSuchProcess:
        raise TfnativeError("no process with pid %d" % pid)
    except psutil.AccessDenied:
        raise TfnativeError("process %d is not yours: %s" % (pid, ptrace_refused_message(pid)))
    if status == psutil.STATUS_ZOMBIE and _live_threads(pid) <= 1:  # a leader gone by pthread_exit: the rest live
        raise TfnativeError("process %d is a zombie: it has exited" % pid)
    if pid == os.getpid():
        raise TfnativeError("tfnative cannot inspect itself")
    try:
        uids = proc.uids()
        if os.geteuid() != 0 and os.geteuid() not in (uids.real, uids.effective):
            raise TfnativeError("process %d belongs to another user: run tfnative as that user or root" % pid)
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("TracerPid:") and int(line.split()[1]) != 0 and not sessionsock.serves(pid):
                    raise TfnativeError("process %d is already being traced by pid %s (another debugger?)"
                                        % (pid, line.split()[1]))
    except (psutil.AccessDenied, OSError):
        pass
    return proc


def run_stack(pid: int, all_threads: bool, native_all: bool, json_path: Optional[str],
              gdb_opts: GdbOptions, err: TextIO, out: TextIO, full: bool = False, with_gdb: bool = False,
              samples: int = 1, interval: float = 1.0, variables: bool = False, group: bool = False,
              nonblocking: bool = False) -> int:
    """``tfnative stack``: mixed stacks of a running process, which runs on afterwards.

    Without gdb when it can (``snapshot.py``: ptrace, CFI, our symbol index),
    else through gdb; ``with_gdb`` asks for gdb.  ``samples`` > 1: that many
    snapshots ``interval`` seconds apart, the last one reported with each
    thread moving or stuck (``samples.py``).  The verdict (``verdict.py``)
    goes to ``err`` and into the JSON document as ``"triage"``.  ``variables``
    (``--locals``): each Python frame's arguments and locals.  ``group``:
    identical thread stacks are printed once (``threadgroups.py``).
    """
    printer = report.Printer(err if is_stdout(json_path) else out, native_all=native_all, full=full,
                             group=group)
    with _SignalGuard():
        try:
            doc = stack_document(pid, all_threads, native_all, gdb_opts, err, with_gdb, samples, interval,
                                 variables=variables, nonblocking=nonblocking)
        except Interrupted:
            printer.note("interrupted: detaching")
            return 130
    event = doc.events[0]
    printer.event(event)
    for line in verdict.verdict_lines(event.triage, event.pid):
        report.write_note(err, line)
    if json_path:
        report.write(doc, json_path)
    return 0


def stack_document(pid: int, all_threads: bool, native_all: bool, gdb_opts: GdbOptions, err: TextIO,
                   with_gdb: bool = False, samples: int = 1, interval: float = 1.0,
                   variables: bool = False, sleep: Callable[[float], None] = time.sleep,
                   nonblocking: bool = False) -> report.Document:
    """The ``stack`` document of ``pid`` (one ``snapshot`` event with its triage; ``host``, ``task``).

    Raises TfnativeError when ``pid`` cannot be read (gone, not ours), ``Interrupted`` on a signal
    (or from ``sleep``, which waits between samples).  Safe to call from several threads at once, each
    for another pid (``multistack.py``).
    """
    proc = check_pid(pid)
    was_stopped = proc.status() == psutil.STATUS_STOPPED
    doc = report.Document(argv=_argv(proc), pid=pid)
    env = procfs.environ(pid)
    tf_config = env.get("TF_CONFIG")
    doc.host = socket.gethostname()
    doc.task = verdict.task_of(tf_config)
    doc.scheduler = ranks.scheduler_of(env)

    def one() -> Capture:
        if nonblocking:
            return _take_nonblocking(pid, all_threads, variables)
        return _take_snapshot(pid, all_threads, gdb_opts, was_stopped, with_gdb, err, variables)

    def say(i: int) -> None:
        err.write("tfnative: sample %d of %d\n" % (i, samples))
        err.flush()

    result = sampling.take(samples, interval, one, sleep=sleep, on_sample=say) if samples > 1 else one()
    if tf_config is None and result.tf_config:  # set by the program itself: its os.environ has it
        tf_config = result.tf_config
        doc.task = verdict.task_of(tf_config)
    event = report.make_event("snapshot", result, native_all=native_all)
    job = verdict.cluster(tf_config) or ranks.cluster_of(env)
    if job:
        event.cluster = job
    event.triage = verdict.triage(event)
    doc.events.append(event)
    doc.triage = event.triage
    return doc


def _take_nonblocking(pid: int, all_threads: bool, variables: bool) -> Capture:
    """``stack --no-pause``: never stops the process, so never through gdb (``snapshot.take_nonblocking``)."""
    try:
        task = _live_task(pid)
        result = snapshot.take_nonblocking(task, "all" if all_threads else "python", variables)
        if not result.threads and not all_threads:
            result = snapshot.take_nonblocking(task, "all", variables)
        result.pid = pid
        return result
    except snapshot.Unsupported as exc:
        _exited(pid)
        raise TfnativeError("--no-pause: cannot read process %d without stopping it: %s" % (pid, exc))


def _take_snapshot(pid: int, all_threads: bool, gdb_opts: GdbOptions, was_stopped: bool, with_gdb: bool,
                   err: TextIO, variables: bool = False) -> Capture:
    """One snapshot of ``pid``: without gdb when it can, else (or with ``with_gdb``) through gdb; from the
    ``attach`` session that holds it, where one does (``sessionsock.py``)."""
    if sessionsock.serves(pid):
        err.write("tfnative: process %d is held by a tfnative attach session: the snapshot comes from it\n" % pid)
        return sessionsock.ask(pid, "all" if all_threads else "python", variables)
    result = None
    if not with_gdb:
        try:
            task = _live_task(pid)  # the process's files, read through a live thread
            result = snapshot.take(task, "all" if all_threads else "python", variables)
            if not result.threads and not all_threads:
                # No Python thread found: show every thread rather than nothing.
                result = snapshot.take(task, "all", variables)
            if task != pid:
                result.pid = pid
                result.warnings.append("the main thread %d has exited (pthread_exit): the live "
                                          "threads are shown" % pid)
        except ptrace.PtraceRefused as exc:
            # gdb's attach would be refused the same way, only slower
            raise TfnativeError(ptrace_refused_message(pid, str(exc)))
        except snapshot.Unsupported as exc:
            _exited(pid)  # gone meanwhile (stack on many processes): say so, not "through gdb"
            err.write("tfnative: taking the snapshot through gdb: %s\n" % exc)
            result = None
        except Interrupted:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not cost the user the snapshot
            if os.environ.get("TFNATIVE_DEBUG"):
                raise
            _exited(pid)  # its /proc files vanished with it: no bug of ours
            err.write("tfnative: taking the snapshot through gdb: tfnative's unwinder failed (%s: %s)\n"
                      % (type(exc).__name__, exc))
            result = None
        finally:
            if not was_stopped:
                _ensure_not_stopped(pid)
    if result is None:
        _exited(pid)
        try:
            result = _stack_with_gdb(pid, all_threads, gdb_opts, was_stopped, err, variables)
        except TfnativeError:
            _exited(pid)
            raise
    return result


def add_memory_facts(gdb: Gdb, result: Capture) -> None:
    """What ``snapshot.stacks`` reads from memory beside the frames (each thread's C++ exception in flight, the
    lock it waits for), for a capture gdb took of a live process: the threads' registers from gdb."""
    if not result.pid:
        return
    try:
        regs = json.loads(gdb.command("-tfnative-registers --all-threads", timeout=CAPTURE_TIMEOUT)["json"])
        memory = ptrace.Memory(result.pid)
    except (GdbError, KeyError, ValueError, OSError):
        return
    try:
        snapshot.add_memory_facts(memory, modules.of_pid(result.pid),
                                  {t["tid"]: t["regs"] for t in regs["threads"]}, result)
    except (KeyError, OSError, MemoryError):
        pass
    finally:
        memory.close()


def _stack_with_gdb(pid: int, all_threads: bool, gdb_opts: GdbOptions, was_stopped: bool,
                    err: TextIO, variables: bool = False) -> Capture:
    gdb = start_gdb(gdb_opts)
    attached = False
    try:
        _attach(gdb, pid)
        attached = True
        loader = SymbolLoader(gdb, pid, [], gdb_opts.full_symbols, err)
        skipped = loader.sync_for_snapshot()
        result = _snapshot(gdb, all_threads, variables)
        if _meets(result, skipped):
            # A frame in a library left without symbols (its return address was
            # not on the stack as read): read them all and look again.
            loader.sync(full_list=True)
            result = _snapshot(gdb, all_threads, variables)
        loader.symbolize(result)
        tfops.annotate(gdb, result)
        result.via = "gdb"
        add_memory_facts(gdb, result)
        return result
    except GdbDied:
        raise TfnativeError("gdb exited unexpectedly%s" % _gdb_tail(gdb), exit_code=3)
    finally:
        if attached:
            _detach(gdb, running=False)
        gdb.close()
        if not was_stopped:
            _ensure_not_stopped(pid)


def _snapshot(gdb: Gdb, all_threads: bool, variables: bool = False) -> Capture:
    result = capture(gdb, all_threads, python_only=not all_threads, variables=variables)
    if not result.threads and not all_threads:
        # No Python thread found: show every thread rather than nothing.
        result = capture(gdb, True, variables=variables)
    return result


def _meets(result: Capture, paths: List[str]) -> bool:
    """Whether a frame of the capture is in one of the libraries ``paths``."""
    names = {os.path.basename(p) for p in paths}
    return any(isinstance(f, NativeFrame) and f.library in names for t in result.threads for f in t.frames)


def _ensure_not_stopped(pid: int) -> None:
    """After a detach the target must run on, whatever happened."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state not in ("t", "T"):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


__all__ = ["AttachOptions", "GdbOptions", "run_stack"]
