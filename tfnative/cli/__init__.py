"""Command line: the ``tfnative`` group; each command lives in a module of its own.

``attach.py`` (attach, report), ``stack.py``, ``core.py``, ``merge.py``, ``watch.py``, ``build.py`` (presets,
bazelrc, doctor); ``util.py`` holds the error contract and the options several commands share.  Every command
turns a ``TfnativeError`` into one line on stderr and a non-zero exit status; a traceback is shown only
with ``TFNATIVE_DEBUG=1``.
"""

from __future__ import annotations

import importlib
from typing import Dict, List, Optional, Tuple

import click

from .. import __version__

# Each command lives in a module of its own and is imported when it runs (or when help lists it): ``tfnative
# stack`` loads neither attach's nor the build helpers' command modules, and each command imports what it
# runs when it runs (the attach loop, gdb's driver, psutil, the snapshot path, merge): ``tfnative
# --version`` and every ``--help`` load click and the command modules alone (tests/unit/test_startup.py).
COMMANDS: Dict[str, Tuple[str, str]] = {  # command -> (module of this package, its click command)
    "attach": ("attach", "attach"),
    "report": ("attach", "report"),
    "stack": ("stack", "stack"),
    "presets": ("build", "presets_cmd"),
    "bazelrc": ("build", "bazelrc_cmd"),
    "doctor": ("build", "doctor_cmd"),
    "core": ("core", "core_cmd"),
    "merge": ("merge", "merge_cmd"),
    "watch": ("watch", "watch"),
}


class _Commands(click.Group):
    """``tfnative``'s group: a command in ``COMMANDS`` is imported from its module on first use."""

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            module, attr = COMMANDS[cmd_name]
            command = getattr(importlib.import_module("." + module, __name__), attr)
            self.add_command(command, cmd_name)
        if command is not None:
            from .util import guard_params  # no empty strings, no NaN or infinite numbers, for every command

            guard_params(command)
        return command


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tfnative")
def main() -> None:
    """Native debugging for TensorFlow: one mixed Python + C++ stack, fast."""


if __name__ == "__main__":  # pragma: no cover
    main()
