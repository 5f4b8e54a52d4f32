"""The processes ``tfnative watch`` watches: a job it launched (``SCRIPT``, ``-m MODULE``) or running ones.

A launched job is started as ``PYTHON SCRIPT ARGS`` would run from the shell: our child, with our standard
input and outputs, working directory, environment and process group (Ctrl-C at the terminal reaches it as it
reaches us), nothing added to it and no ptrace: no ``PR_SET_PDEATHSIG`` either, so a watcher killed with
SIGKILL leaves it running.  The signals a scheduler sends the watcher (SIGTERM, SIGHUP, SIGUSR1, SIGUSR2) are
passed on to it (``forward``).

Each reading, the job is its roots (the launched process, or the ``--pid``/``--children``/``--env`` ones) that
still run and all their descendants (``processes``); ``family`` says which of them are a process's ancestors
and descendants.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Dict, List, Optional, Sequence, Set, Tuple

import psutil

from ..core import procfs
from ..errors import TfnativeError
from ..sources.ptrace import WNOTHREAD

POLL_S = 0.05  # how often a wait looks for the launched process's end


# Whether this kernel lists a thread's children (CONFIG_PROC_CHILDREN): ``/proc/PID/task/TID/children``.
CHILDREN_FILES = os.path.exists("/proc/%d/task/%d/children" % (os.getpid(), os.getpid()))


class Job:
    """The watched processes (see the module)."""

    def __init__(self, roots: Sequence[int], child: Optional[subprocess.Popen[bytes]] = None) -> None:
        self.roots = list(roots)
        self.child = child
        self.parent: Dict[int, int] = {}  # pid -> its parent's pid, of the last ``processes``

    @classmethod
    def launch(cls, python: str, target: Sequence[str]) -> Job:
        """Start ``python TARGET...`` (``SCRIPT ARGS`` or ``-m MODULE ARGS``) as the shell would."""
        try:
            child = subprocess.Popen([python, *target], close_fds=False)
        except OSError as exc:
            raise TfnativeError("cannot start %s: %s" % (python, exc.strerror or exc)) from None
        return cls([child.pid], child)

    @property
    def launched(self) -> bool:
        return self.child is not None

    def processes(self) -> List[int]:
        """The roots that still run and every descendant of theirs, roots first, each once.  Read from each
        process's ``/proc/PID/task/TID/children`` (``procfs.children``): what it costs grows with the job, not
        with the machine (``psutil``'s ``children`` reads every process of the machine, once per root: with 128
        ranks, 128 walks of the whole process table each interval); psutil where the kernel has no such file."""
        if not CHILDREN_FILES:
            return self._processes_psutil()
        out: Dict[int, None] = {}
        self.parent = {}
        seen: Set[int] = set()
        for root in self.roots:
            if procfs.exited(root):
                continue
            out[root] = None
            todo = [root]
            seen.add(root)
            while todo:
                pid = todo.pop()
                for kid in procfs.children(pid):
                    self.parent.setdefault(kid, pid)
                    if kid in seen:
                        continue
                    seen.add(kid)
                    if not procfs.exited(kid):
                        out[kid] = None
                    todo.append(kid)
        return list(out)

    def _processes_psutil(self) -> List[int]:
        out: Dict[int, None] = {}
        self.parent = {}
        for root in self.roots:
            if procfs.exited(root):
                continue
            out[root] = None
            try:
                kids = psutil.Process(root).children(recursive=True)
            except psutil.Error:
                continue
            for kid in kids:
                try:
                    self.parent[kid.pid] = kid.ppid()
                except psutil.Error:
                    continue
                if not procfs.exited(kid.pid):
                    out[kid.pid] = None
        return list(out)

    def family(self, pid: int) -> Tuple[Set[int], Set[int]]:
        """(ancestors, descendants) of ``pid`` among the job's processes of the last ``processes``."""
        above: Set[int] = set()
        p = self.parent.get(pid)
        while p is not None and p not in above:
            above.add(p)
            p = self.parent.get(p)
        children: Dict[int, List[int]] = {}
        for kid, par in self.parent.items():
            children.setdefault(par, []).append(kid)
        below: Set[int] = set()
        todo = list(children.get(pid, []))
        while todo:
            kid = todo.pop()
            if kid not in below:
                below.add(kid)
                todo.extend(children.get(kid, []))
        return above, below

    def reaped(self) -> Optional[int]:
        """The launched process's return code once it has exited (``Popen``'s: -N for signal N), else None.

        Read with ``waitid(WEXITED | WNOHANG | __WNOTHREAD)`` from this thread, not ``Popen.poll``: where a
        thread of ours traces the process (a crash catcher's ``PTRACE_SEIZE``), a ``waitpid`` here would take
        the ptrace stops meant for that thread; with ``__WNOTHREAD`` only this thread's own child's exit is seen.
        """
        child = self.child
        if child is None or child.returncode is not None:
            return None if child is None else child.returncode
        try:
            # Looked at first (WNOWAIT): where a thread of this process traces the child, the kernel reports its
            # ptrace stops to its parent's waits too, whatever the flags (CLD_TRAPPED: a signal about to be
            # delivered); one taken here would never reach the tracer, and the child would stay stopped.
            result = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT | WNOTHREAD)
            if result is None or result.si_code not in (os.CLD_EXITED, os.CLD_KILLED, os.CLD_DUMPED):
                return None
            result = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | WNOTHREAD)
        except ChildProcessError:  # reaped elsewhere: what Popen knows
            return child.poll()
        if result is None:
            return None
        killed = result.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
        child.returncode = -result.si_status if killed else result.si_status
        return child.returncode

    def ended(self) -> Optional[int]:
        """The exit status once the job has ended (a launched job: its own, 128+N for a signal; running
        processes: 0 once none is left), else None."""
        if self.child is not None:
            code = self.reaped()
            return None if code is None else exit_status(code)
        # processes() is empty exactly when every root has exited: asked several times a second, so without
        # its walk over every process of the machine (psutil's children: most of an idle watcher's CPU)
        return 0 if all(procfs.exited(root) for root in self.roots) else None

    def wait(self, timeout: float) -> Optional[int]:
        """Wait up to ``timeout`` seconds for the job's end (looked at every ``POLL_S``); its status, or None
        when it still runs."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            status = self.ended()
            if status is not None or time.monotonic() >= deadline:
                return status
            time.sleep(min(POLL_S if self.child is not None else 0.2, max(0.0, deadline - time.monotonic())))

    def forward(self, signum: int) -> None:
        """Pass a signal the watcher got on to the launched process (not to running ones: not ours)."""
        if self.child is not None and self.reaped() is None:
            try:
                os.kill(self.child.pid, signum)
            except ProcessLookupError:
                pass

    def end(self, grace: float) -> None:
        """End every process of the job: SIGTERM, then SIGKILL to what is left after ``grace`` seconds."""
        pids = self.processes()
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(not procfs.exited(p) for p in pids):
            self.reaped()  # reap our own child, whose zombie would read "not exited"
            time.sleep(0.05)
        for pid in pids + self.processes():
            if not procfs.exited(pid):
                _signal(pid, signal.SIGKILL)
        if self.child is not None:
            self.wait(10.0)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def exit_status(returncode: int) -> int:
    """Shell convention: the exit code, or 128+N when signal N killed the process."""
    return 128 - returncode if returncode < 0 else returncode
