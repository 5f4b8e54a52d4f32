"""``tfnative attach`` and ``tfnative report``: a script (or ``--pid``) under gdb, and the Markdown bug report.

The command line becomes one ``AttachOptions`` here (``options_of``); the session
is ``attach/session.py``; many processes' crash watch is ``attach/watchmany.py``.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import click

from ..errors import TfnativeError, shown
from ..files import is_stdout, write_output
from .util import gdb_options, job_options, repro_minimize, repro_options, repro_path, run_command

if TYPE_CHECKING:
    from ..attach.options import AttachOptions
    from ..core.model import Document, Event

_run = run_command  # the error contract (cli/util.py)


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
    options: List[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
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
        click.option("--break-throw", "break_throw", is_flag=False, flag_value="any", default=None,
                     metavar="[TYPE]",
                     help="Stop where a C++ exception of this class is thrown (e.g. std::out_of_range); with no "
                          "TYPE (--break-throw=any), at any throw but pybind11's error_already_set (Python "
                          "exceptions crossing C++, thrown and caught while TensorFlow imports)."),
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
        click.option("--locals", "variables", is_flag=True,
                     help="At each stop, show each Python frame's arguments and locals, and those of your own "
                          "kernel's frames where its library has DWARF."),
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


def _break_throw(value: Optional[str]) -> Optional[str]:
    """``--break-throw``'s value: None (not given), "" (any type) or the class name, checked here."""
    if value is None:
        return None
    if value == "any":
        return ""
    if value.endswith((".py", ".pyw")) or os.path.isfile(value):
        raise TfnativeError("--break-throw %s: that is a file, not a C++ type; give a type (--break-throw "
                            "std::out_of_range SCRIPT) or, for any type, --break-throw=any SCRIPT" % shown(value))
    from ..gdb.breakpoints import mangled_type
    mangled_type(value)  # one clear line for a name that is no class name
    return value


def options_of(kw: Dict[str, Any]) -> AttachOptions:
    """The ``AttachOptions`` of the command line's values (click's keyword arguments), checked against each other."""
    from ..attach.options import AttachOptions
    from ..attach.tfenv import DebugSwitches
    from ..gdb.options import GdbOptions

    script, module, args = kw.get("script"), kw.get("module"), list(kw.get("args", ()))
    breaks, break_ops, source_dirs = list(kw["breaks"]), list(kw["break_ops"]), list(kw["source_dirs"])
    check_numerics = bool(kw["check_numerics"])
    save_core = kw.get("save_core") or kw.get("core")
    if kw.get("core") and kw.get("save_core"):
        raise TfnativeError("--core FILE is the old spelling of --save-core FILE: give one")
    if kw.get("core"):
        click.echo("tfnative: note: attach --core FILE is now --save-core FILE (--core reads a core: report --core, "
                   "tfnative core)", err=True)
    for option, values in (("--break", breaks), ("--break-op", break_ops), ("--source-dir", source_dirs)):
        for text in values:
            if not text.isprintable():
                raise TfnativeError("%s %s: no newlines or other control characters in it" % (option, shown(text)))
            if not text.strip():
                raise TfnativeError("%s needs a value: %r is blank" % (option, text))
    for loc in breaks:
        if re.search(r"\.pyw?:\d+$", loc):
            raise TfnativeError("--break %s is a Python line; --break takes native locations (a C/C++ function, "
                                "FILE:LINE of C/C++ source, *ADDRESS). For a Python line use breakpoint() or pdb; "
                                "to stop in the native code under it, --break the function it calls or --break-op "
                                "the op it runs" % loc)
    break_throw = _break_throw(kw.get("break_throw"))
    if kw["numerics_no_xla"] and not check_numerics:
        raise TfnativeError("--numerics-no-xla goes with --check-numerics")
    if save_core is not None and (is_stdout(save_core) or not save_core.strip() or "\n" in save_core):
        raise TfnativeError("--save-core needs a file name (not '-': a core is binary)")
    if kw.get("pid") is not None:
        _check_pid_options(script, module, args, check_numerics=check_numerics, op_origins=kw["op_origins"],
                           vlog=kw["vlog"], vmodule=kw["vmodule"], dump_graphs=kw["dump_graphs"],
                           dump_xla=kw["dump_xla"])
    elif module is not None:
        args = ([script] if script is not None else []) + list(args)  # all of it is the module's
        script = None
    elif script is None:
        raise TfnativeError("missing SCRIPT (or -m MODULE): what should tfnative run?")
    return AttachOptions(
        script=script, module=module, args=args, python=kw["python"], breaks=breaks, break_ops=break_ops,
        break_throw=break_throw,
        source_dirs=source_dirs, max_hits=kw["max_hits"], all_threads=kw["all_threads"], native_all=kw["native_all"],
        json_path=kw["json_path"], interactive=bool(kw.get("interactive")), full=kw["full"],
        switches=DebugSwitches(vlog=kw["vlog"], vmodule=kw["vmodule"], dump_graphs=kw["dump_graphs"],
                               dump_xla=kw["dump_xla"], check_numerics=check_numerics,
                               numerics_no_xla=kw["numerics_no_xla"]),
        op_origins=kw["op_origins"], pid=kw.get("pid"), timeout=kw.get("timeout"), save_core=save_core,
        follow_children=kw["follow_children"], variables=bool(kw.get("variables")),
        gdb=GdbOptions(gdb_path=kw["gdb_path"], debuginfod=kw["debuginfod"], log=kw["gdb_log"],
                       full_symbols=kw["full_symbols"]),
    )


def _check_pid_options(script: Optional[str], module: Optional[str], args: List[str], **launch_only: Any) -> None:
    """``--pid`` takes a running process: no script, and none of the options that set up a launch."""
    if script is not None or module is not None or args:
        raise TfnativeError("--pid attaches to a running process: give it no SCRIPT, -m MODULE or arguments")
    given = [name for name, value in launch_only.items() if value]
    if given:
        raise TfnativeError("--%s sets up a script that tfnative starts; a running process (--pid) has started"
                            % given[0].replace("_", "-"))


@click.command(cls=ScriptCommand, context_settings=ATTACH_CONTEXT)
@attach_options
@click.option("--interactive", is_flag=True,
              help="At the first hit (or fatal signal) hand the stopped script to gdb on this terminal, with tf-bt.")
@click.option("--save-core", "save_core", metavar="FILE",
              help="At a fatal signal, before the process dies, write its core to FILE (tfnative core FILE reads it).")
@click.option("--core", "core", metavar="FILE", hidden=True)  # the old spelling of --save-core (a note says so)
@repro_options
@job_options("Watch every process running Python whose environment has KEY=VALUE (e.g. SLURM_JOB_ID=123) "
             "for a fatal signal; the first that dies is reported with its rank.",
             "The crash watch on every Python process of this running Slurm job, on every node (one "
             "'srun --overlap' task per node); the first rank that dies is reported.")
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

    repro, repro_check = repro_path(kw.pop("repro", None)), not kw.pop("no_repro_check", False)
    shrink = [kw.pop(k) for k in ("repro_minimize", "repro_minimize_tries", "repro_minimize_seconds")]

    def go() -> int:
        from ..attach.run import run_attach

        minimize = repro_minimize(shrink[0], shrink[1], shrink[2], repro, repro_check)
        opts = options_of(dict(kw, interactive=interactive))
        if repro is not None:
            _with_repro(opts, repro, repro_check, minimize)
        else:
            opts.on_document = _repro_hint
        return run_attach(opts, sys.stderr)

    _run(go)


def _repro_hint(doc: Document) -> None:
    """Without --repro: a crash that gives a reproducer says how to get it (one line)."""
    from ..attach import repro

    line = repro.hint(doc)
    if line is not None:
        sys.stderr.write(line + "\n")


def _with_repro(opts: AttachOptions, path: str, run_check: bool, minimize: Optional[Tuple[int, float]]) -> None:
    """--repro FILE: the capture reads inputs whole (for FILE.npz), and the driver writes the reproducer of a
    fatal signal before the document is written (``attach/repro.py``)."""
    from ..attach import repro
    from ..attach.reprominimize import Bounds
    from ..core.tensorflow.kernelinputs import read_whole_tensors

    read_whole_tensors()
    scripts = [0]  # the scripts named so far: FILE, then FILE.2... (attach/repro.numbered)
    naming = threading.Lock()  # --follow-children: each child's session on a thread of its own

    def python_of(doc: Document) -> str:
        return opts.python if opts.pid is None else repro.python_of(doc, None)

    def next_name() -> str:
        with naming:
            scripts[0] += 1
            return repro.numbered(path, scripts[0])

    def on_document(doc: Document) -> None:
        if doc.triage is not None and getattr(doc.triage, "signal", None):
            bounds = None if minimize is None else Bounds(*minimize)
            repro.make(doc, next_name(), python_of(doc), run_check, sys.stderr, bounds)
        elif not opts.break_ops:
            sys.stderr.write("tfnative: repro: not written: no fatal signal in an op's kernel\n")

    def on_op_stop(doc: Document, event: Event, hit: int) -> None:
        repro.make_stop(event, next_name, python_of(doc), run_check, sys.stderr, hit)

    opts.on_document = on_document
    opts.on_op_stop = on_op_stop


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
    ctx = click.get_current_context()
    defaulted = (click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP)
    # an option is given where the user wrote it (its default, --python's or --repro-minimize-tries', is not)
    given = [name for name, value in kw.items()
             if name not in _WATCH_PASSED and value and ctx.get_parameter_source(name) not in defaulted]
    if interactive:
        given.append("interactive")
    if given:
        opts = {p.name: max(p.opts, key=len) for p in ctx.command.params}
        shown = opts.get(given[0], given[0]) if given[0] not in ("script", "args") else "a SCRIPT"
        raise TfnativeError("%s: with --env or --slurm-job attach only watches for a fatal signal (options "
                            "handed on: --all-threads, --native-all, --full)" % shown)
    args = ["--%s" % name.replace("_", "-") for name in _WATCH_PASSED if kw.get(name)]
    if slurm_job is not None:
        return watch_slurm(slurm_job, remote, args, sys.stderr)
    return watch_env(envs, args, sys.stderr, until_eof=until_eof)


@click.command(cls=ScriptCommand, context_settings=ATTACH_CONTEXT)
@attach_options
@click.option("--output", "-o", "output", default="tfnative-report.md", show_default=True, metavar="FILE",
              help="Where to write the Markdown report (- for stdout).")
@click.option("--core", "core_path", metavar="CORE",
              help="Report on a core dump instead of running SCRIPT (SCRIPT is then the executable, optional).")
@click.option("--sysroot", metavar="DIR", help="With --core: prefix every mapped path with DIR.")
@click.option("--save-core", "save_core", metavar="FILE",
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
                click.echo("tfnative: report written to %s" % shown(output), err=True)
            return code

        from ..attach.run import run_attach
        from ..gdb.mi import find_gdb
        from ..output import bugreport
        from ..toolchain import hostfacts  # the doctor's ELF readers: not on attach's path

        opts = options_of(kw)
        docs: List[Any] = []
        code = run_attach(opts, sys.stderr, keep=docs)
        env = opts.switches.environment(dict(os.environ))
        text = bugreport.markdown(docs[0], [os.path.basename(sys.argv[0]) or "tfnative"] + sys.argv[1:],
                                  hostfacts.versions(opts.python, find_gdb(opts.gdb.gdb_path), env),
                                  hostfacts.library_verdicts(opts.python), code)
        write_output(output, text.encode())
        if not is_stdout(output):
            click.echo("tfnative: report written to %s" % shown(output), err=True)
        return code

    _run(go)


