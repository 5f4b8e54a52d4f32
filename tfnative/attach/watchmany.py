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
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, TextIO

from ..core import procfs, ranks
from ..errors import TfnativeError
from ..snapshot.many import NOTHING_FOUND, with_environment

_LET_GO = (130, 143)  # a watch that we ended: it let go of its process


@dataclass
class Watch:
    """One ``attach --pid`` child and the process it watches."""

    pid: int
    name: str  # rank 2, or pid 1234
    words: str  # rank 2 on node vm (slurm job 5, step 0), pid 1234
    proc: Optional[subprocess.Popen] = None


def _who(pid: int) -> Watch:
    sched = ranks.scheduler_of(procfs.environ(pid))
    words = ranks.describe(sched, os.uname().nodename)
    if sched is None or words is None:
        return Watch(pid, "pid %d" % pid, "pid %d" % pid)
    return Watch(pid, "rank %s" % sched["rank"], "%s, pid %d" % (words, pid))


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code - 128).name
    except ValueError:
        return "signal %d" % (code - 128)


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
    lock = threading.Lock()
    ended: List[tuple] = []  # (watch, status), in the order they ended
    done = threading.Condition(lock)

    def pump(w: Watch) -> None:
        assert w.proc is not None and w.proc.stderr is not None
        for raw in w.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with lock:
                err.write("%s: %s\n" % (w.name, line))
                err.flush()
        code = w.proc.wait()
        with done:
            ended.append((w, code))
            done.notify_all()

    threads = []
    for w in watches:
        cmd = [sys.executable, "-m", "tfnative", "attach", "--pid", str(w.pid), *attach_args]
        w.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, start_new_session=True)
        t = threading.Thread(target=pump, args=(w,), name="tfnative-watch-%d" % w.pid, daemon=True)
        t.start()
        threads.append(t)
    with lock:
        err.write("tfnative: watching %d process%s: %s\n" % (len(watches), "" if len(watches) == 1 else "es",
                                                              "; ".join(w.words for w in watches)))
        err.flush()
    first: Optional[tuple] = None
    stopped = False

    def stop_all(sig: int = signal.SIGTERM) -> None:
        for w in watches:
            if w.proc is not None and w.proc.poll() is None:
                try:
                    w.proc.send_signal(sig)
                except ProcessLookupError:
                    pass

    def on_term(signum: int, frame: object) -> None:  # srun ends the step, or the user: let every process go
        nonlocal stopped
        stopped = True
        stop_all()

    old = signal.signal(signal.SIGTERM, on_term)
    if until_eof:
        def read_stdin() -> None:
            # the file descriptor, not sys.stdin: a daemon thread blocked in a buffered reader makes the
            # interpreter abort at exit ("could not acquire lock for <stdin> at interpreter shutdown")
            nonlocal stopped
            seen = b""
            while True:
                try:
                    chunk = os.read(0, 4096)
                except OSError:
                    break
                seen = (seen + chunk)[-64:]
                if not chunk or b"stop\n" in seen:
                    break
            stopped = True
            stop_all()

        threading.Thread(target=read_stdin, name="tfnative-watch-stdin", daemon=True).start()
    try:
        seen = 0
        while True:
            with done:
                while len(ended) == seen:
                    done.wait(0.5)
                news = ended[seen:]
                seen = len(ended)
            for w, code in news:
                if stopped or code in _LET_GO:
                    continue
                if code > 128 and first is None:
                    first = (w, code)
                    with lock:
                        err.write("tfnative: the first to die: %s: %s\n" % (w.words, _signal_name(code)))
                        err.flush()
                    stop_all()
                elif first is None:
                    with lock:
                        err.write("tfnative: %s: its watch ended with status %d; watching the others\n"
                                  % (w.words, code))
                        err.flush()
            if seen == len(watches):
                break
    except KeyboardInterrupt:
        stop_all()
        for w in watches:
            if w.proc is not None:
                w.proc.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
    for t in threads:
        t.join(timeout=30)
    if first is not None:
        return first[1]
    return 143 if stopped else 0


def watch_slurm(job_id: str, remote: Optional[str], attach_args: Sequence[str], err: TextIO) -> int:
    """``tfnative attach --slurm-job JOBID`` (module docstring)."""
    from ..snapshot import slurm

    try:
        argv = shlex.split(remote) if remote is not None else slurm.default_remote()
    except ValueError as exc:
        raise TfnativeError("--remote-tfnative %r: %s" % (remote, exc)) from None
    if not argv:
        raise TfnativeError("--remote-tfnative needs a command")
    slurm.client("srun")
    job = slurm.job_of(job_id)
    cmd = [slurm.client("srun"), "--jobid=%s" % job.id, "--overlap", "-N", str(max(1, len(job.nodes))),
           "--ntasks-per-node=1", "--label", "--kill-on-bad-exit=0", "--job-name=tfnative-attach", "--input=all",
           *argv, "attach", "--env", "SLURM_JOB_ID=%s" % job.numeric, "--until-eof", *attach_args]
    # its own session: a Ctrl-C on the terminal reaches tfnative only, which ends the watches through
    # srun's standard input (--input=all: every task's), closed
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=slurm.client_env(), start_new_session=True)

    def let_go() -> None:
        try:
            assert proc.stdin is not None
            proc.stdin.close()
        except OSError:
            pass

    tasks = [slurm.Node(n) for n in job.nodes]
    own: List[str] = []
    died: List[int] = []
    assert proc.stderr is not None

    def one(line: str) -> None:
        m = slurm.LABEL.match(line)
        if not m:
            if line.strip():
                own.append(line)
            return
        i = int(m.group(1))
        name = tasks[i].name if i < len(tasks) else "task %d" % i
        if i < len(tasks):
            tasks[i].err.append(m.group(2))
        err.write("%s: %s\n" % (name, m.group(2)))
        err.flush()
        if m.group(2).startswith("tfnative: the first to die: ") and not died:
            died.append(_status(m.group(2).rsplit(": ", 1)[-1]))
            if len(tasks) > 1:
                time.sleep(0.5)  # its last lines
                let_go()  # the other nodes' watches

    interrupted = False
    while True:
        try:
            for raw in proc.stderr:
                one(raw.decode("utf-8", "replace").rstrip("\n"))
            break
        except KeyboardInterrupt:
            if interrupted:  # a second Ctrl-C: no more waiting (gdb detaches when its tfnative dies)
                proc.kill()
                proc.wait()
                raise
            interrupted = True
            let_go()  # the watches let their processes go; their last lines are read
    code = proc.wait()
    if interrupted:
        raise KeyboardInterrupt
    if not any(n.err for n in tasks):
        why = slurm.step_refused(job, own)
        raise TfnativeError(why or "srun started no step in job %s (exit %d): %s"
                            % (job.id, code, own[-1] if own else "no message"))
    if died:
        return died[0]
    failed = [n for n in tasks if n.err and not any("tfnative: watching" in ln for ln in n.err)]
    if failed and len(failed) == len(tasks):
        raise TfnativeError(slurm.node_failure(failed[0], argv))
    return 0 if code == 0 else code
