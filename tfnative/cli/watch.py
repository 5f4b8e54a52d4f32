"""``tfnative watch``: a watchdog over a job (launched, or running processes) that reports a hang as it happens.

The loop is ``watch/loop.py``; this module parses the command line into one ``WatchOptions`` and the job.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Optional, Tuple

import click

from ..errors import TfnativeError
from .attach import ScriptCommand
from .util import gdb_options, job_options, run_command, view_options

if TYPE_CHECKING:
    from ..watch.options import WatchTarget

ENV_HELP = ("Watch every process running Python whose environment has KEY=VALUE, e.g. SLURM_JOB_ID=123 "
            "(repeatable: all of them; KEY alone: set to anything).")
SLURM_HELP = ("Watch every Python process of this running Slurm job, on all its nodes (one srun step, a watcher "
              "per node): hung when no node has progressed for --hang-after; a rank lagging the others is named "
              "(--straggler-after); --on-hang kill cancels the job.")


# Everything after SCRIPT (or -m MODULE) is the job's, as python would take it: tfnative's options come first.
@click.command("watch", cls=ScriptCommand, context_settings={"ignore_unknown_options": True,
                                                             "allow_interspersed_args": False})
@click.argument("script", type=click.Path(dir_okay=False), required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--module", "module", hidden=True)  # what ScriptCommand makes of -m MODULE
@click.option("--pid", "-p", "pids", multiple=True, type=int, help="Watch this running process (repeatable).")
@click.option("--children", multiple=True, type=int, metavar="PID",
              help="Watch every descendant of PID that runs Python (repeatable).")
@job_options(ENV_HELP, SLURM_HELP)
@click.option("--node-feed", is_flag=True, hidden=True)  # a node's watcher of --slurm-job: readings to the head
@click.option("--python", "python", default=sys.executable, show_default="the Python running tfnative",
              help="Interpreter that runs SCRIPT.")
@click.option("--hang-after", default=300.0, show_default=True, type=click.FloatRange(min=0.5, max=1e7),
              metavar="S", help="Report a hang when no process of the job has progressed for S seconds.")
@click.option("--interval", type=click.FloatRange(min=0.1, max=3600.0), metavar="S",
              help="Seconds between two readings of the job's counters (default: 5, or a quarter of "
                   "--hang-after where that is less).")
@click.option("--on-hang", type=click.Choice(["report", "kill", "core"]), default="report", show_default=True,
              help="After the hang report: watch on (report again only after progress and other stacks), end "
                   "the job (exit 124), or write a core of every process and watch on.")
@click.option("--out", "out_dir", metavar="DIR",
              help="Write each hang report to DIR: hang-N.txt, hang-N.jsonl, hang-N.html (--on-hang core: the "
                   "cores too); each crash report: crash-N.txt, crash-N.jsonl and its reproducer, crash-N.repro.py "
                   "(checked in a fresh process after the report).")
@click.option("--json", "json_path", metavar="FILE",
              help="Write the latest hang report to FILE: JSON Lines, one 'stack --json' document per process, "
                   "its event of kind \"hang\"; or the latest crash report ('attach --json''s document).")
@click.option("--progress-file", metavar="PATH",
              help="The job's step signal: a file it writes as it makes steps (a log, a step counter). Once its size "
                   "or mtime has moved, the job is hung when it has not moved for --hang-after, whatever its "
                   "processes do (a rank spinning while the others wait for it).")
@click.option("--straggler-after", type=click.FloatRange(min=0.1, max=1e7), metavar="S",
              help="Name (with its stack) a process that has not progressed for S seconds while others of the "
                   "job have.")
@click.option("--no-crash-watch", is_flag=True,
              help="Do not trace the job's processes: a crash then gives only its signal and the exit status, and "
                   "another debugger (gdb, py-spy, 'tfnative stack --pid') may attach to them while they are "
                   "watched. By default every process is traced (PTRACE_SEIZE: nothing is stopped) so that a "
                   "crash gives attach's report: the mixed stack at the fault, the op, TF's log line.")
@click.option("--no-repro-check", is_flag=True,
              help="With --out: write each crash's reproducer, crash-N.repro.py, without running it to check that "
                   "it crashes the same way.")
@view_options("Reports show also threads that run no Python.")
@gdb_options
def watch(script: Optional[str], args: Tuple[str, ...], module: Optional[str], pids: Tuple[int, ...],
          children: Tuple[int, ...], envs: Tuple[str, ...], slurm_job: Optional[str], remote_tfnative: Optional[str],
          node_feed: bool, python: str, hang_after: float, interval: Optional[float],
          on_hang: str, out_dir: Optional[str], json_path: Optional[str], progress_file: Optional[str],
          straggler_after: Optional[float], no_crash_watch: bool, no_repro_check: bool, all_threads: bool,
          native_all: bool, full: bool,
          gdb_path: Optional[str], debuginfod: bool, gdb_log: Optional[str], full_symbols: bool) -> None:
    """Watch a job and report a hang as it happens: every process's stacks, the wait-for graph, the verdict.

    The job: SCRIPT [ARGS] or -m MODULE [ARGS] (started as PYTHON would start it; the watch ends with its exit
    status), or running processes (--pid, --children, --env).  Progress is read from /proc without stopping
    anything (CPU time, wake-ups, the system call each thread waits in; the stacks read without stopping
    where those cannot tell); only a report holds the processes, as 'tfnative stack' does.
    """
    from ..gdb.options import GdbOptions
    from ..snapshot.options import StackOptions
    from ..watch.options import WatchOptions, WatchTarget, interval_for

    stack_opts = StackOptions(all_threads=all_threads, native_all=native_all, full=full, group=all_threads,
                              gdb=GdbOptions(gdb_path=gdb_path, debuginfod=debuginfod, log=gdb_log,
                                             full_symbols=full_symbols))
    opts = WatchOptions(hang_after=hang_after, interval=interval_for(hang_after, interval), on_hang=on_hang,
                        out_dir=out_dir, json_path=json_path, progress_file=progress_file,
                        straggler_after=straggler_after, stack=stack_opts, repro_check=not no_repro_check)
    target = WatchTarget(script=script, module=module, args=list(args), python=python, pids=pids, children=children,
                         envs=envs)
    if slurm_job is not None or remote_tfnative is not None:
        run_command(lambda: _watch_slurm(opts, slurm_job, remote_tfnative, target, not no_crash_watch))
        return
    run_command(lambda: _watch(opts, target, not no_crash_watch, node_feed))


def _watch_slurm(opts: Any, slurm_job: Optional[str], remote: Optional[str], target: WatchTarget,
                 crashes: bool) -> int:
    """``watch --slurm-job JOBID``: the head over every node (``watch/slurmjob.py``)."""
    from ..files import is_stdout
    from ..snapshot.slurm import remote_argv
    from ..watch.slurmjob import watch_slurm

    if slurm_job is None:
        raise TfnativeError("--remote-tfnative goes with --slurm-job")
    if target.script is not None or target.module is not None or target.running:
        raise TfnativeError("--slurm-job finds the job's processes itself: no SCRIPT, -m, --pid, --children or --env")
    _check_interval(opts)
    _check_out_dir(opts.out_dir)
    argv = remote_argv(remote)
    out = sys.stderr if is_stdout(opts.json_path) else sys.stdout
    return watch_slurm(slurm_job, argv, opts, crashes, out, sys.stderr)


def _check_interval(opts: Any) -> None:
    if opts.interval > opts.hang_after:
        raise TfnativeError("--interval %g is longer than --hang-after %g: a hang could not be seen in time"
                            % (opts.interval, opts.hang_after))


def _check_out_dir(out_dir: Optional[str]) -> None:
    if out_dir is None:
        return
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise TfnativeError("--out %s: %s" % (out_dir, exc.strerror or exc)) from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise TfnativeError("--out %s: not a directory this user can write in" % out_dir)


def _watch(opts: Any, target: WatchTarget, crashes: bool = True, node_feed: bool = False) -> int:
    """Check the options against each other, find or start the job (``target``, a ``WatchTarget``), watch it."""
    from ..watch.job import Job
    from ..watch.loop import watch as watch_job

    script, module, args, python = target.script, target.module, list(target.args), target.python
    pids, children, envs = target.pids, target.children, target.envs
    if module is not None:
        args = ([script] if script is not None else []) + args
        script = None
    launched = script is not None or module is not None
    if launched and (pids or children or envs):
        raise TfnativeError("watch runs SCRIPT (or -m MODULE) or watches running processes (--pid, --children, "
                            "--env): not both")
    _check_interval(opts)
    if not launched and not (pids or children or envs):
        raise TfnativeError("missing SCRIPT (or -m MODULE, --pid, --children, --env): what should tfnative watch?")
    if script is not None and not os.path.isfile(script):
        raise TfnativeError("%s: no such file" % script)
    if not launched:
        from ..snapshot.many import targets
        from ..snapshot.process import check_pid

        for pid in pids:
            check_pid(pid)  # gone, not ours, a kernel thread, traced by another: one line now
        roots = targets(pids, children, (), envs)
    if node_feed:
        from ..watch.node import watch_node

        if launched:
            raise TfnativeError("--node-feed watches running processes (--env), not SCRIPT")
        return watch_node(opts, Job(roots), crashes)
    _check_out_dir(opts.out_dir)
    from ..files import is_stdout
    from ..watch.crashwatch import CrashWatch
    from ..watch.loop import HeldTake

    # --json -: the documents on stdout, the text on stderr (as stack --json - has it)
    out, err = (sys.stderr if is_stdout(opts.json_path) else sys.stdout), sys.stderr
    where = opts.files()
    if where is not None:  # the reports go to files: a lost terminal does not end the watch (watch/terminal.py)
        from ..watch.terminal import outliving

        opts.outlive = True
        out, err = outliving(out, err, where)
    # The crash watch is made before the job starts: the watcher's own start-up takes no time from the job's
    caught = CrashWatch(opts, out, err, HeldTake(opts, err)) if crashes else None
    try:
        if module is not None:
            job = Job.launch(python, ["-m", module, *args])
        elif script is not None:
            job = Job.launch(python, [script, *args])
        else:
            job = Job(roots)
        if caught is None:
            return watch_job(job, opts, out, err)
        status = watch_job(job, opts, out, err, caught.plugins())
    finally:
        if caught is not None:
            caught.close()
    # running processes: the watch ends with 0 once all have exited, or with the first crash's status
    return caught.status if status == 0 and not job.launched and caught.status is not None else status
