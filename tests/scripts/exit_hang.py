"""A program that hangs while it exits.

argv: MODE READY_FILE.  MODE "threads": the main code returns while a non-daemon thread ("uploader")
waits for ever, so the main thread waits in threading._shutdown; a daemon thread ("heartbeat") waits
too.  MODE "poller": the main code returns while a non-daemon thread ("hook-poller") polls a flag with
time.sleep that nobody sets (a SessionRunHook's thread never stopped after a failed step): it wakes every
0.2 s, for ever.  MODE "finalize": an object whose __del__ blocks is collected when the interpreter tears the
module down (Py_FinalizeEx has begun).  READY_FILE is written just before the main code returns.
"""
import os
import sys
import threading
import time

MODE, READY = sys.argv[1], sys.argv[2]
forever = threading.Event()


def upload(path):
    forever.wait()  # UPLOAD_LINE


def poll():
    while not forever.is_set():
        time.sleep(0.2)  # POLL_LINE


def beat():
    forever.wait()


class Blocks:
    def __del__(self, _sleep=time.sleep):
        _sleep(3600)  # DEL_LINE


def ready():
    with open(READY + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(READY + ".tmp", READY)


if MODE == "threads":
    threading.Thread(target=upload, args=("model.ckpt",), name="uploader").start()
    threading.Thread(target=beat, name="heartbeat", daemon=True).start()
elif MODE == "poller":
    threading.Thread(target=poll, name="hook-poller").start()
else:
    blocker = Blocks()
ready()
