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
    except BaseException as exc:
        if not _interrupted(exc):
            raise
        sys.stderr.write("tfnative: interrupted\n")
        sys.exit(130)
    main()


def _interrupted(exc: BaseException) -> bool:
    """A Ctrl-C, also where the import machinery wrapped it (3.11 raises ``RuntimeError: Error calling
    __set_name__`` from a KeyboardInterrupt that lands in a class body's ``__set_name__``)."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 8:
        if isinstance(cur, KeyboardInterrupt):
            return True
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return False


if __name__ == "__main__":
    run()
