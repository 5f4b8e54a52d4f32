"""``tfnative stack --no-pause``: a snapshot that never stops the target (no ptrace)."""

import subprocess
import sys
import textwrap
import time

from ..utils import load_json, run_tfnative, tracer_of, wait_for_file

TARGET = textwrap.dedent("""\
    import sys
    import threading
    import time


    def sleeper():
        time.sleep(600)


    def spinner():
        while True:
            sum(range(100))


    threading.Thread(target=sleeper, name="sleeper", daemon=True).start()
    threading.Thread(target=spinner, name="spinner", daemon=True).start()
    open(sys.argv[1], "w").write("ready")
    time.sleep(600)
    """)


def test_no_pause_reads_without_stopping(tmp_path):
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    ready = tmp_path / "ready"
    target = subprocess.Popen([sys.executable, str(script), str(ready)])
    try:
        wait_for_file(str(ready), 60, target)
        time.sleep(0.3)
        out = tmp_path / "s.json"
        r = run_tfnative(["stack", "--pid", str(target.pid), "--no-pause", "--json", str(out)], timeout=300)
        assert r.returncode == 0, r.stderr
        ev = load_json(out)["events"][0]
        assert ev["via"] == "cfi" and ev["held_ms"] == 0.0
        by_name = {t.get("python_name"): t for t in ev["threads"]}
        for t in ev["threads"]:
            assert isinstance(t["consistent"], bool)
        sleeper = by_name["sleeper"]
        names = [f["function"] for f in sleeper["frames"]]
        assert "sleeper" in names and "clock_nanosleep" in names[0]  # native frames from rsp and rip alone
        spinner = by_name["spinner"]
        assert any(f["function"] == "spinner" for f in spinner["frames"])  # Python frames even while running
        assert tracer_of(target.pid) == 0
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()


def test_no_pause_refuses_gdb(tmp_path):
    r = run_tfnative(["stack", "--pid", "1", "--no-pause", "--with-gdb"], timeout=60)
    assert r.returncode != 0 and "--no-pause" in r.stderr
