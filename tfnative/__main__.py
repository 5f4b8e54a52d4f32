"""``python -m tfnative`` and the ``tfnative`` command.

A Ctrl-C while tfnative is still loading (importing its modules takes a
moment) exits quietly with status 130, as one during a command does.
"""

import sys


def run() -> None:
    """Load the command line and run it."""
    try:
        from .cli import main
    except KeyboardInterrupt:
        sys.stderr.write("tfnative: interrupted\n")
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
