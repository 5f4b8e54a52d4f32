"""Nothing is left behind: no stopped target, no orphaned gdb, whatever happens."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from ..utils import (
    TFNATIVE,
    assert_gone,
    assert_running_untraced,
    descendants,
    load_json,
    python_frames,
    requires_gdb,
    run_tfnative,
    script,
    wait_for_file,
)

pytestmark = requires_gdb


def _start(tmp_path, *extra):
    ready = tmp_path / "pid"
    proc = subprocess.Popen(
        TFNATIVE + ["attach", *extra, script("sleeper.py"), str(ready)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    pid = int(wait_for_file(str(ready), 60, proc))
    tree = descendants(proc.pid)
    names = sorted(p.name() for p in tree)
    assert any(n.startswith("gdb") for n in names), names
    assert pid in [p.pid for p in tree]
    return proc, pid, tree


def _finish(proc, timeout=60):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError("tfnative did not exit: %s" % err)
    return proc.returncode, err


def test_ctrl_c_on_the_terminal(tmp_path):
    """SIGINT to the foreground process group, as a terminal's Ctrl-C sends it."""
    proc, pid, tree = _start(tmp_path, "--break", "never_called_function_q")
    os.killpg(proc.pid, signal.SIGINT)
    code, err = _finish(proc)
    assert code == 128 + signal.SIGINT, err
    # the script saw the Ctrl-C as it would without tfnative (KeyboardInterrupt), tfnative said why it ended
    assert "KeyboardInterrupt" in err and "killed by SIGINT" in err and "internal error" not in err
    assert_gone(tree)


def test_sigterm_of_tfnative(tmp_path):
    proc, pid, tree = _start(tmp_path)
    proc.send_signal(signal.SIGTERM)
    code, err = _finish(proc)
    assert code == 128 + signal.SIGTERM, err
    assert "interrupted by SIGTERM" in err
    assert_gone(tree)


def test_sigkill_of_tfnative_takes_gdb_and_script_along(tmp_path):
    proc, pid, tree = _start(tmp_path, "--break", "never_called_function_q")
    proc.kill()
    proc.communicate()
    assert_gone(tree)


def test_gdb_crash(tmp_path):
    proc, pid, tree = _start(tmp_path, "--break", "never_called_function_q")
    gdb = [p for p in tree if p.name().startswith("gdb")][0]
    gdb.kill()
    code, err = _finish(proc)
    assert code == 3, err
    assert "gdb exited unexpectedly" in err
    assert "Traceback" not in err
    assert_gone(tree)


def test_script_exits_before_any_hit(tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--break", "uname", "--json", str(out), script("exit_code.py"), "0"])
    assert r.returncode == 0
    assert load_json(out)["events"] == []
    assert "uname resolved but never fired" in r.stderr


def test_stack_of_a_running_process_leaves_it_running(tmp_path):
    ready = tmp_path / "pid"
    target = subprocess.Popen([os.environ.get("PYTHON", "python3"), script("sleeper.py"), str(ready)])
    try:
        wait_for_file(str(ready), 30, target)
        out = tmp_path / "s.json"
        r = run_tfnative(["stack", "--pid", str(target.pid), "--json", str(out)])
        assert r.returncode == 0, r.stderr
        doc = load_json(out)
        assert doc["pid"] == target.pid and "exit" not in doc
        ev = doc["events"][0]
        assert ev["kind"] == "snapshot"
        py = python_frames(ev["threads"][0]["frames"])
        assert [p[0] for p in py] == ["wait_here", "main", "<module>"]
        assert "[py] wait_here at" in r.stdout
        assert_running_untraced(target.pid)
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()


@pytest.mark.skipif(not os.path.exists("/proc/sys/kernel/yama/ptrace_scope"),
                    reason="needs a kernel with the Yama LSM (/proc/sys/kernel/yama/ptrace_scope); this one has none "
                           "(test_launcher_names_gdb_as_its_tracer checks the PR_SET_PTRACER call without it)")
def test_yama_scope_allows_our_gdb(tmp_path):
    r = run_tfnative(["attach", "--break", "uname", script("nested_uname.py")])
    assert r.returncode == 0, r.stderr
    assert "breakpoint uname hit" in r.stderr


def test_launcher_names_gdb_as_its_tracer(tmp_path):
    """Under Yama ptrace_scope=1 the paused child must call prctl(PR_SET_PTRACER, gdb).

    This machine has no Yama, so we check the call itself with strace.  strace
    being the child's tracer, gdb's attach is then refused for real: tfnative
    must say so in one line, and leave nothing behind.
    """
    import shutil

    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    log = tmp_path / "strace.log"
    r = subprocess.run(["strace", "-f", "-qq", "-e", "trace=prctl,execve", "-e", "signal=none", "-o", str(log)]
                       + TFNATIVE + ["attach", script("exit_code.py")], capture_output=True, text=True, timeout=120)
    text = log.read_text()
    gdb_pids = {ln.split()[0] for ln in text.splitlines() if "execve(" in ln and "/gdb" in ln}
    tracer = [ln for ln in text.splitlines() if "PR_SET_PTRACER" in ln or "0x59616d61" in ln.lower()]
    assert len(gdb_pids) == 1 and tracer, text
    assert tracer[0].split("prctl(", 1)[1].split(",")[1].strip().startswith(gdb_pids.pop())
    # and the refusal itself is one clear line
    assert r.returncode == 2
    assert "tfnative: error: the kernel refused ptrace" in r.stderr and "Traceback" not in r.stderr
    assert not [p for p in psutil.process_iter(["cmdline"]) if script("exit_code.py") in (p.info["cmdline"] or [])]


def test_orphaned_job_sees_the_same_signals_as_without_tfnative(tmp_path):
    """A background job whose shell exits (its process group is orphaned) runs on, as it does without tfnative.

    Field issue: the launcher's ``kill -STOP $$`` left the kernel's job-stop mark
    on the script, so orphaning the group sent SIGHUP + SIGCONT to it and the
    script died of SIGHUP.  Here the shell (job control on, as an interactive
    one) exits while the job runs; the script then records what it saw.
    """
    runs = {}
    for name, cmd in (("plain", "%s %s" % (sys.executable, script("outlive_shell.py"))),
                      ("tfnative", "%s attach %s" % (" ".join(TFNATIVE), script("outlive_shell.py")))):
        out = tmp_path / name
        job = "(%s %s 4 >%s.log 2>&1; echo $? >%s.rc) &" % (cmd, out, out, out)
        subprocess.run(["setsid", "bash", "-c", "set -m; %s until [ -e %s.started ]; do sleep 0.05; done; exit 0"
                        % (job, out)], timeout=120, check=True, stdin=subprocess.DEVNULL)
        runs[name] = out
    for name, out in runs.items():
        deadline = time.monotonic() + 90
        while not (os.path.exists(out) and os.path.exists(str(out) + ".rc")) and time.monotonic() < deadline:
            time.sleep(0.1)
        log = open(str(out) + ".log").read() if os.path.exists(str(out) + ".log") else ""
        assert os.path.exists(out), "%s: the script did not outlive its shell: %s" % (name, log)
        assert open(str(out) + ".rc").read().strip() == "0", log
    plain, traced = (open(runs[n]).read().split() for n in ("plain", "tfnative"))
    assert traced[-1] == plain[-1] == "none"  # the signals it saw: none, as without tfnative
