"""``tfnative attach --follow-children``: children of every kind, each under a session of its own.

One run of ``follow_children.py`` (no TensorFlow) checks them all: a ``multiprocessing`` spawn child hits
``--break uname``, a fork child and a spawn child die of SIGSEGV, a ``subprocess`` of the script hits the
breakpoint, and a fork child outlives the script.  Each event names its child, the script's exit status is
its own, and no process is left traced or stopped.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from tfnative.attach.procwatch import listen

from ..utils import (
    ROOT,
    TFNATIVE,
    assert_gone,
    descendants,
    line_of,
    load_json,
    python_frames,
    requires_gdb,
    requires_tf,
    run_tfnative,
    script,
    state_of,
    tracer_of,
    wait_for_file,
)

pytestmark = requires_gdb


def _hears_processes() -> bool:
    sock = listen()
    if sock is not None:
        sock.close()
    return sock is not None
SCRIPT = script("follow_children.py")
KERNEL_COMPUTE = "::Compute(tensorflow::OpKernelContext*)"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not _hears_processes():
        pytest.skip("needs the kernel's process events (netlink connector, CONFIG_PROC_EVENTS) open to this user: "
                    "this kernel refuses them")
    tmp = tmp_path_factory.mktemp("follow")
    pidfile, out = str(tmp / "idle.pid"), str(tmp / "f.json")
    proc = subprocess.Popen(TFNATIVE + ["attach", "--follow-children", "--break", "uname", "--json", out, SCRIPT,
                                        pidfile], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    helpers = {}  # every process under tfnative while it runs: its gdbs, the script, the children

    def gather():
        while proc.poll() is None:
            helpers.update((p.pid, p) for p in descendants(proc.pid))
            time.sleep(0.2)

    watcher = threading.Thread(target=gather, daemon=True)
    watcher.start()
    try:
        stdout, stderr = proc.communicate(timeout=600)
        watcher.join()
        idle = int(wait_for_file(pidfile, 10))
        yield {"rc": proc.returncode, "stdout": stdout, "stderr": stderr, "doc": load_json(out), "idle": idle,
               "helpers": list(helpers.values())}
    finally:
        if proc.poll() is None:
            proc.kill()
        if os.path.exists(pidfile):
            try:
                os.kill(int(open(pidfile).read()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def children(run):
    """{(method, function): pid} from the script's own output."""
    found = re.findall(r"^(spawn|fork) (\w+) (\d+) (-?\d+)$", run["stdout"], re.M)
    return {(m, f): (int(pid), int(code)) for m, f, pid, code in found}


def event_of(doc, pid):
    return [e for e in doc["events"] if (e.get("process") or {}).get("pid") == pid]


def test_outcome_unchanged(run):
    """The script's status and its children's ends are theirs."""
    assert run["rc"] == 3, run["stderr"]
    kids = children(run)
    assert kids[("spawn", "uname_child")][1] == 0
    assert kids[("fork", "crash_child")][1] == -signal.SIGSEGV
    assert kids[("spawn", "crash_child")][1] == -signal.SIGSEGV
    assert "subprocess 0" in run["stdout"]
    assert run["doc"]["exit"] == {"code": 3}
    killed = {c["pid"]: c["signal"] for c in run["doc"]["children_killed"]}
    assert killed == {kids[("fork", "crash_child")][0]: "SIGSEGV", kids[("spawn", "crash_child")][0]: "SIGSEGV"}


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_crashing_child_reported_with_its_stack(run, method):
    pid = children(run)[(method, "crash_child")][0]
    events = event_of(run["doc"], pid)
    assert [e["kind"] for e in events] == ["signal"]
    ev = events[0]
    assert ev["signal"] == "SIGSEGV" and ev["fatal"] is True and ev["thread"] == pid
    assert ev["process"]["pid"] == pid and "python" in ev["process"]["cmdline"]
    frames = ev["threads"][0]["frames"]
    assert frames[0]["kind"] == "native"
    crash_line = line_of(SCRIPT, "ctypes.string_at(0)")
    assert ("crash_child", "follow_children.py", crash_line) in python_frames(frames)
    header = "fatal signal SIGSEGV in child %d (" % pid
    assert header in run["stderr"]
    block = run["stderr"][run["stderr"].index(header):]
    assert "[py] crash_child at %s:%d  <-- your code" % (SCRIPT, crash_line) in block.split("\n\n")[0] + block


def test_breakpoint_in_spawned_child_and_in_subprocess(run):
    pid = children(run)[("spawn", "uname_child")][0]
    (ev,) = event_of(run["doc"], pid)
    assert ev["kind"] == "breakpoint" and ev["location"] == "uname"
    frames = ev["threads"][0]["frames"]
    assert "uname" in frames[0]["function"]
    assert python_frames(frames)[0] == ("uname_child", "follow_children.py", line_of(SCRIPT, "    os.uname()"))
    assert "breakpoint uname hit (hit 1 of 1) in child %d (" % pid in run["stderr"]
    # the subprocess of the script: python -c ..., its own breakpoint hit
    sub = [e for e in run["doc"]["events"] if "wait_followed(); os.uname()" in (e.get("process") or {}).get(
        "cmdline", "")]
    assert [e["kind"] for e in sub] == ["breakpoint"]
    assert python_frames(sub[0]["threads"][0]["frames"])[0][0] == "<module>"
    # the script itself never called uname: its own document has no event of its own
    assert all(e.get("process") for e in run["doc"]["events"])


def test_nothing_left_behind(run):
    """The child that outlives the script runs on untraced; no gdb, no helper of tfnative is left."""
    idle = run["idle"]
    assert state_of(idle) in ("S", "R") and tracer_of(idle) == 0
    assert_gone([p for p in run["helpers"] if p.pid != idle])


def test_refused_without_process_events():
    """Where the kernel's process events are refused (here: a seccomp filter), one line says so; nothing ran."""
    r = subprocess.run([sys.executable, script("seccomp_deny.py"), "netlink", *TFNATIVE, "attach", "--follow-children",
                        SCRIPT, "unused"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["tfnative: error: --follow-children needs the kernel's process events "
                                             "(the netlink proc connector), which this system refuses (kernels "
                                             "before 6.6 give them to root only)"]


@requires_tf
@pytest.mark.tf
def test_break_op_and_tensorflow_crash_in_a_child(tmp_path):
    """The script runs no TensorFlow; its spawn child does: --break-op MatMul stops in the child's kernel under
    the child's line, and its segfault in a py_function is reported with the callback's line."""
    if not _hears_processes():
        pytest.skip("needs the kernel's process events (netlink connector, CONFIG_PROC_EVENTS) open to this user: "
                    "this kernel refuses them")
    tf_script = script("tf_follow_child.py")
    out = tmp_path / "tf.json"
    r = run_tfnative(["attach", "--follow-children", "--break-op", "MatMul", "--json", str(out), tf_script],
                     timeout=600)
    assert r.returncode == 0, r.stderr  # the script's own status: its child's death is the child's
    pid = int(re.search(r"^tf child (\d+) -11$", r.stdout, re.M).group(1))
    doc = load_json(out)
    hit, crash = event_of(doc, pid)
    assert hit["kind"] == "breakpoint" and hit["op"]["type"] == "MatMul"
    assert KERNEL_COMPUTE in hit["threads"][0]["frames"][0]["function"]
    assert ("tf_child", "tf_follow_child.py", line_of(tf_script, "CHILD MATMUL LINE")) in python_frames(
        hit["threads"][0]["frames"])
    assert crash["kind"] == "signal" and crash["signal"] == "SIGSEGV" and crash["fatal"] is True
    names = python_frames(crash["threads"][0]["frames"])
    assert names[:2] == [("string_at", "__init__.py", names[0][2]),
                         ("bad_callback", "tf_follow_child.py", line_of(tf_script, "ctypes.string_at(0)"))]
    assert ("tf_child", "tf_follow_child.py", line_of(tf_script, "CHILD PYFUNC LINE")) in names
    assert "breakpoint op MatMul hit (hit 1 of 1) in child %d (" % pid in r.stderr
    assert "fatal signal SIGSEGV in child %d (" % pid in r.stderr
    assert doc["exit"] == {"code": 0} and doc["triage"]["signal"] is None
    assert [c["pid"] for c in doc["children_killed"]] == [pid]
