"""Stacks where CFI runs out or memory is odd: thread start, the vDSO, signal handlers.

Each test snapshots a real process with ``tfnative stack`` and checks that
the snapshot stays gdb-free (``"via": "cfi"``) and that every thread is
unwound to its start (``_start`` for the main thread, ``clone3``/``clone``
for the others).
"""

import shutil
import subprocess
import sys
import textwrap

import pytest

from ..utils import load_json, python_frames, run_tfnative, script, stack_event, wait_for_file

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

THREAD_ENDS = ("_start", "clone3", "clone")


def _start(tmp_path, argv):
    ready = tmp_path / "ready"
    target = subprocess.Popen([*argv, str(ready)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_file(str(ready), 60, target)
    return target


def _snapshot(tmp_path, pid, name="s"):
    r, ev = stack_event(tmp_path, pid, "--all-threads", "--native-all", name=name)
    assert "through gdb" not in r.stderr, r.stderr
    assert ev["via"] == "cfi"
    return ev


def _compiled(tmp_path, name, source, opt):
    """A C program of the test, built with gcc ``opt``: its path."""
    src = tmp_path / (name + ".c")
    src.write_text(source)
    exe = tmp_path / name
    subprocess.run(["gcc", opt, "-o", str(exe), str(src)], check=True)
    return exe


def _complete(ev):
    for t in ev["threads"]:
        assert t["frames"][-1]["function"] in THREAD_ENDS, (t["tid"], [f["function"] for f in t["frames"]])


def test_thread_churn_never_goes_through_gdb(tmp_path):
    """Threads caught at birth (just after clone3, no FDE) end their stack there: no gdb, every thread whole."""
    target = _start(tmp_path, [sys.executable, script("thread_churn.py")])
    try:
        for i in range(8):
            ev = _snapshot(tmp_path, target.pid, "s%d" % i)
            _complete(ev)
            main = ev["threads"][0]
            assert main["tid"] == target.pid and main["frames"][-1]["function"] == "_start"
            assert ("<module>", "thread_churn.py", 22) in python_frames(main["frames"])
        # through gdb too: no frame at address 0 below clone3
        out = tmp_path / "gdb.json"
        r = run_tfnative(["stack", "--pid", str(target.pid), "--all-threads", "--native-all", "--with-gdb",
                          "--json", str(out)], timeout=300)
        assert r.returncode == 0, r.stderr
        for t in load_json(out)["events"][0]["threads"]:
            assert all(int(f["address"], 16) for f in t["frames"] if f["kind"] == "native"), t["frames"][-2:]
            assert t["frames"][-1]["function"] in THREAD_ENDS, [f["function"] for f in t["frames"]]
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()


SPINNER_C = textwrap.dedent("""\
    #include <stdio.h>
    #include <time.h>

    static long spin(void) {
        struct timespec ts;
        long n = 0;
        for (;;) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            n += ts.tv_nsec & 1;
        }
        return n;
    }

    int main(int argc, char **argv) {
        FILE *f = fopen(argv[1], "w");
        fputs("ready", f);
        fclose(f);
        return (int)spin();
    }
    """)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_vdso_frames_unwound_from_the_vdso_image(tmp_path):
    """clock_gettime runs in the vDSO (no file): its CFI and name come from the image in memory."""
    exe = _compiled(tmp_path, "spin", SPINNER_C, "-O1")
    target = _start(tmp_path, [str(exe)])
    try:
        in_vdso = 0
        for i in range(10):
            ev = _snapshot(tmp_path, target.pid, "s%d" % i)
            _complete(ev)
            frames = ev["threads"][0]["frames"]
            names = [(f["function"], f["library"]) for f in frames]
            assert ("main", "spin") in names
            if frames[0]["library"] == "[vdso]":
                in_vdso += 1
                assert "clock_gettime" in frames[0]["function"], names
                assert names[1][1] == "libc.so.6" and "clock_gettime" in names[1][0], names
        assert in_vdso  # the spinner lives in the vDSO: most snapshots catch it there
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()


HANDLER_C = textwrap.dedent("""\
    #include <signal.h>
    #include <stdio.h>
    #include <unistd.h>

    static const char *ready;

    static void on_usr1(int sig) {
        FILE *f = fopen(ready, "w");
        fputs("ready", f);
        fclose(f);
        for (;;) {
            usleep(10000);
        }
    }

    int main(int argc, char **argv) {
        ready = argv[1];
        signal(SIGUSR1, on_usr1);
        raise(SIGUSR1);
        return 0;
    }
    """)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_signal_trampoline_named_as_gdb_names_it(tmp_path):
    """A thread inside a signal handler: the trampoline frame is ``<signal handler called>``, then main."""
    exe = _compiled(tmp_path, "handler", HANDLER_C, "-O0")
    target = _start(tmp_path, [str(exe)])
    try:
        ev = _snapshot(tmp_path, target.pid)
        _complete(ev)
        names = [f["function"] for f in ev["threads"][0]["frames"]]
        k = names.index("<signal handler called>")
        assert names[k - 1] == "on_usr1" and "main" in names[k + 1:], names
        out = tmp_path / "gdb.json"
        r = run_tfnative(["stack", "--pid", str(target.pid), "--all-threads", "--native-all", "--with-gdb",
                          "--json", str(out)], timeout=300)
        assert r.returncode == 0, r.stderr
        gdb_names = [f["function"] for f in load_json(out)["events"][0]["threads"][0]["frames"]]
        assert "<signal handler called>" in gdb_names and "on_usr1" in gdb_names, gdb_names
    finally:
        target.kill()
        target.wait()


@pytest.mark.parametrize("mode,how", [("fp", "frame-pointer"), ("nofp", "scan")])
def test_jit_page_without_cfi(tmp_path, mode, how):
    """Machine code in an anonymous executable page (as a JIT writes it) calls back into Python.

    The page has no CFI: it is named ``[anon:jit]`` and its caller (libffi's
    call into it) is recovered by its frame pointer, or without one by a
    stack scan, marked so; the unwind goes on with CFI to ``_start``.
    """
    target = _start(tmp_path, [sys.executable, script("jit_page.py"), mode])
    try:
        ev = _snapshot(tmp_path, target.pid)
        _complete(ev)
        frames = ev["threads"][0]["frames"]
        k = next(i for i, f in enumerate(frames) if f.get("library") == "[anon:jit]")
        assert frames[k]["function"] == "??" and "recovered" not in frames[k]
        assert frames[k + 1]["recovered"] == how and frames[k + 1]["library"].startswith("libffi")
        names = [f["function"] for f in frames]
        assert [f["function"] for f in frames[:k] if f["kind"] == "python"] == ["in_callback"]
        assert names.index("ffi_call") > k and names.index("_ctypes_callproc") > k
        assert [f["function"] for f in frames[k:] if f["kind"] == "python"] == ["run_jit", "<module>"]
        assert all(f.get("recovered") in (None, how) for f in frames)
        assert target.poll() is None
    finally:
        target.kill()
        target.wait()
