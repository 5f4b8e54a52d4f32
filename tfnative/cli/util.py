"""What every tfnative command shares: the error contract and gdb's options.

A command's body runs under ``run_command``: a ``TfnativeError`` becomes one
line on stderr (a newline or other control character in it, from a file name, escaped: ``errors.shown``)
and its exit status, Ctrl-C exits 130, a reader that closed
standard output (``tfnative merge ... | head``) ends the command quietly with
141 (128 + SIGPIPE, what a shell shows for ``cat`` there), and any other exception
one line naming it (the traceback only with ``TFNATIVE_DEBUG=1``).  The
command modules (``cli/__init__.py``, ``cli/build.py``...) import this one and nothing
imports them back.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Callable, Optional, Tuple

import click

from ..errors import TfnativeError, shown


def run_command(fn: Callable[[], Optional[int]]) -> None:
    """Run a command's body and exit with its status (``None`` is 0), by the contract above."""
    try:
        code = fn()
    except TfnativeError as exc:
        click.echo("tfnative: error: %s" % shown(str(exc)), err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("tfnative: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        # Nothing more can be written; the interpreter's own flush at exit must not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)
    except Exception as exc:  # noqa: BLE001 - the promise is: never a traceback
        if os.environ.get("TFNATIVE_DEBUG"):
            raise
        click.echo("tfnative: internal error: %s: %s (set TFNATIVE_DEBUG=1 for a traceback)"
                   % (type(exc).__name__, shown(str(exc))), err=True)
        sys.exit(70)
    sys.exit(code or 0)


# The options naming a file a command writes when it ends (``files.open_output``), by their parameter names.
OUTPUTS = frozenset({"json_path", "html_path", "speedscope_path", "output", "documents", "save_core"})


def guard_params(command: click.Command) -> click.Command:
    """Refuse, for every value of every option and argument of ``command``, what no option of tfnative means:

    - an empty string (``--json ''``, ``--break ''``, ``--gdb-log ''``, an empty FILE): a usage error naming
      the option, where it would otherwise be taken for "not given" or for the current directory;
    - a number that is not finite (``--timeout nan``, ``--timeout inf``, ``--interval nan``): a usage error
      (the ranges of each option, ``FloatRange``, refuse the negative ones).

    And the outputs a command writes at its end (``OUTPUTS``: ``--json``, ``--html``, ``-o``...) are checked
    before it starts (``files.check_output``): a missing directory, a directory, a read-only file is one line
    at once, not after a whole session.

    The script's own arguments (``attach SCRIPT ARGS``) are the script's: they pass as they are.  The group
    (``cli/__init__.py``) puts every command it loads under this guard: one place for all of them.
    """
    if getattr(command, "_tfnative_guarded", False):
        return command
    for param in command.params:
        if param.type is click.UNPROCESSED or (isinstance(param, click.Option) and (param.is_flag or param.count)):
            continue
        param.callback = _checked(param.callback)
    setattr(command, "_tfnative_guarded", True)  # noqa: B010 - an attribute of click's object, not ours
    return command


def _checked(callback: Optional[Callable[..., Any]]) -> Callable[..., Any]:
    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        for one in value if isinstance(value, tuple) else (value,):
            if isinstance(one, str) and one == "":
                what = param.metavar or (param.name or "a value").upper()
                raise click.BadParameter("an empty value: give %s" % what, ctx, param)
            if isinstance(one, float) and not math.isfinite(one):
                raise click.BadParameter("%s is not a finite number" % one, ctx, param)
        value = callback(ctx, param, value) if callback is not None else value
        if param.name in OUTPUTS and isinstance(value, str):
            from ..files import check_output

            try:
                check_output(value)
            except TfnativeError as exc:  # not a usage error: the line a failed write gives, said early
                click.echo("tfnative: error: %s" % shown(str(exc)), err=True)
                ctx.exit(exc.exit_code)
        return value
    return check


def view_options(all_threads_help: str = "Also threads that run no Python.",
                 between: Tuple[Callable[[Callable[..., Any]], Callable[..., Any]], ...] = ()
                 ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--all-threads``/``-a``, ``--native-all`` and ``--full``: what a report of stacks shows, for ``stack``,
    ``core`` and ``watch``; ``between``: options of the command's own listed after ``--all-threads``."""
    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn = click.option("--full", is_flag=True,
                          help="Do not fold runs of TensorFlow-internal frames in the text report.")(fn)
        fn = click.option("--native-all", is_flag=True, help="Keep interpreter glue frames.")(fn)
        for option in reversed(between):
            fn = option(fn)
        return click.option("--all-threads", "-a", is_flag=True, help=all_threads_help)(fn)
    return add


def repro_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--repro FILE``, ``--no-repro-check`` and ``--repro-minimize`` with its bounds (issue #45), for ``attach``
    and ``core``."""
    fn = click.option("--repro-minimize-seconds", type=click.FloatRange(min=1), default=300.0, show_default=True,
                      metavar="S", help="With --repro-minimize: stop trying after S seconds.")(fn)
    fn = click.option("--repro-minimize-tries", type=click.IntRange(min=1), default=60, show_default=True,
                      metavar="N", help="With --repro-minimize: stop after N tries.")(fn)
    fn = click.option("--repro-minimize", is_flag=True,
                      help="With --repro: shrink the inputs (fewer elements, smaller dimensions, zeros and ones) "
                           "while the script still dies the same way, each try in a fresh process, and write the "
                           "smallest.")(fn)
    fn = click.option("--no-repro-check", is_flag=True,
                      help="With --repro: write FILE, do not run it to check that it crashes the same way.")(fn)
    return click.option("--repro", metavar="FILE",
                        help="At a fatal signal in an op's kernel, write a standalone script to FILE: the op's "
                             "inputs and attributes, read from memory, and one tf.raw_ops call (larger inputs in "
                             "FILE.npz); then run it in a fresh process and say whether it crashes the same way. "
                             "With attach --break-op, at each stop too: a script of that op on the inputs it got "
                             "there, run alone to say what it did (FILE, then FILE.2, FILE.3... before the "
                             "suffix).")(fn)


def repro_path(path: Optional[str]) -> Optional[str]:
    """``--repro``'s FILE, checked: one line, not blank; ``-`` is standard output."""
    if path is not None and (not path.strip() or not path.isprintable()):
        raise TfnativeError("--repro needs a file name: %s is blank or has control characters" % shown(path))
    return path


def repro_minimize(on: bool, tries: int, seconds: float, path: Optional[str], check: bool
                   ) -> Optional[Tuple[int, float]]:
    """``--repro-minimize``'s bounds (tries, seconds); None without it.  It needs ``--repro FILE`` (a file: each
    try is checked against FILE's crash) and the check."""
    if not on:
        return None
    if path is None or path == "-":
        raise TfnativeError("--repro-minimize needs --repro FILE (a file, not -)")
    if not check:
        raise TfnativeError("--repro-minimize runs each try to check it: it cannot go with --no-repro-check")
    return tries, seconds


def gdb_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options that choose and configure gdb, for every command that may start it."""
    fn = click.option("--gdb", "gdb_path", metavar="PATH", help="gdb executable (default: gdb on PATH).")(fn)
    fn = click.option("--debuginfod/--no-debuginfod", default=False,
                      help="Let gdb download debug info (off by default: it can hang for minutes).")(fn)
    fn = click.option("--gdb-log", metavar="FILE", help="Append the raw MI conversation to FILE.")(fn)
    fn = click.option("--full-symbols", is_flag=True,
                      help="Let gdb read every library's symbols in full (slow on TensorFlow: ~25 s, 2.3 GB).")(fn)
    return fn


def job_options(env_help: str, slurm_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--env``, ``--slurm-job`` and ``--remote-tfnative``: the processes of a job, for ``stack`` (their stacks)
    and ``attach`` (the crash watch); each command says in ``env_help`` and ``slurm_help`` what it does to them."""
    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn = click.option("--remote-tfnative", metavar="CMD",
                          help="With --slurm-job: how the nodes run tfnative (default: this Python, -m tfnative).")(fn)
        fn = click.option("--slurm-job", "slurm_job", metavar="JOBID", help=slurm_help)(fn)
        fn = click.option("--env", "envs", multiple=True, metavar="KEY=VALUE", help=env_help)(fn)
        return fn
    return add
