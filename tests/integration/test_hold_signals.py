"""The hold is invisible to the target's signals: what arrives while it is held is delivered after, and a
process stopped by job control stays stopped, with nothing new for its parent to see.

``tfnative stack`` lets go of the threads by ending the thread that traces them (the kernel detaches every
tracee of a tracer that exits, ``sources/ptrace.py``); these tests check on real processes that this
loses no signal and keeps a job-control stop.
"""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from ..utils import python_frames, run_tfnative, script, stack_event, state_of, tracer_of, wait_for_file

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

# 32 idle threads and a handler that counts SIGRTMIN (real-time signals queue: each one sent is one call);
# SIGTERM makes it print the count and exit.
COUNTER_C = textwrap.dedent("""\
    #include <pthread.h>
    #include <signal.h>
    #include <stdio.h>
    #include <unistd.h>

    static unsigned long got;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

    static void on_rt(int sig) { (void)sig; __atomic_add_fetch(&got, 1, __ATOMIC_RELAXED); }

    static void *idle(void *arg) {
        (void)arg;
        pthread_mutex_lock(&lock);
        for (;;) pthread_cond_wait(&never, &lock);
        return NULL;
    }

    int main(int argc, char **argv) {
        struct sigaction sa = {0};
        sa.sa_handler = on_rt;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGRTMIN, &sa, NULL);
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &term, NULL);  /* the threads inherit it: SIGTERM is for sigwait */
        for (int i = 0; i < 32; i++) {
            pthread_t t;
            pthread_create(&t, NULL, idle, NULL);
        }
        FILE *f = fopen(argv[1], "w");
        fputs("ready", f);
        fclose(f);
        int sig;
        sigwait(&term, &sig);
        printf("got %lu\\n", __atomic_load_n(&got, __ATOMIC_RELAXED));
        return 0;
    }
    """)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_signals_sent_during_holds_all_arrive(tmp_path):
    """2,000 SIGRTMIN sent while snapshot after snapshot holds the process: the handler runs 2,000 times."""
    src, exe, ready = tmp_path / "counter.c", tmp_path / "counter", tmp_path / "ready"
    src.write_text(COUNTER_C)
    subprocess.run(["gcc", "-O1", "-pthread", "-o", str(exe), str(src)], check=True)
    target = subprocess.Popen([str(exe), str(ready)], stdout=subprocess.PIPE, text=True)
    try:
        wait_for_file(str(ready), 30, target)
        sent = 0
        done = threading.Event()

        def send() -> None:
            nonlocal sent
            for _ in range(2000):
                os.kill(target.pid, signal.SIGRTMIN)
                sent += 1
                time.sleep(0.0005)
            done.set()

        sender = threading.Thread(target=send)
        sender.start()
        snapshots = 0
        while not done.is_set():
            r = run_tfnative(["stack", "--pid", str(target.pid), "--all-threads", "--samples", "5",
                              "--interval", "0"], timeout=120)
            assert r.returncode == 0, r.stderr
            snapshots += 5
        sender.join()
        assert snapshots >= 5
        time.sleep(0.5)
        assert tracer_of(target.pid) == 0 and state_of(target.pid) in ("S", "R")
        target.send_signal(signal.SIGTERM)
        out, _ = target.communicate(timeout=30)
        assert out.split() == ["got", str(sent)], (out, sent)
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()


def test_job_control_stop_is_kept(tmp_path):
    """A process stopped by SIGSTOP is shown, stays stopped afterwards, untraced, and its parent sees no
    stop or continue that it did not cause; SIGCONT then lets it run."""
    ready = tmp_path / "pid"
    target = subprocess.Popen([sys.executable, script("sleeper.py"), str(ready)])
    try:
        wait_for_file(str(ready), 30, target)
        os.kill(target.pid, signal.SIGSTOP)
        _pid, status = os.waitpid(target.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status) and os.WSTOPSIG(status) == signal.SIGSTOP
        for name in ("a", "b"):
            r, ev = stack_event(tmp_path, target.pid, name=name)
            assert r.returncode == 0, r.stderr
            assert [p[0] for p in python_frames(ev["threads"][0]["frames"])] == ["wait_here", "main", "<module>"]
            time.sleep(0.3)
            assert state_of(target.pid) == "T" and tracer_of(target.pid) == 0
            assert os.waitpid(target.pid, os.WNOHANG | os.WUNTRACED | os.WCONTINUED) == (0, 0)
        os.kill(target.pid, signal.SIGCONT)
        _pid, status = os.waitpid(target.pid, os.WCONTINUED)
        assert os.WIFCONTINUED(status)
        time.sleep(0.3)
        assert state_of(target.pid) in ("S", "R")
    finally:
        target.kill()
        target.wait()
