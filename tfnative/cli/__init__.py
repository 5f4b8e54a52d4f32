"""Command line: the ``tfnative`` group; each command lives in a module of its own.

``attach.py`` (attach, report), ``stack.py``, ``core.py``, ``merge.py``, ``build.py`` (presets, bazelrc,
doctor); ``util.py`` holds the error contract and the options several commands share.  Every command
turns a ``TfnativeError`` into one line on stderr and a non-zero exit status; a traceback is shown only
with ``TFNATIVE_DEBUG=1``.
"""

from __future__ import annotations

import click

from .. import __version__
from .attach import register as register_attach
from .build import register as register_build
from .core import register as register_core
from .merge import register as register_merge
from .stack import stack

# Each command imports what it runs when it runs (the attach loop, gdb's driver, psutil, the snapshot
# path, merge): ``tfnative --version`` and every ``--help`` load click and this package's command
# modules alone (tests/unit/test_startup.py).


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tfnative")
def main() -> None:
    """Native debugging for TensorFlow: one mixed Python + C++ stack, fast."""


register_attach(main)  # tfnative attach and report live in cli/attach.py
main.add_command(stack)  # tfnative stack lives in cli/stack.py
register_build(main)  # the build helpers (presets, bazelrc, doctor) live in cli/build.py
register_core(main)  # tfnative core (post-mortem) lives in cli/core.py
register_merge(main)  # tfnative merge lives in cli/merge.py

if __name__ == "__main__":  # pragma: no cover
    main()
