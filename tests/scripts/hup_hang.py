"""A job that handles SIGHUP (it notes each one in a file, as a trainer that reopens its logs would), then
waits for ever: for ``tfnative watch`` outliving its terminal.  Writes nothing to its standard streams.

argv: READY_FILE HUP_FILE.  READY_FILE (its pid) is written once the handler is in place; the main thread then
waits on an Event nobody sets.
"""
import os
import signal
import sys
import threading

READY, HUP = sys.argv[1], sys.argv[2]


def hup(signum, frame):
    with open(HUP, "a") as f:
        f.write("SIGHUP\n")


signal.signal(signal.SIGHUP, hup)
with open(READY + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(READY + ".tmp", READY)
threading.Event().wait()  # WAIT_LINE
