"""The three stages, as a command really runs them: from the command line to the printed line, ``tfnative stack
--pid``, ``tfnative core`` and a ``tfnative watch --pid`` hang report pass through capture, analysis and rendering
once each, in that order (``docs/architecture.md``, "Three routes").

The command runs in a child interpreter under a profile hook (``ROUTE``) that records, from the moment the command's
body starts (``cli/util.run_command``), the stage of each function of tfnative that is called: capture (``sources/``,
``gdb/``, ``snapshot/``, ``corefile/``), analysis (``analysis/``) or rendering (``output/``); the readers and the
model in ``core/``, which every stage uses, and the drivers (``cli/``, ``watch/``) are no stage of their own.  The
stages in the order they were entered, each run of one stage counted once, are the route.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ..installed import import_paths
from ..utils import make_core, script, started

ROUTE = textwrap.dedent('''
    import json, os, sys, threading
    import tfnative
    pkg = os.path.dirname(os.path.abspath(tfnative.__file__)) + os.sep
    stages = {"sources": "capture", "gdb": "capture", "snapshot": "capture", "corefile": "capture",
              "analysis": "analysis", "output": "rendering"}
    # a watch's tracer thread looks for its tracees' stops all the time and answers them (a signal handed on):
    # its waits are no step of a route, a hold is
    waits = {os.path.join("sources", "ptrace.py"): {"ptrace_call", "look", "take_stop", "take", "ended",
                                                    "end_status", "unreaped", "cont", "listen"}}
    route, started = [], []

    def hook(frame, event, arg):
        # functions only: a module or a class body run by an import is no step of the route
        if event != "call" or not frame.f_code.co_flags & 2 or not frame.f_code.co_filename.startswith(pkg):
            return
        where = frame.f_code.co_filename[len(pkg):]
        if frame.f_code.co_name in waits.get(where, ()):
            return
        if not started:
            if where == os.path.join("cli", "util.py") and frame.f_code.co_name == "run_command":
                started.append(True)
            return
        stage = stages.get(where.split(os.sep)[0])
        if stage and (not route or route[-1][0] != stage):
            route.append((stage, "%s:%s" % (where, frame.f_code.co_name)))

    sys.setprofile(hook)
    threading.setprofile(hook)
    sys.argv = ["tfnative"] + sys.argv[2:]
    try:
        from tfnative.__main__ import run
        run()
    finally:
        sys.setprofile(None)
        with open(os.environ["TFNATIVE_ROUTE"], "w") as f:
            json.dump(route, f)
''')


def route_of(tmp_path, *args: str, timeout: float = 300) -> tuple:
    """(the completed run, the route: [(stage, the first function of that stage's run)...])."""
    out = tmp_path / "route.json"
    hook = tmp_path / "route_hook.py"
    hook.write_text(ROUTE)
    env = dict(os.environ, TFNATIVE_ROUTE=str(out), PYTHONPATH=os.pathsep.join(
        import_paths() + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    r = subprocess.run([sys.executable, str(hook), "--", *args], capture_output=True, text=True, timeout=timeout,
                       cwd=str(tmp_path), env=env, stdin=subprocess.DEVNULL)
    return r, [tuple(step) for step in json.loads(out.read_text())]


def stages(route: list) -> list:
    return [stage for stage, _ in route]


@pytest.fixture
def sleeper(tmp_path):
    ready = str(tmp_path / "ready")
    with started([sys.executable, script("sleeper.py"), ready], ready) as proc:
        yield proc


def test_stack_pid_captures_analyses_renders_once(tmp_path, sleeper):
    r, route = route_of(tmp_path, "stack", "--pid", str(sleeper.pid))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "wait_here" in r.stdout
    assert stages(route) == ["capture", "analysis", "rendering"], route


def test_core_captures_analyses_renders_once(tmp_path):
    work = tmp_path / "crash"
    work.mkdir()
    core = make_core(str(work), "segv.py", timeout=60)
    r, route = route_of(tmp_path, "core", core)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "SIGSEGV" in r.stdout
    assert stages(route) == ["capture", "analysis", "rendering"], route


def test_a_watch_hang_report_captures_analyses_renders_once(tmp_path):
    """``watch --pid`` of a process blocked in one long sleep: every interval a reading (capture) and its judgement
    (analysis); then the hang report: every process held at one moment and let go (capture), analysed, printed
    (rendering, once).  What follows it is the watch's next reading (the stacks it reported, to tell a new hang
    from the same one), never more analysis of the report."""
    ready = str(tmp_path / "ready")
    one_sleep = "import sys, time; open(sys.argv[1], 'w').write('x'); time.sleep(600)"
    with started([sys.executable, "-c", one_sleep, ready], ready) as hung:
        r, route = route_of(tmp_path, "watch", "--pid", str(hung.pid), "--hang-after", "2", "--interval", "0.5",
                            "--on-hang", "kill", timeout=120)
    assert r.returncode == 124, r.stderr[-3000:]
    assert "made no progress" in r.stdout or "has progressed" in r.stdout, r.stdout[-3000:]
    seen = stages(route)
    assert seen.count("rendering") == 1, route
    at = seen.index("rendering")
    assert seen[at - 2:at] == ["capture", "analysis"], route
    assert route[at - 1][1] == "analysis/event.py:analyze", route  # the held snapshot's event and verdict
    assert seen[at + 1:] in ([], ["capture"]), route  # at most the next reading's stacks
