"""``stack --samples N --interval S`` on a real process with one stuck and one moving thread."""

import subprocess
import sys

from ..utils import line_of, load_json, requires_gdb, run_tfnative, script

pytestmark = requires_gdb

SCRIPT = script("stuck_and_moving.py")


def test_one_thread_stuck_one_moving(tmp_path):
    p = subprocess.Popen([sys.executable, SCRIPT], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline() == b"ready\n"
        out = tmp_path / "s.json"
        r = run_tfnative(["stack", "--pid", str(p.pid), "--samples", "3", "--interval", "0.5", "--json", str(out)])
        assert r.returncode == 0, r.stderr
        doc = load_json(out)
        event = doc["events"][0]
        threads = {t["tid"]: t for t in event["threads"]}
        main = threads.pop(p.pid)
        (worker,) = threads.values()
        assert main["progress"] == "stuck" and main["stuck_s"] >= 1.0
        assert [(f["function"], f["line"]) for f in main["frames"] if f.get("user")] == [
            ("<module>", line_of(SCRIPT, "threading.Event().wait()"))]
        assert worker["progress"] == "moving" and "stuck_s" not in worker
        assert event["samples"]["count"] == 3 and event["samples"]["span_s"] >= 1.0
        assert doc["triage"]["stuck"] == [p.pid] and doc["triage"]["moving"] == [worker["tid"]]
        # nothing to explain it: said so, with what was seen
        assert doc["triage"]["pattern"] is None
        assert doc["triage"]["verdict"].startswith("no known hang pattern fits: ")
        assert "stuck: %d" % p.pid in doc["triage"]["verdict"]
        assert "[stuck " in r.stdout and "[moving]" in r.stdout
        assert r.stderr.count("tfnative: sample ") == 3

        # one snapshot: no progress marks, no "stuck" list
        r = run_tfnative(["stack", "--pid", str(p.pid), "--json", str(out)])
        assert r.returncode == 0, r.stderr
        doc = load_json(out)
        assert not any("progress" in t for t in doc["events"][0]["threads"])
        assert doc["triage"]["stuck"] is None and "[stuck" not in r.stdout
    finally:
        p.kill()
        p.wait()


def test_bad_sample_options_are_one_line_errors():
    for args in (["--samples", "0"], ["--interval", "-1"]):
        r = run_tfnative(["stack", "--pid", "1", *args])
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert "Invalid value" in r.stderr
