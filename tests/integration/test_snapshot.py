"""``tfnative stack`` without gdb, and when it hands over to gdb.

The gdb-free snapshot (``tfnative/snapshot/pipeline.py``) must give the frames gdb
gives (``test_fast_path.py`` compares the two on TensorFlow); here: the case
it must refuse (a library with its own DWARF), where gdb takes over, code
without CFI, whose caller it recovers (checked against gdb), and a stripped
interpreter, where it must still work.
"""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ..utils import (
    TFNATIVE,
    assert_running_untraced,
    load_json,
    python_frames,
    requires_gdb,
    run_tfnative,
    script,
    state_of,
    tracer_of,
    wait_for_file,
)

pytestmark = [requires_gdb, pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")]

BLOCK_CPP = textwrap.dedent("""\
    #include <unistd.h>
    extern "C" void tfn_block(const char *release) {
        while (access(release, F_OK) != 0) {
            usleep(20000);
        }
    }
    """)

CALLER = textwrap.dedent("""\
    import ctypes
    import os
    import sys


    def call_native(lib, release):
        lib.tfn_block(release.encode())


    def main():
        lib = ctypes.CDLL(sys.argv[1])
        with open(sys.argv[2], "w") as f:
            f.write(str(os.getpid()))
        call_native(lib, sys.argv[3])


    main()
    """)


def _library(tmp_path, name, *flags):
    src = tmp_path / "block.cc"
    src.write_text(BLOCK_CPP)
    out = tmp_path / name
    subprocess.run(["g++", "-shared", "-fPIC", "-O0", *flags, "-o", str(out), str(src)], check=True)
    return out


def _blocked(tmp_path, lib, python=sys.executable):
    caller = tmp_path / "caller.py"
    caller.write_text(CALLER)
    ready, release = tmp_path / "ready", tmp_path / "release"
    target = subprocess.Popen([python, str(caller), str(lib), str(ready), str(release)])
    wait_for_file(str(ready), 60, target)
    time.sleep(0.2)  # inside tfn_block's loop
    return target, release


def _stack(tmp_path, pid):
    out = tmp_path / "s.json"
    r = run_tfnative(["stack", "--pid", str(pid), "--json", str(out)], timeout=300)
    assert r.returncode == 0, r.stderr
    return load_json(out)["events"][0], r


def _finish(target, release):
    release.write_text("")
    assert target.wait(timeout=60) == 0


def test_library_with_own_debug_info_goes_through_gdb(tmp_path):
    """A frame in a library built with -g: gdb, for its file:line."""
    lib = _library(tmp_path, "libblock_g.so", "-g")
    target, release = _blocked(tmp_path, lib)
    try:
        ev, r = _stack(tmp_path, target.pid)
        assert ev["via"] == "gdb"
        assert "taking the snapshot through gdb: %s has debug info" % lib in r.stderr
        frames = ev["threads"][0]["frames"]
        block = next(f for f in frames if f["function"].startswith("tfn_block"))
        assert block["library"] == "libblock_g.so"
        assert os.path.basename(block["file"]) == "block.cc" and block["line"] == 4
        assert [p[0] for p in python_frames(frames)] == ["call_native", "main", "<module>"]
        _finish(target, release)
    finally:
        target.kill()
        target.wait()


def test_code_without_cfi_recovered_by_frame_pointer(tmp_path):
    """A frame with no FDE: its caller is recovered from its frame pointer, marked, and gdb agrees."""
    lib = _library(tmp_path, "libblock_nocfi.so", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
                   "-fno-exceptions", "-fno-omit-frame-pointer")
    target, release = _blocked(tmp_path, lib)
    try:
        ev, r = _stack(tmp_path, target.pid)
        assert ev["via"] == "cfi", r.stderr
        frames = ev["threads"][0]["frames"]
        names = [f["function"] for f in frames]
        k = names.index("tfn_block")
        assert frames[k]["library"] == "libblock_nocfi.so" and "recovered" not in frames[k]
        # tfn_block has no CFI: the frame after it was found through its frame pointer
        assert frames[k + 1]["recovered"] == "frame-pointer" and frames[k + 1]["kind"] == "native"
        assert [p[0] for p in python_frames(frames)] == ["call_native", "main", "<module>"]
        out = tmp_path / "gdb.json"
        g = run_tfnative(["stack", "--pid", str(target.pid), "--with-gdb", "--json", str(out)], timeout=300)
        assert g.returncode == 0, g.stderr
        theirs = load_json(out)["events"][0]["threads"][0]["frames"]
        assert [(f["function"], f.get("address")) for f in frames if not f.get("inline")][k:] == \
            [(f["function"], f.get("address")) for f in theirs if not f.get("inline")][k:]
        _finish(target, release)
    finally:
        target.kill()
        target.wait()


def test_library_with_cfi_only_is_read_without_gdb(tmp_path):
    """The same library without -g: no gdb, and the native frame sits between the Python ones."""
    lib = _library(tmp_path, "libblock.so")
    target, release = _blocked(tmp_path, lib)
    try:
        ev, r = _stack(tmp_path, target.pid)
        assert ev["via"] == "cfi", r.stderr
        assert "through gdb" not in r.stderr
        # copy, then let go: the hold is measured, and the unwind needed nothing outside the copy
        assert isinstance(ev["held_ms"], float) and 0 < ev["held_ms"] < 60000
        assert not any(t.get("after_release") for t in ev["threads"])
        frames = ev["threads"][0]["frames"]
        names = [f["function"] for f in frames]
        k = names.index("tfn_block")
        assert frames[k]["library"] == "libblock.so"
        # the libc frames of usleep above it, the ctypes call and Python frames below it
        assert any(f.get("library") == "libc.so.6" for f in frames[:k])
        assert names[k + 1:].index("call_native") < names[k + 1:].index("main")
        _finish(target, release)
        assert state_of(target.pid) is None
    finally:
        target.kill()
        target.wait()


STRIPPED = "/usr/bin/python3.11"


@pytest.mark.skipif(not os.path.exists(STRIPPED), reason="no Debian python3.11 here")
def test_stripped_interpreter_without_gdb(tmp_path):
    """Debian's python3.11 has no .symtab and no DWARF: .dynsym and CFI are enough."""
    ready = tmp_path / "pid"
    target = subprocess.Popen([STRIPPED, script("sleeper.py"), str(ready)])
    try:
        wait_for_file(str(ready), 30, target)
        ev, r = _stack(tmp_path, target.pid)
        assert ev["via"] == "cfi", r.stderr
        assert ev["python"] == "3.11"
        frames = ev["threads"][0]["frames"]
        assert [p[0] for p in python_frames(frames)] == ["wait_here", "main", "<module>"]
        assert frames[-1]["function"] == "_start"
        assert_running_untraced(target.pid)
    finally:
        target.kill()
        target.wait()


MANY_THREADS = textwrap.dedent("""\
    import os
    import sys
    import threading
    import time


    def idle():
        while True:
            time.sleep(0.01)


    for _ in range(int(sys.argv[3])):
        threading.Thread(target=idle, daemon=True).start()
    with open(sys.argv[1], "w") as f:
        f.write(str(os.getpid()))
    n = 0
    while True:
        n += 1
        with open(sys.argv[2] + ".tmp", "w") as f:
            f.write(str(n))
        os.replace(sys.argv[2] + ".tmp", sys.argv[2])
        time.sleep(0.01)
    """)


def _tasks_held(pid):
    """Threads of ``pid`` in a tracing stop ("t"), and its TracerPid."""
    held = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "t":
                    held.append(tid)
        except OSError:
            pass
    return held, tracer_of(pid)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_killed_while_holding_the_threads_lets_them_go(tmp_path, how):
    """tfnative killed (or interrupted) while it holds a process's threads: they all run on."""
    prog = tmp_path / "many.py"
    prog.write_text(MANY_THREADS)
    ready, beat = tmp_path / "ready", tmp_path / "beat"
    target = subprocess.Popen([sys.executable, str(prog), str(ready), str(beat), "300"])
    try:
        wait_for_file(str(ready), 60, target)
        caught = False
        for _attempt in range(20):
            proc = subprocess.Popen([*TFNATIVE, "stack", "--pid", str(target.pid),
                                     "--all-threads"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and proc.poll() is None:
                _held, tracer = _tasks_held(target.pid)
                if tracer == proc.pid:
                    proc.send_signal(getattr(signal, how))
                    caught = True
                    break
                time.sleep(0.001)
            proc.communicate(timeout=60)
            if caught:
                break
        assert caught, "never saw tfnative holding the threads"
        if how == "SIGINT":
            assert proc.returncode == 130
        else:
            assert proc.returncode == -signal.SIGKILL
        time.sleep(0.5)
        held, tracer = _tasks_held(target.pid)
        assert tracer == 0 and held == []
        before = int(beat.read_text())
        time.sleep(0.5)
        assert int(beat.read_text()) > before  # the main thread runs on
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()
