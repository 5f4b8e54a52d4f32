"""``tfnative doctor --system``: will tfnative work here, and if not, why and what to do.

Each check reads the machine in front of it (``/proc``, the files, ``gdb --version``), never a table of
versions, and answers in one line: ``ok`` and what it found, or ``fix`` and what to do.  A ``note`` is
neither: what the user may want to know.  Each refusal tfnative prints has its check here: gdb missing,
Yama, CAP_SYS_PTRACE, seccomp, a container, where cores go, debuginfod, Python and TensorFlow.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, List, Optional

from ..core import procfs
from ..core.binary.datasyms import data_symbols
from ..core.binary.elf import ElfError
from ..errors import TfnativeError
from .tfinstall import tensorflow_libraries

CAP_SYS_PTRACE = 19
SUPPORTED_PYTHON = re.compile(r"python3\.(1[0-5])$")  # what core/python/pylayout.py reads: 3.10 to 3.15


@dataclass
class Check:
    """One line of the self-check: its topic, "ok", "fix" or "note", and what it found or what to do."""

    topic: str
    status: str
    text: str

    def line(self) -> str:
        return "%-11s %-4s %s" % (self.topic, self.status, self.text)


def check_gdb() -> Check:
    """gdb on PATH, and its version (attach, report and --with-gdb start it; stack and core need it only
    where tfnative's own unwinder steps aside)."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return Check("gdb", "fix", "no gdb on PATH: install it (apt-get install gdb, dnf install gdb); attach and "
                                   "report need it, stack and core use it where CFI runs out")
    try:
        first = subprocess.run([gdb, "--version"], capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("gdb", "fix", "%s does not run: %s" % (gdb, exc))
    m = re.search(r"(\d+)\.(\d+)", first)
    if m and int(m.group(1)) < 10:
        return Check("gdb", "fix", "%s is gdb %s.%s: tfnative's gdb commands need gdb 10 or later (Python API, MI "
                                   "commands in Python)" % (gdb, m.group(1), m.group(2)))
    return Check("gdb", "ok", "%s (%s)" % (gdb, first.strip()))


def check_ptrace() -> Check:
    """Whether this user may trace processes: Yama's scope, CAP_SYS_PTRACE, a seccomp filter."""
    scope = procfs.yama_scope()
    caps = procfs.capabilities(os.getpid())
    has_cap = caps is not None and bool(caps >> CAP_SYS_PTRACE & 1)
    if scope == 3:
        return Check("ptrace", "fix", "Yama ptrace_scope is 3: no process can be traced until reboot")
    if scope == 2 and not has_cap:
        return Check("ptrace", "fix", "Yama ptrace_scope is 2 (admin only): run as root or with CAP_SYS_PTRACE")
    seccomp = _status_field("Seccomp")
    if os.geteuid() == 0 and not has_cap:
        return Check("ptrace", "fix", "root without CAP_SYS_PTRACE (a container?): run it with --cap-add SYS_PTRACE")
    if seccomp == "2" and not has_cap:
        return Check("ptrace", "fix", "a seccomp filter may deny ptrace (Docker's default profile): --cap-add "
                                      "SYS_PTRACE or --security-opt seccomp=unconfined")
    if scope == 1 and not has_cap:
        return Check("ptrace", "note", "Yama ptrace_scope is 1: --pid and stack work only on your descendants; "
                                       "'tfnative attach SCRIPT' always works (it starts the script); for others: "
                                       "sudo sysctl kernel.yama.ptrace_scope=0, or root")
    return Check("ptrace", "ok", "allowed (Yama scope %s%s)" % (
        "none" if scope is None else scope, ", CAP_SYS_PTRACE" if has_cap else ""))


def _status_field(name: str) -> Optional[str]:
    try:
        return procfs.status(os.getpid()).get(name)
    except OSError:
        return None


def check_container() -> Check:
    """A container changes what may be traced (capabilities, seccomp) and where processes are seen."""
    kind = procfs.in_container()
    if kind is None:
        return Check("container", "ok", "none seen (processes of this host are visible)")
    caps = procfs.capabilities(os.getpid())
    if caps is not None and caps >> CAP_SYS_PTRACE & 1:
        return Check("container", "ok", "in %s, with CAP_SYS_PTRACE: the container's processes can be traced" % kind)
    return Check("container", "fix", "in %s: tfnative sees the processes of this container; to trace, the "
                                      "container needs SYS_PTRACE (docker run --cap-add SYS_PTRACE)" % kind)


def check_cores() -> Check:
    """Where a crashing process's core goes: core_pattern, RLIMIT_CORE, systemd-coredump."""
    pattern = procfs.core_pattern()
    soft, _hard = resource.getrlimit(resource.RLIMIT_CORE)
    if pattern is None:
        return Check("cores", "note", "kernel.core_pattern cannot be read")
    if pattern.startswith("|") and "systemd-coredump" in pattern:
        return Check("cores", "ok", "systemd-coredump keeps them: 'coredumpctl dump PID -o core' gives the file "
                                    "for 'tfnative core'")
    if pattern.startswith("|"):
        return Check("cores", "note", "cores go to a helper (%s): see its documentation for where they land; "
                                      "'attach --save-core FILE' writes one itself" % pattern[1:].split()[0])
    if soft == 0:
        return Check("cores", "fix", "RLIMIT_CORE is 0, so no core is written: 'ulimit -c unlimited' in the shell "
                                     "that starts the job (or 'attach --save-core FILE')")
    where = pattern if "/" in pattern else "the process's working directory, as '%s'" % pattern
    return Check("cores", "ok", "written to %s (RLIMIT_CORE %s)" % (
        where, "unlimited" if soft == resource.RLIM_INFINITY else soft))


def check_debuginfod() -> Check:
    """debuginfod: off by default (it can hang for minutes); --debuginfod turns it on."""
    urls = os.environ.get("DEBUGINFOD_URLS")
    if urls:
        return Check("debuginfod", "note", "DEBUGINFOD_URLS is set (%s): tfnative keeps it off unless --debuginfod"
                     % urls.split()[0])
    return Check("debuginfod", "ok", "not configured (tfnative needs none: it reads symbols and CFI itself)")


def check_python(python: str) -> Check:
    """Whether tfnative can read the interpreter's frames: a CPython 3.10 to 3.15 with ``_PyRuntime``."""
    real = os.path.realpath(shutil.which(python) or python)
    name = os.path.basename(real)
    if not SUPPORTED_PYTHON.match(name):
        return Check("python", "fix", "%s is %s: tfnative reads CPython 3.10 to 3.15" % (python, name))
    try:
        found = data_symbols(real, ["_PyRuntime"])
        if not found:
            lib = _libpython(real)
            found = data_symbols(lib, ["_PyRuntime"]) if lib else {}
    except (OSError, ElfError, ValueError) as exc:
        return Check("python", "fix", "%s: cannot read its ELF file: %s" % (real, exc))
    if not found:
        return Check("python", "fix", "%s exports no _PyRuntime: its frames cannot be found (a static, stripped "
                                      "build?)" % real)
    return Check("python", "ok", "%s (%s): its frames can be read" % (real, name))


def _libpython(exe: str) -> Optional[str]:
    """The libpython an interpreter links (a shared build), from ``ldd``; None for a static one."""
    try:
        out = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"=> (\S*libpython3\.\d+\S*\.so\S*)", out)
    return m.group(1) if m else None


def check_tensorflow(python: str) -> Check:
    """The TensorFlow the interpreter would import, and whether its framework library keeps symbols."""
    from .doctor import inspect  # the ELF and DWARF readers: only where the check runs

    try:
        libs = tensorflow_libraries(python)
    except TfnativeError:
        libs = []
    framework = next((p for p in libs if os.path.basename(p).startswith("libtensorflow_framework")), None)
    if framework is None:
        return Check("tensorflow", "note", "%s imports no TensorFlow (or it cannot be found): nothing to check"
                     % python)
    rep = inspect(framework)
    if not rep.can_break_functions:
        return Check("tensorflow", "fix", "%s keeps no symbols: frames show as addresses; see 'tfnative presets'"
                     % framework)
    return Check("tensorflow", "ok", "%s: %s" % (os.path.dirname(framework), rep.verdict or "symbols kept"))


def system_checks(python: str = sys.executable) -> List[Check]:
    """Every check, in the order a user meets their causes."""
    checks: List[Callable[[], Check]] = [check_gdb, check_ptrace, check_container, check_cores, check_debuginfod,
                                         lambda: check_python(python), lambda: check_tensorflow(python)]
    return [c() for c in checks]
