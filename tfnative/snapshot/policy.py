"""The one rule for taking stacks: tfnative's own unwinder first (CFI), gdb where it must.

Every mode applies it here and nowhere else: ``tfnative stack`` on a live pid
(``snapshot/process.py``), a stop of ``tfnative attach`` (``attach/stopevent.py``)
and ``tfnative core`` (``corefile/capture.py``).  The decision is made by type
(``errors.py``):

- ``Unsupported`` (``HasDebugInfo`` among them): the fast path cannot take it or
  gdb gives more; take it through gdb (saying why, through ``on_fallback``).
- ``PtraceRefused``: gdb would be refused the same way; the caller's ``refused``
  turns it into the user's message (a mode without one falls back as above).
- ``TfnativeError`` and ``Interrupted``: the user's to read; never hidden.
- Anything else is a bug of ours: it must not cost the user the snapshot, so the
  stack comes through gdb and the bug is named (``TFNATIVE_DEBUG=1`` raises it).

Where nothing runs Python, ``Threads.PYTHON`` widens to all threads (``widen``),
rather than showing nothing.  Where nothing can take over from the fast path (a
process that ``tfnative watch``'s crash catcher keeps traced: gdb could not
attach), ``take_alone`` says why it failed instead.
"""

from __future__ import annotations

import os
from typing import Callable, Optional

from ..core.model import Capture
from ..core.threads import Threads
from ..errors import Interrupted, PtraceRefused, TfnativeError, Unsupported

Take = Callable[[Threads], Capture]  # which threads -> their stacks


def widened(take: Take, which: Threads) -> Capture:
    """``take(which)``; when ``PYTHON`` finds no Python thread, every thread rather than nothing."""
    result = take(which)
    if not result.threads and which is Threads.PYTHON:
        result = take(Threads.ALL)
    return result


def why(exc: BaseException) -> str:
    """What ``on_fallback`` is told: the fast path's own reason, or the bug of ours by its type."""
    if isinstance(exc, (Unsupported, PtraceRefused)):
        return str(exc)
    return "tfnative's unwinder failed (%s: %s)" % (type(exc).__name__, exc)


def take_stacks(which: Threads, fast: Take, through_gdb: Take, on_fallback: Callable[[BaseException], None], *,
                with_gdb: bool = False, widen: bool = False,
                refused: Optional[Callable[[PtraceRefused], Exception]] = None) -> Capture:
    """The stacks of ``which`` threads: ``fast`` (no gdb) unless ``with_gdb``, else or where it steps aside
    ``through_gdb``.  ``on_fallback(exc)`` runs before gdb is used because of ``exc`` (``why(exc)`` says it)."""
    run = (lambda take: widened(take, which)) if widen else (lambda take: take(which))
    if not with_gdb:
        try:
            return run(fast)
        except (TfnativeError, Interrupted):
            raise
        except PtraceRefused as exc:
            if refused is not None:
                raise refused(exc) from None
            on_fallback(exc)
        except Unsupported as exc:
            on_fallback(exc)
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not cost the user the snapshot
            if os.environ.get("TFNATIVE_DEBUG"):
                raise
            on_fallback(exc)
    return run(through_gdb)


def take_alone(which: Threads, fast: Take, failed: Callable[[BaseException], TfnativeError], *,
               widen: bool = False) -> Capture:
    """The stacks of ``which`` threads where nothing can take over from ``fast`` (a tracer of ours holds the
    process): ``TfnativeError`` and ``Interrupted`` as raised; any other failure (``Unsupported``, a bug of
    ours: ``TFNATIVE_DEBUG=1`` raises it) as ``failed(exc)``, the user's one line."""
    try:
        return widened(fast, which) if widen else fast(which)
    except (TfnativeError, Interrupted):
        raise
    except Exception as exc:  # noqa: BLE001 - no gdb to fall back to: the reason, in one line
        if os.environ.get("TFNATIVE_DEBUG"):
            raise
        raise failed(exc) from None
