"""``tfnative stack`` on several processes at once, on real Python processes (no TensorFlow here):
``--pid`` repeated with a pid that is gone, ``--match``, JSON Lines into ``merge``, the same fanned out by
``pdsh -R exec``, and identical thread stacks grouped by ``--all-threads``."""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from tfnative.output.merge import compress
from tfnative.output.threadgroups import ranges

from ..utils import (
    TFNATIVE,
    assert_running_untraced,
    kill_all,
    line_of,
    run_tfnative,
    script,
    start_merge_workers,
    wait_for_file,
)

WORKER = script("merge_worker.py")
TFNATIVE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "tfnative")


def gone_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def check_merge(stdout, procs):
    """``merge -`` of the documents: three processes, the odd one flagged at its line."""
    r = subprocess.run(TFNATIVE + ["merge", "-"], input=stdout, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("3 processes"), r.stdout
    flagged = [ln for ln in lines if "<== OUTLIER" in ln]
    assert len(flagged) == 1, r.stdout
    assert "[py] main at %s:%d" % (WORKER, line_of(WORKER, "stall_elsewhere(sys.argv[2])")) in flagged[0]
    return lines, flagged[0]


def test_several_pids_one_gone(tmp_path):
    procs = start_merge_workers(tmp_path, ("peer", "peer", "odd"), "w")
    try:
        dead = gone_pid()
        args = ["stack", "--json", "-", "--label", "rank=7"]
        for p in procs[:2] + [type("P", (), {"pid": dead})] + procs[2:]:
            args += ["--pid", str(p.pid)]
        r = run_tfnative(args, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "tfnative: pid %d not reported: no process with pid %d" % (dead, dead) in r.stderr
        docs = [json.loads(line) for line in r.stdout.splitlines()]
        assert [d["pid"] for d in docs] == [p.pid for p in procs]  # the order given, one line each
        for d in docs:
            assert d["tfnative"] == 1 and d["host"] == os.uname().nodename and d["labels"] == {"rank": "7"}
            assert "task" not in d  # no TF_CONFIG
        odd = docs[2]["events"][0]["threads"][0]["frames"]
        assert any(f.get("function") == "stall_elsewhere" and f.get("line") == line_of(WORKER, "the odd one stalls")
                   for f in odd)
        for p in procs:
            assert_running_untraced(p.pid)
        # one label shared by all names none of them: merge falls back to host:pid
        lines, flagged = check_merge(r.stdout, procs)
        assert "[%s:%d] (1 thread)" % (os.uname().nodename, procs[2].pid) in flagged
    finally:
        kill_all(procs)


def test_only_gone_pids_fail(tmp_path):
    a, b = gone_pid(), gone_pid()
    r = run_tfnative(["stack", "--pid", str(a), "--pid", str(b)])
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == "tfnative: error: none of the 2 process(es) could be read"


def test_match_into_merge(tmp_path):
    procs = start_merge_workers(tmp_path, ("peer", "odd", "peer"), "matchme")
    try:
        r = run_tfnative(["stack", "--match", "merge_worker.py .*/matchme-", "--json", "-"])
        assert r.returncode == 0, r.stderr
        docs = [json.loads(line) for line in r.stdout.splitlines()]
        assert sorted(d["pid"] for d in docs) == sorted(p.pid for p in procs)
        lines, flagged = check_merge(r.stdout, procs)
        host = os.uname().nodename
        assert "[%s:%d]" % (host, procs[1].pid) in flagged
        peers = [ln for ln in lines if "wait_for_peers at" in ln]
        assert len(peers) == 1 and "[%s]" % compress("%s:%d" % (host, p.pid) for p in (procs[0], procs[2])) in peers[0]
        # text: one block per process, each named
        r = run_tfnative(["stack", "--match", "merge_worker.py .*/matchme-"])
        assert r.returncode == 0, r.stderr
        for p in procs:
            assert "##### process %d on %s: %s %s" % (p.pid, host, sys.executable, WORKER) in r.stdout
    finally:
        kill_all(procs)


@pytest.mark.skipif(shutil.which("pdsh") is None or not os.path.exists(TFNATIVE_SCRIPT),
                    reason="pdsh (.ci/setup installs it) or the tfnative script is missing")
def test_pdsh_fan_out(tmp_path):
    """Two "hosts" through pdsh's exec module, each snapshotting its own processes (its name in their
    command lines); pdsh prefixes each line with ``host: ``, merge reads it as it is."""
    procs = (start_merge_workers(tmp_path, ("peer", "odd"), "fan-localhost")
             + start_merge_workers(tmp_path, ("peer",), "fan-127.0.0.1"))
    try:
        # the console script: pdsh execs its command by its base name, which loses python's venv
        cmd = ["pdsh", "-S", "-R", "exec", "-w", "localhost,127.0.0.1", TFNATIVE_SCRIPT,
               "stack", "--match", r"merge_worker.py .*/fan-%h-\d+$", "--json", "-"]
        fan = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert fan.returncode == 0, fan.stderr
        hosts = sorted(line.split(": ", 1)[0] for line in fan.stdout.splitlines())
        assert hosts == ["127.0.0.1", "localhost", "localhost"], fan.stdout[:300]
        lines, flagged = check_merge(fan.stdout, procs)
        assert ":%d]" % procs[1].pid in flagged
        peers = [ln for ln in lines if "wait_for_peers at" in ln]
        assert len(peers) == 1 and "(2 threads)" in peers[0]
    finally:
        kill_all(procs)


def test_identical_threads_grouped(tmp_path):
    ready = tmp_path / "ready"
    src = script("same_threads.py")
    p = subprocess.Popen([sys.executable, src, str(ready)])
    try:
        six = sorted(int(t) for t in wait_for_file(str(ready), proc=p).split())
        wait_line = line_of(src, "the six wait here")
        for _ in range(100):  # until the six threads have all reached their wait (the same snapshot's JSON)
            out = tmp_path / "s.json"
            r = run_tfnative(["stack", "--pid", str(p.pid), "--all-threads", "--json", str(out)])
            assert r.returncode == 0, r.stderr
            threads = json.loads(out.read_text())["events"][0]["threads"]
            there = [t["tid"] for t in threads
                     if any(f.get("function") == "pool_worker" and f.get("line") == wait_line for f in t["frames"])]
            if sorted(there) == six:
                break
        heads = [ln for ln in r.stdout.splitlines() if ln.startswith(("Thread ", "6 threads"))]
        group = [ln for ln in heads if ln.startswith("6 threads")]
        assert group == ["6 threads (python %s) [S in futex]" % ranges(six)], heads
        block = r.stdout.split(group[0], 1)[1].split("\n\n", 1)[0]
        assert "[py] pool_worker at %s:%d" % (src, line_of(src, "the six wait here")) in block
        assert len(heads) == 3, heads  # main, the six, the loner
        r = run_tfnative(["stack", "--pid", str(p.pid), "--all-threads", "--no-group"])
        heads = [ln for ln in r.stdout.splitlines() if ln.startswith("Thread ")]
        assert len(heads) == 8 and not any("threads (" in ln for ln in r.stdout.splitlines())
    finally:
        p.kill()
        p.wait()


def test_a_process_that_vanishes_between_samples(tmp_path):
    """Two processes sampled three times; one is killed once the second round of samples begins: the
    other is still reported, the vanished one named in one line, exit status 0."""
    procs = start_merge_workers(tmp_path, ("peer", "odd"), "v")
    out = tmp_path / "out.jsonl"
    cmd = TFNATIVE + ["stack", "--pid", str(procs[0].pid), "--pid", str(procs[1].pid), "--samples", "3",
                      "--interval", "1", "--json", str(out)]
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        seen = []
        for line in run.stderr:
            seen.append(line)
            if line.startswith("tfnative: sample 2 of 3"):
                procs[1].kill()  # gone before its next sample at the latest
                procs[1].wait()
                break
        stdout, rest = run.communicate(timeout=300)
        err = "".join(seen) + rest
        assert run.returncode == 0, err
        assert "tfnative: pid %d not reported: process %d exited" % (procs[1].pid, procs[1].pid) in err \
            or "tfnative: pid %d not reported: no process with pid %d" % (procs[1].pid, procs[1].pid) in err, err
        assert "Traceback" not in err
        docs = [json.loads(line) for line in out.read_text().splitlines()]
        assert [d["pid"] for d in docs] == [procs[0].pid]
        assert docs[0]["events"][0]["samples"]["count"] == 3
        assert "##### process %d " % procs[0].pid in stdout and "##### process %d " % procs[1].pid not in stdout
        assert_running_untraced(procs[0].pid)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        kill_all(procs)


def test_ctrl_c_releases_every_process(tmp_path):
    procs = start_merge_workers(tmp_path, ("peer", "peer", "odd"), "c")
    cmd = TFNATIVE + ["stack", "--samples", "20", "--interval", "0.2"]
    for p in procs:
        cmd += ["--pid", str(p.pid)]
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        for line in run.stderr:
            if line.startswith("tfnative: sample 3 of 20"):
                break
        run.send_signal(signal.SIGINT)
        stdout, err = run.communicate(timeout=120)
        assert run.returncode == 130, err
        assert "interrupted: every process released" in err and "Traceback" not in err
        assert "#####" not in stdout
        for p in procs:
            assert_running_untraced(p.pid)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        kill_all(procs)


def test_libraries_read_once_for_all_processes(tmp_path):
    """Two processes map libc at other addresses: each has its own library object (its own load bias),
    and both share the file's symbol index and CFI, opened once."""
    from tfnative.snapshot import pipeline as snapshot
    from tfnative.sources import modules

    procs = start_merge_workers(tmp_path, ("peer", "peer"), "share")
    try:
        for p in procs:
            assert snapshot.take(p.pid).threads
        libs = [{lib.name: lib for lib in modules.of_pid(p.pid)} for p in procs]
        name = next(n for n in libs[0] if n.startswith("libc.so"))
        a, b = libs[0][name], libs[1][name]
        if a.bias == b.bias:
            pytest.skip("both processes mapped %s at the same address (no ASLR?)" % name)
        assert a is not b
        assert a.indexes() is b.indexes() and a.indexes()
        assert a.cfi is b.cfi
        for p in procs:
            assert_running_untraced(p.pid)
    finally:
        kill_all(procs)
