"""Start-up of ``stack --pid`` (issue #26): of a process no session holds, it loads the snapshot path and the
report, nothing else.  It needs a live target, so it is an integration test; the commands that need none are
in ``tests/unit/test_startup.py``, which has the helper this one shares."""

import subprocess
import sys

from tests.unit.test_startup import imported_modules


def test_stack_of_a_pid_loads_neither_the_attach_loop_nor_gdb_nor_psutil():
    """``stack --pid`` of a process no session holds: the snapshot path and the report, nothing else."""
    target = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        out, mods = imported_modules("stack", "--pid", str(target.pid))
    finally:
        target.kill()
        target.wait()
    assert "time.sleep" in out or "<module>" in out  # the snapshot was taken
    assert "tfnative.snapshot.pipeline" in mods and "tfnative.output.report" in mods
    unwanted = [m for m in mods if m.startswith(("tfnative.attach", "tfnative.gdb.", "tfnative.corefile",
                                                  "tfnative.output.merge", "tfnative.snapshot.withgdb"))
                and m != "tfnative.gdb.options"  # GdbOptions, the options' plain record: gdb's machinery is not
                or m in ("psutil", "pygdbmi", "socket", "tfnative_gdb")
                or m in ("tfnative.cli.attach", "tfnative.cli.build", "tfnative.cli.core", "tfnative.cli.merge")]
    assert unwanted == []
