"""gdbmi.Gdb matches one result record to each command, on lines a real gdb 13 wrote.

At a fatal signal under ``--check-numerics`` gdb answered ``-exec-continue`` with ``^running`` and, as the
process died while gdb resumed its threads, a second record for the same token: ``^error,msg="Couldn't get
registers: No such process."``.  Read before ``command`` woke, the error replaced the answer and tfnative
stopped with "error: Couldn't get registers" while the program ended as it would have.
"""

import collections
import threading

from tfnative.gdb.mi import Gdb

# From a real session (tfnative attach --check-numerics on a FusedPadConv2D abort, --gdb-log).
LINES = ['22^running', '*running,thread-id="all"', '22^error,msg="Couldn\'t get registers: No such process."',
         '~"[LWP 16346 exited]\\n"', '=thread-exited,id="7",group-id="i1"',
         '*stopped,reason="exited-signalled",signal-name="SIGABRT",signal-meaning="Aborted"']


def reader() -> Gdb:
    gdb = Gdb.__new__(Gdb)  # the record matching alone: no gdb process behind it
    gdb._lock = threading.Condition()
    gdb._results = {}
    gdb._events = collections.deque()
    gdb.console = collections.deque(maxlen=400)
    gdb._running = set()
    gdb.said = 0
    return gdb


def test_a_second_record_for_a_command_does_not_replace_its_answer():
    gdb = reader()
    for line in LINES:
        gdb._take(line)
    assert gdb._results[22]["message"] == "running"
    assert any("Couldn't get registers" in text for text in gdb.console)
    stops = [e for e in gdb._events if e.get("message") == "stopped"]
    assert stops and stops[-1]["payload"]["reason"] == "exited-signalled"
