"""The attach loop's pure parts: which handler a gdb stop record goes to, a target's return code."""

import signal

import pytest

from tfnative.attach.session import NUMERICS_SIGNAL_NAME, Session, stop_kind
from tfnative.attach.targets import return_code
from tfnative.gdb.breakpoints import Breakpoints
from tfnative.gdb.ops import OpBreaks


@pytest.fixture
def opbreaks():
    return OpBreaks([], Breakpoints())


@pytest.mark.parametrize("record, kind", [
    ({"reason": "exited-normally"}, "exit"),
    ({"reason": "exited", "exit-code": "07"}, "exit"),
    ({"reason": "exited-signalled", "signal-name": "SIGSEGV"}, "exit"),
    ({"reason": "solib-event"}, "library"),
    ({"reason": "breakpoint-hit", "bkptno": "1"}, "breakpoint"),
    ({"reason": "signal-received", "signal-name": "SIGSEGV"}, "fatal-signal"),
    ({"reason": "signal-received", "signal-name": "SIGABRT"}, "fatal-signal"),
    ({"reason": "signal-received", "signal-name": "SIGCHLD"}, "child"),
    ({"reason": "signal-received", "signal-name": NUMERICS_SIGNAL_NAME}, "numerics"),
    ({"reason": "signal-received", "signal-name": "SIGSTOP"}, "other"),
    ({"reason": "end-stepping-range"}, "other"),
    ({}, "other"),
])
def test_stop_kind(opbreaks, record, kind):
    assert stop_kind(record, opbreaks) == kind
    assert kind in Session.STOPS  # every kind has its handler


def test_every_record_has_a_handler():
    assert {"stopped", "library-loaded", "breakpoint-modified", "breakpoint-created",
            "tfnative-snapshot"} <= set(Session.RECORDS)


@pytest.mark.parametrize("record, code", [
    (None, None),
    ({"reason": "exited-normally"}, 0),
    ({"reason": "exited", "exit-code": "07"}, 7),
    ({"reason": "exited", "exit-code": "010"}, 8),  # gdb writes it in octal
    ({"reason": "exited-signalled", "signal-name": "SIGSEGV"}, -signal.SIGSEGV),
    ({"reason": "signal-received", "signal-name": "SIGSEGV"}, None),
])
def test_return_code(record, code):
    assert return_code(record) == code


class _DyingGdb:
    """gdb resuming a process that dies of the signal passed on, before every thread is resumed."""

    def __init__(self, message):
        self.message = message

    def command(self, cmd, **_kw):
        from tfnative.gdb.mi import GdbError
        raise GdbError(self.message)


def test_a_continue_into_the_fatal_signal_is_no_error():
    session = Session.__new__(Session)
    session.gdb = _DyingGdb("Couldn't get registers: No such process.")
    session.running = False
    session._resume()  # the exit record follows
    assert session.running
    session.gdb = _DyingGdb("Cannot execute this command while the target is running.")
    from tfnative.gdb.mi import GdbError
    with pytest.raises(GdbError):
        session._resume()
