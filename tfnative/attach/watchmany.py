"""``tfnative attach --env KEY=VALUE`` and ``--slurm-job JOBID``: the crash watch on every rank of a job.

On one machine (``--env SLURM_JOB_ID=J``): every process running Python whose environment has it
(``multistack.with_environment``) gets its own ``tfnative attach --pid PID`` (the one watch there is:
its own gdb, no trap inserted, the process untouched until a fatal signal), as a child of this one.
Their lines are passed on as they come, each prefixed with the rank its environment names
(``rank 1: ``, ``core/ranks.py``).  The first watched process that dies of a signal ends the watch:
its report (mixed stacks, as ``attach --pid`` prints it) is followed by one line naming it
(``the first to die: rank 1 on node vm (slurm job 5, step 0), pid 4242: SIGSEGV``), the other watches
are ended with SIGTERM (each detaches and leaves its process running), and the exit status is the dead
rank's (128+N).  A process that exits by itself, or a watch that fails, is named and the others go on;
once none is left the status is 0.

On a Slurm job (``--slurm-job J``): one ``srun --jobid=J --overlap`` task per node runs the above with
``--env SLURM_JOB_ID=J`` there; the nodes' lines come back prefixed with the node's name.  When one
node's watch ends with a death, the end of ``srun``'s standard input (``--input=all``: every task's;
the node's watch has ``--until-eof``) ends the watch on the other nodes; so does a Ctrl-C of tfnative
(``srun`` runs in its own session and never sees it), and tfnative's own end, however it comes.  Not a
signal: one handed on by ``srun`` or ``scancel`` reaches every process of the step, the watches' gdbs too
(SIGTERM makes ``srun`` cancel the step, and Slurm kills the watches before they let go).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Sequence, TextIO, Tuple

from ..core import procfs, ranks
from ..core.signals import signal_name
from ..errors import TfnativeError, start_thread
from ..output.render import describe_rank
from ..snapshot.many import NOTHING_FOUND, with_environment

if TYPE_CHECKING:
    from ..snapshot import slurm

_LET_GO = (130, 143)  # a watch that we ended: it let go of its process


@dataclass
class Watch:
    """One ``attach --pid`` child and the process it watches."""

    pid: int
    name: str  # rank 2, or pid 1234
    words: str  # rank 2 on node vm (slurm job 5, step 0), pid 1234
    proc: Optional[subprocess.Popen[bytes]] = None


def _who(pid: int) -> Watch:
    sched = ranks.scheduler_of(procfs.environ(pid))
    words = describe_rank(sched, os.uname().nodename)
    if sched is None or words is None:
        return Watch(pid, "pid %d" % pid, "pid %d" % pid)
    return Watch(pid, "rank %s" % sched["rank"], "%s, pid %d" % (words, pid))


def _status(name: str) -> int:
    """128+N of a signal's name (``SIGSEGV``); 1 for a name that is none."""
    try:
        return 128 + int(signal.Signals[name.strip()])
    except KeyError:
        return 1


def watch_env(envs: Sequence[str], attach_args: Sequence[str], err: TextIO, until_eof: bool = False) -> int:
    """The crash watch on every Python process whose environment has ``envs`` (module docstring).

    ``until_eof``: standard input's end (or a line ``stop``) lets every process go, as SIGTERM does: how
    ``watch_slurm`` ends the watch on a node (a signal handed on by srun or scancel reaches every process of
    the step, the watches' gdbs included)."""
    pids = with_environment(envs)
    if not pids:
        raise TfnativeError("--env %s: no process running Python has that in its environment"
                            % " --env ".join(envs), exit_code=NOTHING_FOUND)
    watches = sorted((_who(p) for p in pids), key=lambda w: (w.name.startswith("pid"), w.name))
    return _Watches(watches, err).run(attach_args, until_eof)


class _Watches:
    """One ``tfnative attach --pid`` per process, their stderr relayed line by line under the process's name;
    the first to die of a signal ends the others' watches."""

    def __init__(self, watches: List[Watch], err: TextIO) -> None:
        self.watches = watches
        self.err = err
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)
        self.ended: List[Tuple[Watch, int]] = []  # (watch, status), in the order they ended
        self.stopped = False  # SIGTERM or the end of standard input: every process let go

    def say(self, text: str) -> None:
        with self.lock:
            self.err.write(text)
            self.err.flush()

    def run(self, attach_args: Sequence[str], until_eof: bool) -> int:
        threads = [self.start(w, attach_args) for w in self.watches]
        self.say("tfnative: watching %d process%s: %s\n" % (
            len(self.watches), "" if len(self.watches) == 1 else "es", "; ".join(w.words for w in self.watches)))
        old = signal.signal(signal.SIGTERM, self.on_term)
        if until_eof:
            start_thread(threading.Thread(target=self.read_stdin, name="tfnative-watch-stdin", daemon=True))
        try:
            first = self.wait_first()
        except KeyboardInterrupt:
            self.stop_all()
            for w in self.watches:
                if w.proc is not None:
                    w.proc.wait()
            raise
        finally:
            signal.signal(signal.SIGTERM, old)
        for t in threads:
            t.join(timeout=30)
        if first is not None:
            return first[1]
        return 143 if self.stopped else 0

    def start(self, w: Watch, attach_args: Sequence[str]) -> threading.Thread:
        cmd = [sys.executable, "-m", "tfnative", "attach", "--pid", str(w.pid), *attach_args]
        w.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, start_new_session=True)
        t = threading.Thread(target=self.pump, args=(w,), name="tfnative-watch-%d" % w.pid, daemon=True)
        start_thread(t)
        return t

    def pump(self, w: Watch) -> None:
        assert w.proc is not None and w.proc.stderr is not None
        for raw in w.proc.stderr:
            self.say("%s: %s\n" % (w.name, raw.decode("utf-8", "replace").rstrip("\n")))
        code = w.proc.wait()
        with self.done:
            self.ended.append((w, code))
            self.done.notify_all()

    def stop_all(self, sig: int = signal.SIGTERM) -> None:
        for w in self.watches:
            if w.proc is not None and w.proc.poll() is None:
                try:
                    w.proc.send_signal(sig)
                except ProcessLookupError:
                    pass

    def on_term(self, signum: int, frame: object) -> None:  # srun ends the step, or the user: let every process go
        self.stopped = True
        self.stop_all()

    def read_stdin(self) -> None:
        # the file descriptor, not sys.stdin: a daemon thread blocked in a buffered reader makes the
        # interpreter abort at exit ("could not acquire lock for <stdin> at interpreter shutdown")
        seen = b""
        while True:
            try:
                chunk = os.read(0, 4096)
            except OSError:
                break
            seen = (seen + chunk)[-64:]
            if not chunk or b"stop\n" in seen:
                break
        self.stopped = True
        self.stop_all()

    def wait_first(self) -> Optional[Tuple[Watch, int]]:
        """Wait for every watch to end; the first whose process died of a signal (the others then let go)."""
        first: Optional[Tuple[Watch, int]] = None
        seen = 0
        while seen < len(self.watches):
            with self.done:
                while len(self.ended) == seen:
                    self.done.wait(0.5)
                news = self.ended[seen:]
                seen = len(self.ended)
            for w, code in news:
                if self.stopped or code in _LET_GO:
                    continue
                if code > 128 and first is None:
                    first = (w, code)
                    self.say("tfnative: the first to die: %s: %s\n" % (w.words, signal_name(code - 128)))
                    self.stop_all()
                elif first is None:
                    self.say("tfnative: %s: its watch ended with status %d; watching the others\n" % (w.words, code))
        return first


def watch_slurm(job_id: str, remote: Optional[str], attach_args: Sequence[str], err: TextIO) -> int:
    """``tfnative attach --slurm-job JOBID`` (module docstring)."""
    from ..snapshot import slurm

    argv = slurm.remote_argv(remote)
    slurm.client("srun")
    job = slurm.job_of(job_id)
    cmd = slurm.srun_command(job, argv, "attach", ["--until-eof", *attach_args], input_all=True)
    # its own session: a Ctrl-C on the terminal reaches tfnative only, which ends the watches through
    # srun's standard input (--input=all: every task's), closed
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=slurm.client_env(), start_new_session=True)
    step = _SlurmStep(proc, [slurm.Node(n) for n in job.nodes], err)
    interrupted = step.read()
    code = proc.wait()
    if interrupted:
        raise KeyboardInterrupt
    tasks = step.tasks
    if not any(n.err for n in tasks):
        why = slurm.step_refused(job, step.own)
        raise TfnativeError(why or "srun started no step in job %s (exit %d): %s"
                            % (job.id, code, step.own[-1] if step.own else "no message"))
    if step.died:
        return step.died[0]
    failed = [n for n in tasks if n.err and not any("tfnative: watching" in ln for ln in n.err)]
    if failed and len(failed) == len(tasks):
        raise TfnativeError(slurm.node_failure(failed[0], argv))
    return 0 if code == 0 else code


class _SlurmStep:
    """The srun step that watches a job's tasks: its lines, shown with their node's name, srun's own lines,
    and the status of the first process to die."""

    def __init__(self, proc: subprocess.Popen[bytes], tasks: List[slurm.Node], err: TextIO) -> None:
        self.proc = proc
        self.tasks = tasks
        self.err = err
        self.own: List[str] = []
        self.died: List[int] = []

    def let_go(self) -> None:
        """Close srun's standard input: the watches let their processes go."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass

    def line(self, task: int, _name: str, text: str) -> None:
        """A task's line of srun's standard error (shown by ``slurm.relay_stderr``): kept with its node; the
        first process to die ends the other nodes' watches."""
        if task < len(self.tasks):
            self.tasks[task].err.append(text)
        if text.startswith("tfnative: the first to die: ") and not self.died:
            self.died.append(_status(text.rsplit(": ", 1)[-1]))
            if len(self.tasks) > 1:
                time.sleep(0.5)  # its last lines
                self.let_go()  # the other nodes' watches

    def read(self) -> bool:
        """Read srun's standard error to its end; True where a Ctrl-C came (the watches then let go)."""
        from ..snapshot import slurm

        assert self.proc.stderr is not None
        interrupted = False
        while True:
            try:
                slurm.relay_stderr(self.proc.stderr, [t.name for t in self.tasks], self.err, self.own, self.line)
                return interrupted
            except KeyboardInterrupt:
                if interrupted:  # a second Ctrl-C: no more waiting (gdb detaches when its tfnative dies)
                    self.proc.kill()
                    self.proc.wait()
                    raise
                interrupted = True
                self.let_go()  # the watches let their processes go; their last lines are read
