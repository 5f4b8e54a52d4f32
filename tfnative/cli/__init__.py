"""Command line: ``tfnative attach``, ``tfnative stack`` (and the build helpers).

Every command turns a ``TfnativeError`` into one line on stderr and a non-zero
exit status; a traceback is shown only with ``TFNATIVE_DEBUG=1``.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import click

from .. import __version__
from ..errors import TfnativeError
from ..files import is_stdout, write_output
from .build import register as register_build
from .core import register as register_core
from .merge import register as register_merge
from .util import gdb_options, run_command

if TYPE_CHECKING:
    from ..attach.session import AttachOptions

_run = run_command  # the error contract (cli/util.py)

# Each command imports what it runs when it runs (the attach loop, gdb's driver, psutil, the snapshot
# path, merge): ``tfnative --version`` and every ``--help`` load click and this package's command
# modules alone (tests/unit/test_startup.py).


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tfnative")
def main() -> None:
    """Native debugging for TensorFlow: one mixed Python + C++ stack, fast."""


ATTACH_CONTEXT = {"ignore_unknown_options": True, "allow_interspersed_args": True}


class ScriptCommand(click.Command):
    """A command that runs ``SCRIPT ARGS`` or, as ``python -m`` does, ``-m MODULE ARGS``.

    ``-m`` counts only where the script would stand (before it, among
    tfnative's options); everything after ``-m MODULE`` goes to the module
    verbatim, as Python gives it.  A ``-m`` after the script is the script's.
    """

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        valued = {name for p in self.params if isinstance(p, click.Option) and not p.is_flag and not p.count
                  for name in p.opts}
        i = 0
        while i < len(args):
            token = args[i]
            if token == "--" or not token.startswith("-") or token == "-":
                break
            if token == "-m" or (token.startswith("-m") and not token.startswith("--")):
                module, rest = (token[2:], args[i + 1:]) if len(token) > 2 else (
                    args[i + 1] if i + 1 < len(args) else "", args[i + 2:])
                if not module:
                    raise click.UsageError("-m needs a module name", ctx)
                args = args[:i] + ["--module", module, "--"] + rest
                break
            i += 2 if token in valued else 1
        return super().parse_args(ctx, args)


def attach_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options of ``attach``, shared with ``report``."""
    options = [
        click.argument("script", type=click.Path(dir_okay=False), required=False),
        click.argument("args", nargs=-1, type=click.UNPROCESSED),
        click.option("--module", "module", hidden=True),  # what ScriptCommand makes of -m MODULE
        click.option("--pid", "pid", type=int, metavar="PID",
                     help="Attach to this running process instead of starting SCRIPT; it runs on afterwards."),
        click.option("--timeout", type=click.FloatRange(min=0.0, min_open=True), metavar="S",
                     help="After S seconds, an all-threads snapshot; then end the script (exit 124) or, "
                          "with --pid, detach."),
        click.option("--follow-children", is_flag=True,
                     help="The breakpoints and the crash watch apply to every descendant that runs Python too "
                          "(multiprocessing, subprocess); each event names its process."),
        click.option("--break", "breaks", multiple=True, metavar="LOCATION",
                     help="Breakpoint: a C/C++ function, FILE:LINE or *ADDRESS (repeatable; pending until loaded)."),
        click.option("--break-op", "break_ops", multiple=True, metavar="TYPE",
                     help="Stop in the CPU kernel of every op of this type, e.g. MatMul (repeatable)."),
        click.option("--check-numerics", is_flag=True,
                     help="tf.debugging.enable_check_numerics in the script: stop at the first NaN/Inf, "
                          "with the op and where it was created."),
        click.option("--numerics-no-xla", is_flag=True,
                     help="With --check-numerics: run the functions made with jit_compile=True without XLA, so "
                          "that their ops are checked too (XLA-compiled functions are not instrumented)."),
        click.option("--op-origins", is_flag=True,
                     help="Record where each op traced into a graph is created (a hook in the script), so that a "
                          "--break-op hit or a crash in a kernel says which of your lines made its op."),
        click.option("--source-dir", "source_dirs", multiple=True, type=click.Path(),
                     help="Add a gdb source directory (repeatable)."),
        click.option("--python", "python", default=sys.executable, show_default="the Python running tfnative",
                     help="Interpreter that runs SCRIPT."),
        click.option("--max-hits", default=1, show_default=True, type=click.IntRange(min=1),
                     help="Report this many hits, then remove the breakpoints and let the script run."),
        click.option("--all-threads", is_flag=True, help="Report every thread at each stop."),
        click.option("--native-all", is_flag=True,
                     help="Keep interpreter glue frames (vectorcall, PyObject_Call...)."),
        click.option("--full", is_flag=True, help="Do not fold runs of TensorFlow-internal frames in the text."),
        click.option("--json", "json_path", metavar="FILE", help="Write the whole session as JSON to FILE."),
        click.option("--vlog", type=click.IntRange(min=0), metavar="N",
                     help="TF C++ verbose logging: TF_CPP_MAX_VLOG_LEVEL=N (and TF_CPP_MIN_LOG_LEVEL=0)."),
        click.option("--vmodule", metavar="M=N,...", help="TF_CPP_VMODULE, e.g. executor=1 logs every node run."),
        click.option("--dump-graphs", metavar="DIR",
                     help="Dump GraphDefs: TF_DUMP_GRAPH_PREFIX=DIR, NAME_FILTER='*'."),
        click.option("--dump-xla", metavar="DIR",
                     help="Dump XLA HLO: XLA_FLAGS+=--xla_dump_to=DIR --xla_dump_hlo_as_text."),
        gdb_options,
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _attach_opts(script: Optional[str], module: Optional[str], args: List[str], breaks: List[str],
                 break_ops: List[str], check_numerics: bool, op_origins: bool,
                 source_dirs: List[str], python: str,
                 max_hits: int, all_threads: bool, native_all: bool, full: bool, json_path: Optional[str],
                 vlog: Optional[int], vmodule: Optional[str], dump_graphs: Optional[str], dump_xla: Optional[str],
                 gdb_path: Optional[str], debuginfod: bool, gdb_log: Optional[str], full_symbols: bool,
                 interactive: bool = False, pid: Optional[int] = None, timeout: Optional[float] = None,
                 core: Optional[str] = None, follow_children: bool = False,
                 numerics_no_xla: bool = False) -> AttachOptions:
    from ..attach.session import AttachOptions, GdbOptions
    from ..attach.tfenv import DebugSwitches

    for text in list(breaks) + list(source_dirs) + list(break_ops):
        if "\n" in text or "\r" in text:
            raise TfnativeError("no newlines in --break, --break-op or --source-dir values: %r" % text)
    for loc in breaks:
        if re.search(r"\.pyw?:\d+$", loc):
            raise TfnativeError("--break %s is a Python line; --break takes native locations (a C/C++ function, "
                                "FILE:LINE of C/C++ source, *ADDRESS). For a Python line use breakpoint() or pdb; "
                                "to stop in the native code under it, --break the function it calls or --break-op "
                                "the op it runs" % loc)
    if numerics_no_xla and not check_numerics:
        raise TfnativeError("--numerics-no-xla goes with --check-numerics")
    if core is not None and (is_stdout(core) or not core.strip() or "\n" in core):
        raise TfnativeError("--core needs a file name (not '-': a core is binary)")
    if pid is not None:
        _check_pid_options(script, module, args, check_numerics=check_numerics, op_origins=op_origins, vlog=vlog,
                           vmodule=vmodule, dump_graphs=dump_graphs, dump_xla=dump_xla)
    elif module is not None:
        args = ([script] if script is not None else []) + list(args)  # all of it is the module's
        script = None
    elif script is None:
        raise TfnativeError("missing SCRIPT (or -m MODULE): what should tfnative run?")
    return AttachOptions(
        script=script, module=module, args=list(args), python=python, breaks=list(breaks), break_ops=list(break_ops),
        source_dirs=list(source_dirs),
        max_hits=max_hits, all_threads=all_threads, native_all=native_all, json_path=json_path,
        interactive=interactive, full=full,
        switches=DebugSwitches(vlog=vlog, vmodule=vmodule, dump_graphs=dump_graphs, dump_xla=dump_xla,
                               check_numerics=check_numerics, numerics_no_xla=numerics_no_xla),
        op_origins=op_origins, pid=pid, timeout=timeout, core=core, follow_children=follow_children,
        gdb=GdbOptions(gdb_path=gdb_path, debuginfod=debuginfod, log=gdb_log, full_symbols=full_symbols),
    )


def _check_pid_options(script: Optional[str], module: Optional[str], args: List[str], **launch_only: Any) -> None:
    """``--pid`` takes a running process: no script, and none of the options that set up a launch."""
    if script is not None or module is not None or args:
        raise TfnativeError("--pid attaches to a running process: give it no SCRIPT, -m MODULE or arguments")
    given = [name for name, value in launch_only.items() if value]
    if given:
        raise TfnativeError("--%s sets up a script that tfnative starts; a running process (--pid) has started"
                            % given[0].replace("_", "-"))


@main.command(cls=ScriptCommand, context_settings=ATTACH_CONTEXT)
@attach_options
@click.option("--interactive", is_flag=True,
              help="At the first hit (or fatal signal) hand the stopped script to gdb on this terminal, with tf-bt.")
@click.option("--core", "core", metavar="FILE",
              help="At a fatal signal, before the process dies, write its core to FILE (tfnative core FILE reads it).")
@click.option("--env", "envs", multiple=True, metavar="KEY=VALUE",
              help="Watch every process running Python whose environment has KEY=VALUE (e.g. SLURM_JOB_ID=123) "
                   "for a fatal signal; the first that dies is reported with its rank.")
@click.option("--slurm-job", "slurm_job", metavar="JOBID",
              help="The crash watch on every Python process of this running Slurm job, on every node (one "
                   "'srun --overlap' task per node); the first rank that dies is reported.")
@click.option("--remote-tfnative", metavar="CMD",
              help="With --slurm-job: how the nodes run tfnative (default: this Python, -m tfnative).")
@click.option("--until-eof", is_flag=True, hidden=True)  # --env on a node of --slurm-job: stdin's end lets go
def attach(interactive: bool, envs: Tuple[str, ...], slurm_job: Optional[str], remote_tfnative: Optional[str],
           until_eof: bool, **kw: Any) -> None:
    """Run SCRIPT [ARGS] (or attach to --pid PID) under gdb; a mixed stack at each breakpoint hit or fatal signal.

    tfnative's options may come before or after SCRIPT; the script gets every
    argument tfnative does not know, and everything after "--" verbatim.
    Reports go to stderr; the script's own output is untouched.  tfnative's exit
    status is the script's (128+N when signal N killed it).
    """
    if envs or slurm_job is not None or remote_tfnative is not None:
        _run(lambda: _watch_many(envs, slurm_job, remote_tfnative, interactive, kw, until_eof))
        return

    def go() -> int:
        from ..attach.attachloop import run_attach

        return run_attach(_attach_opts(interactive=interactive, **kw), sys.stderr)

    _run(go)


_WATCH_PASSED = ("all_threads", "native_all", "full")  # attach's options that --env/--slurm-job hand on


def _watch_many(envs: Tuple[str, ...], slurm_job: Optional[str], remote: Optional[str], interactive: bool,
                kw: Dict[str, Any], until_eof: bool = False) -> int:
    """``attach --env``/``--slurm-job``: the crash watch on many processes (``attach/watchmany.py``)."""
    from ..attach.watchmany import watch_env, watch_slurm

    if envs and slurm_job is not None:
        raise TfnativeError("--env and --slurm-job: give one (--slurm-job watches the job's processes on every "
                            "node)")
    if remote is not None and slurm_job is None:
        raise TfnativeError("--remote-tfnative goes with --slurm-job")
    defaults = {"python": sys.executable, "max_hits": 1}  # the options that are never empty
    given = [name for name, value in kw.items()
             if name not in _WATCH_PASSED and value and (name not in defaults or value != defaults[name])]
    if interactive:
        given.append("interactive")
    if given:
        opts = {p.name: max(p.opts, key=len) for p in click.get_current_context().command.params}
        shown = opts.get(given[0], given[0]) if given[0] not in ("script", "args") else "a SCRIPT"
        raise TfnativeError("%s: with --env or --slurm-job attach only watches for a fatal signal (options "
                            "handed on: --all-threads, --native-all, --full)" % shown)
    args = ["--%s" % name.replace("_", "-") for name in _WATCH_PASSED if kw.get(name)]
    if slurm_job is not None:
        return watch_slurm(slurm_job, remote, args, sys.stderr)
    return watch_env(envs, args, sys.stderr, until_eof=until_eof)


@main.command(cls=ScriptCommand, context_settings=ATTACH_CONTEXT)
@attach_options
@click.option("--output", "-o", "output", default="tfnative-report.md", show_default=True, metavar="FILE",
              help="Where to write the Markdown report (- for stdout).")
@click.option("--core", "core_path", metavar="CORE",
              help="Report on a core dump instead of running SCRIPT (SCRIPT is then the executable, optional).")
@click.option("--sysroot", metavar="DIR", help="With --core: prefix every mapped path with DIR.")
@click.option("--save-core", "core", metavar="FILE",
              help="At a fatal signal of the session, write the process's core to FILE (the report names it).")
def report(output: str, core_path: Optional[str], sysroot: Optional[str], **kw: Any) -> None:
    """Like attach, then write a Markdown bug report (versions, command, stacks, dumps, libraries).

    Ready to paste into a TensorFlow issue.  The exit status is the script's.
    With --core CORE [EXECUTABLE]: the report of a crashed process from its core dump.
    """
    def go() -> int:
        if core_path is not None:
            from .core import run_core_report

            code = run_core_report(core_path, kw.get("script"), sysroot, output)
            if not is_stdout(output):
                click.echo("tfnative: report written to %s" % output, err=True)
            return code

        from ..attach.attachloop import run_attach
        from ..gdb.mi import find_gdb
        from ..output import bugreport  # the doctor's ELF readers: not on attach's path

        opts = _attach_opts(**kw)
        docs: List[Any] = []
        code = run_attach(opts, sys.stderr, keep=docs)
        env = opts.switches.environment(dict(os.environ))
        text = bugreport.markdown(docs[0], [os.path.basename(sys.argv[0]) or "tfnative"] + sys.argv[1:],
                                  bugreport.versions(opts.python, find_gdb(opts.gdb.gdb_path), env),
                                  bugreport.library_verdicts(opts.python), code)
        write_output(output, text.encode())
        if not is_stdout(output):
            click.echo("tfnative: report written to %s" % output, err=True)
        return code

    _run(go)


def _refuse(message: str) -> None:
    raise TfnativeError(message)


@main.command()
@click.option("--pid", "-p", "pids", multiple=True, type=int, help="Process to inspect (repeatable).")
@click.option("--children", multiple=True, type=int, metavar="PID",
              help="Every descendant of PID that runs Python (repeatable).")
@click.option("--match", "patterns", multiple=True, metavar="REGEX",
              help="Every process running Python whose command line matches REGEX (repeatable).")
@click.option("--env", "envs", multiple=True, metavar="KEY=VALUE",
              help="Every process running Python whose environment has KEY=VALUE, e.g. SLURM_JOB_ID=123 "
                   "(repeatable: all of them; KEY alone: set to anything).")
@click.option("--slurm-job", "slurm_job", metavar="JOBID",
              help="Every Python process of this running Slurm job, on every node of its allocation (one "
                   "'srun --overlap' task per node), merged as 'tfnative merge' prints them.")
@click.option("--remote-tfnative", metavar="CMD",
              help="With --slurm-job: how the nodes run tfnative (default: this Python, -m tfnative).")
@click.option("--folded", is_flag=True, help="With --slurm-job: flamegraph folded stacks instead of the tree.")
@click.option("--documents", metavar="FILE",
              help="With --slurm-job: also write every process's document (JSON Lines) to FILE.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="Add to each document's \"labels\" (repeatable); merge names a process by it.")
@click.option("--all-threads", "-a", is_flag=True, help="Also threads that run no Python.")
@click.option("--no-group", is_flag=True, help="With --all-threads, print each thread even where stacks are identical.")
@click.option("--native-all", is_flag=True, help="Keep interpreter glue frames.")
@click.option("--full", is_flag=True, help="Do not fold runs of TensorFlow-internal frames in the text report.")
@click.option("--json", "json_path", metavar="FILE",
              help="Write the snapshot as JSON to FILE (- for stdout; the text then goes to stderr); "
                   "several processes: JSON Lines, one document per process; --slurm-job: the merged tree "
                   "as 'merge --json' writes it.")
@click.option("--with-gdb", is_flag=True,
              help="Take the snapshot through gdb (slower): source lines and inlined frames from every debug "
                   "file, libc's included. Implied by --gdb, --gdb-log and --full-symbols.")
@click.option("--samples", default=1, show_default=True, type=click.IntRange(min=1, max=1000), metavar="N",
              help="Take N snapshots and report the last, each thread marked moving or stuck.")
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(min=0.0, max=3600.0),
              metavar="S", help="Seconds between two samples.")
@click.option("--locals", "variables", is_flag=True,
              help="Show each Python frame's arguments and locals (short reprs read from memory; no code runs).")
@click.option("--no-pause", "--nonblocking", "no_pause", is_flag=True,
              help="Never stop the process (no ptrace): each thread read twice, one that changed meanwhile "
                   "marked inconsistent; native frames only of threads blocked in the kernel, cut where rsp "
                   "and rip no longer suffice (docs/design.md).")
@gdb_options
def stack(pids: Tuple[int, ...], children: Tuple[int, ...], patterns: Tuple[str, ...], envs: Tuple[str, ...],
          slurm_job: Optional[str], remote_tfnative: Optional[str], folded: bool, documents: Optional[str],
          labels: Tuple[str, ...], all_threads: bool, no_group: bool, native_all: bool, full: bool,
          json_path: Optional[str], with_gdb: bool, samples: int, interval: float, variables: bool, no_pause: bool,
          gdb_path: Optional[str], debuginfod: bool, gdb_log: Optional[str], full_symbols: bool) -> None:
    """Print the mixed stacks of running (hung?) processes and why they may not progress; they run on afterwards.

    One --pid: that process.  Several --pid, --children, --match or --env: each process concurrently, a
    text block each (JSON Lines with --json); exit status 0 when at least one could be read.  --slurm-job
    JOBID: every Python process of a running Slurm job on all its nodes, as one merged tree.
    """
    from ..attach.session import GdbOptions

    gdb = GdbOptions(gdb_path=gdb_path, debuginfod=debuginfod, log=gdb_log, full_symbols=full_symbols)
    with_gdb = with_gdb or bool(gdb_path or gdb_log or full_symbols or debuginfod)
    group = all_threads and not no_group
    if slurm_job is not None:
        node_args = (["--all-threads"] if all_threads else []) + (["--with-gdb"] if with_gdb else [])
        if samples > 1:
            node_args += ["--samples", str(samples), "--interval", str(interval)]

        def slurm() -> int:
            from ..snapshot.slurm import run_slurm_stack

            if pids or children or patterns or envs or labels:
                raise TfnativeError("--slurm-job finds the job's processes itself: no --pid, --children, --match, "
                                    "--env or --label with it")
            if variables or gdb_path or gdb_log or full_symbols or debuginfod:
                raise TfnativeError("--slurm-job takes no --locals or gdb options (the merged view has no place "
                                    "for them)")
            return run_slurm_stack(slurm_job, remote_tfnative, node_args, all_threads, json_path, folded, documents,
                                   sys.stderr, sys.stdout)

        _run(slurm)
        return
    if remote_tfnative is not None or folded or documents is not None:
        def refuse() -> None:
            raise TfnativeError("--remote-tfnative, --folded and --documents go with --slurm-job")

        _run(refuse)
        return
    if no_pause and with_gdb:
        _run(lambda: _refuse("--no-pause reads without gdb: gdb would stop the process (--with-gdb, --gdb, "
                             "--gdb-log, ...)"))
    if no_pause and (children or patterns or labels or envs or len(pids) != 1):
        _run(lambda: _refuse("--no-pause takes one --pid"))
    if len(pids) == 1 and not (children or patterns or labels or envs):
        from ..attach.session import run_stack

        _run(lambda: run_stack(pids[0], all_threads, native_all, json_path, gdb, sys.stderr, sys.stdout, full=full,
                               with_gdb=with_gdb, samples=samples, interval=interval, variables=variables,
                               group=group, nonblocking=no_pause))
        return
    from ..snapshot.many import run_many

    _run(lambda: run_many(pids, children, patterns, labels, all_threads, native_all, json_path, gdb, sys.stderr,
                          sys.stdout, full=full, with_gdb=with_gdb, samples=samples, interval=interval,
                          variables=variables, group=group, envs=envs))


register_build(main)  # the build helpers (presets, bazelrc, doctor) live in cli/build.py
register_core(main)  # tfnative core (post-mortem) lives in cli/core.py
register_merge(main)  # tfnative merge lives in cli/merge.py

if __name__ == "__main__":  # pragma: no cover
    main()
