"""``python -m tfnative`` and the ``tfnative`` command.

A Ctrl-C while tfnative is still loading (importing its modules takes a
moment) exits quietly with status 130, as one during a command does.
``tfnative --version`` answers before the command line (click) is loaded:
it is what scripts and health checks call most.
"""

import sys


def run() -> None:
    """Load the command line and run it."""
    if sys.argv[1:] == ["--version"]:
        from . import __version__

        sys.stdout.write("tfnative, version %s\n" % __version__)  # click's version_option's words
        return
    try:
        from .cli import main
    except KeyboardInterrupt:
        sys.stderr.write("tfnative: interrupted\n")
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
