"""Issue #44: a job whose program has ended but that does not exit is a hang under ``tfnative watch``.

``tests/scripts/exit_hang.py`` launched under ``watch --hang-after 3 --interval 1 --on-hang kill``: its main
code returns while a non-daemon thread polls a flag with ``time.sleep`` for ever (``poller``: it wakes five
times a second, which the counters read as progress), or a ``__del__`` blocks while the interpreter is torn
down (``finalize``).  The report comes within --hang-after + 2 intervals of the program's end, names the
process, the thread the exit waits for and its line; the job is ended, the watch exits 124, nothing is left
running or traced.
"""

import time

import psutil
import pytest

from tfnative.core.docschema import check_document

from ..utils import assert_gone, line_of, script, wait_for_file
from .test_watch import SNAPSHOT_SLACK, Watcher, documents

PROGRAM = script("exit_hang.py")
HANG_AFTER, INTERVAL = 3.0, 1.0


def _expected(mode, doc):
    if mode == "poller":
        poller = next(t for t in doc["events"][0]["threads"] if t.get("python_name") == "hook-poller")
        assert poller["daemon"] is False
        return ("exit_waits_for_threads",
                'the program has ended: the main thread waits in threading._shutdown for 1 non-daemon thread: '
                'thread %d "hook-poller" in poll at exit_hang.py:%d' % (poller["tid"], line_of(PROGRAM, "# POLL_LINE")),
                "the main thread waits in threading._shutdown")
    return ("interpreter_finalizing",
            "the interpreter is shutting down (Py_FinalizeEx has begun) and the main thread is in Blocks.__del__ at "
            "exit_hang.py:%d" % line_of(PROGRAM, "# DEL_LINE"),
            "the interpreter is shutting down")


@pytest.mark.parametrize("mode", ["poller", "finalize"])
def test_a_program_that_ended_but_does_not_exit_is_reported_and_killed(tmp_path, mode):
    ready, json_path = str(tmp_path / "ready"), str(tmp_path / "hang.jsonl")
    w = Watcher(tmp_path, ["watch", "--hang-after", str(HANG_AFTER), "--interval", str(INTERVAL), "--on-hang", "kill",
                           "--json", json_path, PROGRAM, mode, ready])
    try:
        job = int(wait_for_file(ready, 60, w.proc))
        t_ready = time.monotonic()
        procs = w.tree()[1:]
        w.wait_for("has ended its program but has not exited", HANG_AFTER + 2 * INTERVAL + SNAPSHOT_SLACK + 10)
        took = time.monotonic() - t_ready
        status = w.finish(60)
        out, err = w.out(), w.err()
        print("%s: reported %.1f s after the program's end\n%s\n%s" % (mode, took, out, err))
        assert took <= HANG_AFTER + 2 * INTERVAL + SNAPSHOT_SLACK, took
        assert status == 124, err
        (doc,) = documents(json_path)
        check_document(doc)
        pattern, verdict, why = _expected(mode, doc)
        headline = next(line for line in out.splitlines() if "has ended its program" in line)
        assert headline.startswith("tfnative: watch: hang: process %d has ended its program but has not exited for "
                                   % job), headline
        assert "(--hang-after 3): " + why in headline
        assert doc["pid"] == job and doc["events"][0]["kind"] == "hang"
        assert doc["triage"]["pattern"] == pattern, doc["triage"]
        assert doc["triage"]["verdict"].startswith(verdict), doc["triage"]["verdict"]
        assert "verdict: " + verdict in out
        assert "ending the job (--on-hang kill)" in err
        assert_gone(procs)
        assert not psutil.pid_exists(job) or psutil.Process(job).status() == psutil.STATUS_ZOMBIE
    finally:
        w.kill_all()
