"""Signal names as tfnative prints them, in one place."""

from __future__ import annotations

import signal


def signal_name(signo: int) -> str:
    """``SIGSEGV`` for 11; ``SIG<n>`` for a number Python has no name for (a real-time signal: ``SIG62``), as gdb
    names it too."""
    try:
        return signal.Signals(signo).name
    except ValueError:
        return "SIG%d" % signo
