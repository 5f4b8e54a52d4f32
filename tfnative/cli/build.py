"""Build helpers on the command line: ``tfnative presets``, ``tfnative bazelrc``, ``tfnative doctor``."""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional, Tuple

import click

from ..errors import TfnativeError
from .util import run_command as _run


@click.command("presets")
@click.option("--json", "as_json", is_flag=True, help="A JSON list of {name, kind, gives, costs, flags}.")
def presets_cmd(as_json: bool) -> None:
    """The Bazel presets of build/tfnative.bazelrc: what each gives, what it costs, its flags."""
    from ..toolchain import presets as presets_mod
    if as_json:
        click.echo(json.dumps([p.to_json() for p in presets_mod.PRESETS], indent=2))
        return
    _print_table()


def _print_table() -> None:
    from ..toolchain import presets as presets_mod

    for p in presets_mod.PRESETS:
        click.echo("%s  [%s]" % (p.name, p.kind))
        for line in presets_mod.wrap("gives: " + p.gives, "    "):
            click.echo(line)
        for line in presets_mod.wrap("costs: " + p.costs, "    "):
            click.echo(line)
        click.echo("    flags: %s" % " ".join(p.flags))
        click.echo("")
    click.echo("Order: %s." % presets_mod.ORDER_RULE)
    click.echo("Files: 'tfnative bazelrc > tfnative.bazelrc' next to TF's .bazelrc, plus "
               "'try-import %workspace%/tfnative.bazelrc' in .bazelrc.")


@click.command("bazelrc")
@click.argument("preset", required=False)
@click.option("--files", "files", multiple=True, metavar="REGEX",
              help="tfn_targeted: full -g for sources whose path contains a match (repeatable).")
@click.option("--workspace", type=click.Path(file_okay=False), default=None,
              help="Check the regexes against this workspace's sources (default: the current directory "
                   "when it is a Bazel workspace).")
def bazelrc_cmd(preset: Optional[str], files: Tuple[str, ...], workspace: Optional[str]) -> None:
    """Print tfnative.bazelrc, or one PRESET's lines ready to paste (tfn_targeted with its --files)."""

    def go() -> None:
        from ..toolchain import presets as presets_mod

        ws = workspace
        if ws is not None and not os.path.isdir(ws):
            raise TfnativeError("--workspace %s: no such directory" % ws)
        if ws is None and any(os.path.isfile(f) for f in ("WORKSPACE", "WORKSPACE.bazel", "MODULE.bazel")):
            ws = os.getcwd()
        text = presets_mod.snippet(preset, list(files), ws)
        click.echo(text, nl=False)

    _run(go)


@click.command("doctor")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--python", "python", default=sys.executable, show_default="the Python running tfnative",
              help="Without PATH: inspect the TensorFlow libraries this interpreter would import.")
@click.option("--all", "every", is_flag=True, help="Without PATH: every .so of the TensorFlow package.")
@click.option("--source-dir", "source_dirs", multiple=True, type=click.Path(),
              help="A Bazel workspace/execroot to look for .dwo files in (as attach --source-dir).")
@click.option("--json", "as_json", is_flag=True, help="A JSON list, one object per file (or per check).")
@click.option("--pid", "pid", type=int, default=None,
              help="The libraries of your own a running process maps (op libraries, ctypes libraries): what "
                   "each carries, and the rebuild that gives debug info to one without.")
@click.option("--system", is_flag=True,
              help="Will tfnative work here? gdb, ptrace (Yama, capabilities, seccomp), containers, where cores "
                   "go, debuginfod, the Python and its TensorFlow: each ok or what to do. Exit 1 when one needs a fix.")
def doctor_cmd(paths: Tuple[str, ...], python: str, every: bool, source_dirs: Tuple[str, ...],
               as_json: bool, pid: Optional[int], system: bool) -> None:
    """What debug info each shared object carries, and what gdb can do with it; --system: will tfnative work here."""

    def go() -> Optional[int]:
        if system:
            return _system(paths, python, as_json)
        from ..toolchain import doctor as doctor_mod  # imported here: every tfnative command would pay for it
        from ..toolchain import doctorpid
        from ..toolchain.tfinstall import tensorflow_libraries

        if pid is not None:
            if paths or every:
                raise TfnativeError("--pid reads the libraries of a process: give it no PATH and no --all")
            doc = doctorpid.process_report(pid, list(source_dirs))
            click.echo(json.dumps(doc, indent=2) if as_json else doctorpid.render_process(doc))
            return None
        for p in paths:
            if p.endswith(".py") and os.path.isfile(p):
                raise TfnativeError("%s is a Python script: run it, then 'tfnative doctor --pid PID' lists the "
                                    "libraries of your own it loads and what each carries" % p)

        targets: List[str] = list(paths) or tensorflow_libraries(python, every)
        for p in targets:
            if not os.path.exists(p):
                raise TfnativeError("%s: no such file" % p)
            if os.path.isdir(p):
                raise TfnativeError("%s is a directory: pass shared objects" % p)
            if not os.path.isfile(p):  # a FIFO would block the read, a device is no ELF file
                raise TfnativeError("%s is not a regular file: pass shared objects" % p)
        reports = [doctor_mod.inspect(p, list(source_dirs)) for p in targets]
        if as_json:
            click.echo(json.dumps([r.to_json() for r in reports], indent=2))
        else:
            click.echo("\n\n".join(doctor_mod.render(r) for r in reports))
        return None

    _run(go)


def _system(paths: Tuple[str, ...], python: str, as_json: bool) -> int:
    """``doctor --system``: one line per check; 1 when one says what to fix."""
    from ..toolchain.selfcheck import system_checks

    if paths:
        raise TfnativeError("--system checks this machine: give it no PATH")
    checks = system_checks(python)
    if as_json:
        click.echo(json.dumps([vars(c) for c in checks], indent=2))
    else:
        for c in checks:
            click.echo(c.line())
    return 1 if any(c.status == "fix" for c in checks) else 0
