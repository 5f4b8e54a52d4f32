"""Starting gdb, attaching it to a process, its signal dispositions, the capture command, detaching.

What every mode that drives gdb shares: ``tfnative attach`` (``attach/session.py``), a stack taken
through gdb (``snapshot/withgdb.py``), a core read through gdb (``corefile/withgdb.py``) and the
interactive hand-off (``attach/handoff.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
from typing import Callable, Iterator, List, Optional, Sequence, TextIO, Tuple

import tfnative_gdb

from ..core import procfs
from ..core.model import Capture
from ..errors import GdbDied, GdbError, TargetGone, TfnativeError
from ..sources.permissions import ptrace_refused_message
from ..toolchain import bazelpaths
from .mi import Gdb, find_gdb, mi_quote
from .options import GdbOptions
from .symbols import SymbolLoader

FATAL_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT")
GDBINIT = os.path.join(os.path.dirname(os.path.abspath(tfnative_gdb.__file__)), "gdbinit.py")


TF_BT_SCRIPT = GDBINIT


CAPTURE_TIMEOUT = 600.0  # the first capture may read a lot of debug info


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
        # (docs/design.md, "Fast attach on stock TensorFlow").  Stricter, not looser, than gdb's default:
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


def target_watch(pid: int) -> Callable[[], None]:
    """A ``Gdb.watch`` that ends a wait on gdb with ``TargetGone`` once ``pid`` has exited: gdb may wait for
    a process that exits as it attaches for ever (the leader reports its exit only once gdb has reaped its
    other threads), and its parent cannot reap it meanwhile."""
    def watch() -> None:
        if procfs.exited(pid):
            raise TargetGone(pid)
    return watch


@contextlib.contextmanager
def watching(gdb: Gdb, pid: int) -> Iterator[None]:
    """``target_watch(pid)`` on every wait on ``gdb`` inside the ``with`` (one set already stays); gdb killed
    where the target exits (the kernel then lets the target go, and its parent reaps it)."""
    if gdb.watch is not None:
        yield
        return
    gdb.watch = target_watch(pid)
    try:
        yield
    except TargetGone:
        gdb.kill()
        raise
    finally:
        gdb.watch = None


def attach(gdb: Gdb, pid: int) -> None:
    """Attach ``gdb`` to ``pid`` and wait for the stop; TfnativeError says why the kernel refused,
    ``TargetGone`` that the process exited meanwhile (gdb is killed then: ``watching``)."""
    with watching(gdb, pid):
        _attach(gdb, pid)


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
    except TargetGone:
        raise
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
        if not os.path.basename(procfs.exe(pid)).startswith("ld-linux"):
            return None
        mapped = [m.path for m in procfs.maps(pid) if m.path.startswith("/")]
    except OSError:
        return None
    return next((p for p in mapped if re.fullmatch(r"python3\.\d+d?", os.path.basename(p))), None)


def setup_signals(gdb: Gdb, swallowed: Sequence[str] = ()) -> None:
    """A session's dispositions: every signal passes silently to the target except the fatal ones (stop,
    then passed), and ``swallowed`` (stop, never passed: ``--check-numerics``' own signal)."""
    gdb.console_command("handle all nostop noprint pass")
    for sig in ("SIGINT", "SIGTRAP"):
        # SIGINT from the terminal is the script's own; gdb must not eat it.
        if sig == "SIGINT":
            gdb.console_command("handle SIGINT nostop noprint pass")
    for sig in FATAL_SIGNALS:
        gdb.console_command("handle %s stop print pass" % sig)
    for name in swallowed:
        gdb.console_command("handle %s stop print nopass" % name)


def capture(gdb: Gdb, all_threads: bool, python_only: bool = False, variables: bool = False) -> Capture:
    """The stopped target's mixed stacks as gdb's ``-tfnative-capture`` gives them (read from its JSON).
    Raises GdbError on gdb's error, KeyError/ValueError on an answer that is no capture."""
    arg = " --all-threads" if all_threads else (" --python-threads" if python_only else "")
    if variables:
        arg += " --locals"
    payload = gdb.command("-tfnative-capture" + arg, timeout=CAPTURE_TIMEOUT)
    return Capture.from_json(json.loads(payload["json"]))


def stop_for_detach(gdb: Gdb, pid: Optional[int]) -> None:
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


def detach(gdb: Gdb, running: bool, pid: Optional[int] = None, halt: Optional[Callable[[], None]] = None,
           timeout: float = 10.0) -> None:
    """Detach gdb from its target (brought to a stop first when it runs: by ``halt``, else
    ``stop_for_detach``); nothing of gdb's is left in it.  Never raises: gdb closing detaches it too."""
    if gdb.dead:
        return
    try:
        if running:
            if halt is not None:
                halt()
            else:
                stop_for_detach(gdb, pid)
        gdb.command("-target-detach", timeout=timeout)
    except (TfnativeError, ProcessLookupError):  # GdbError, GdbDied, a halt that timed out
        pass


def source_paths(gdb: Gdb, source_dirs: List[str], err: TextIO) -> None:
    """``directory`` for each --source-dir, and Bazel's relative paths mapped back to the tree."""
    for d in source_dirs:
        gdb.command("-environment-directory %s" % mi_quote(os.path.abspath(d)))
    for old, new in substitutions(source_dirs, err):
        gdb.console_command("set substitute-path %s %s" % (old, new))


def substitutions(source_dirs: List[str], err: TextIO) -> List[Tuple[str, str]]:
    """Bazel's path mappings that gdb's ``set substitute-path`` can carry (no blank or quote in them)."""
    out = []
    for old, new in bazelpaths.substitutions(source_dirs):
        if any(c in old + new for c in " \t\"'\\"):
            err.write("tfnative: warning: cannot map %s to %s in gdb (blank or quote in the path)\n" % (old, new))
            continue
        out.append((old, new))
    return out


def gdb_tail(gdb: Gdb) -> str:
    """gdb's last console lines, to say why it died (``": line | line"``, or "")."""
    lines = [ln.strip() for ln in list(gdb.console)[-3:] if ln.strip()]
    return (": " + " | ".join(lines)) if lines else ""
