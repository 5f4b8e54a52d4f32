"""tfnative merge on real snapshots: three Python processes, two waiting at the same line, one elsewhere;
`tfnative stack --pid P --json -` of each piped into `tfnative merge -` flags the odd one at its line."""

import json
import os
import subprocess
import sys

from tfnative.output.merge import compress

from ..utils import TFNATIVE, line_of, run_tfnative, script, wait_for_file


def test_merge_flags_the_odd_process(tmp_path):
    src = script("merge_worker.py")
    procs = []
    try:
        for i, mode in enumerate(("peer", "peer", "odd")):
            ready = tmp_path / ("ready%d" % i)
            procs.append(subprocess.Popen([sys.executable, src, mode, str(ready)]))
            wait_for_file(str(ready), proc=procs[-1])
        docs = []
        for p in procs:
            r = run_tfnative(["stack", "--pid", str(p.pid), "--json", "-"])
            assert r.returncode == 0, r.stderr
            docs.append(r.stdout)
        stdin = "".join(docs)
        r = subprocess.run(TFNATIVE + ["merge", "-"], input=stdin, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        odd_pid, peers = procs[2].pid, sorted(p.pid for p in procs[:2])
        odd_line = line_of(src, "the odd one stalls here")
        wait_line = line_of(src, "the peers wait here")
        assert lines[0].startswith("3 processes")
        flagged = [ln for ln in lines if "<== OUTLIER" in ln]
        assert len(flagged) == 1, r.stdout
        # the odd one leaves the others where main calls a different function: flagged at that line
        assert "[py] main at %s:%d" % (src, line_of(src, "stall_elsewhere(sys.argv[2])")) in flagged[0]
        host = os.uname().nodename  # each document names its host
        assert "[%s:%d]" % (host, odd_pid) in flagged[0]
        below = lines[lines.index(flagged[0]) + 1]
        assert "[py] stall_elsewhere at %s:%d" % (src, odd_line) in below
        both = [ln for ln in lines if "[py] wait_for_peers at %s:%d" % (src, wait_line) in ln]
        assert len(both) == 1, r.stdout
        assert "[%s]" % compress("%s:%d" % (host, p) for p in peers) in both[0]
        assert "(2 threads)" in both[0]
        # the same documents as --json: the tree's root has all three
        r = subprocess.run(TFNATIVE + ["merge", "-", "--json", "-"], input=stdin, capture_output=True, text=True,
                           timeout=120)
        tree = json.loads(r.stdout)
        assert len(tree["tree"]["members"]) == 3 and tree["tree"]["frame"] is None
        # a reader that has gone (``| head``, here ``| true``, gone before merge writes): quiet, 141 like cat
        docs_file = tmp_path / "docs.jsonl"
        docs_file.write_text(stdin)
        r = subprocess.run(["bash", "-c", '"$@" | true; echo "status ${PIPESTATUS[0]}"', "pipe",
                            *TFNATIVE, "merge", str(docs_file)], capture_output=True, text=True, timeout=120)
        assert r.stdout.strip() == "status 141" and r.stderr == "", r.stderr
    finally:
        for p in procs:
            p.kill()
            p.wait()
