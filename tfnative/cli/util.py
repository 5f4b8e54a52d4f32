"""What every tfnative command shares: the error contract and gdb's options.

A command's body runs under ``run_command``: a ``TfnativeError`` becomes one
line on stderr and its exit status, Ctrl-C exits 130, a reader that closed
standard output (``tfnative merge ... | head``) ends the command quietly with
141 (128 + SIGPIPE, what a shell shows for ``cat`` there), and any other exception
one line naming it (the traceback only with ``TFNATIVE_DEBUG=1``).  The
command modules (``cli/__init__.py``, ``cli/build.py``...) import this one and nothing
imports them back.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Optional

import click

from ..errors import TfnativeError


def run_command(fn: Callable[[], Optional[int]]) -> None:
    """Run a command's body and exit with its status (``None`` is 0), by the contract above."""
    try:
        code = fn()
    except TfnativeError as exc:
        click.echo("tfnative: error: %s" % exc, err=True)
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
                   % (type(exc).__name__, exc), err=True)
        sys.exit(70)
    sys.exit(code or 0)


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
