"""``tfnative merge`` of 10,000 node trees of 8 ranks each, as ``stack --slurm-job`` on a big job merges them.

    .venv/bin/python bench/bench_merge_scale.py [--nodes 10000] [--ranks 8] [--runs 3] [--out FILE]

Each node of a job reduces its ranks to one tree (``tfnative merge --tree``, rank sets as ranges: LLNL STAT's
scheme) and the head merges the node trees.  The node trees are made the way a node makes them: 8 ``stack
--json`` documents per node (a Slurm rank each, 3 Python threads each, 30 to 60 frames: real TensorFlow native
frames under a training loop's Python frames, 4 stack shapes by local rank), reduced by ``tfnative merge --tree``
itself, for a normal node and for the odd one (node 4321, whose rank 3 is stuck elsewhere); the other nodes'
trees are those with the node's ranks, host, pids put in (what that node's own ``merge --tree`` would write).
Then ``tfnative merge`` of all node trees (a directory of files, as the head gathers them) is timed, the whole
command (interpreter start included), ``--runs`` times: medians, and the peak RSS of the command
(``resource.getrusage(RUSAGE_CHILDREN)``, each run in its own child).  The outlier must be named in the
output, as ``rank:34571`` (4321 x 8 + 3).  Target: under 10 s; memory bounded by the tree, not the ranks.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchutil import publish  # noqa: E402

PY = sys.executable
ODD_NODE, ODD_LOCAL = 4321, 3
JOB = "4242"


def native_base() -> List[Dict[str, Any]]:
    """Real native frames (innermost first) of a TF 2.21 thread waiting in ``step`` (tests/unit/data)."""
    with open(os.path.join(ROOT, "tests", "unit", "data", "doc_stack_a.json")) as f:
        doc = json.load(f)
    return [f for f in doc["events"][0]["threads"][0]["frames"] if f["kind"] == "native"]


def py(function: str, file: str, line: int) -> Dict[str, Any]:
    return {"kind": "python", "function": function, "file": file, "line": line, "user": True, "class": "user"}


def thread_frames(shape: int, native: List[Dict[str, Any]]) -> List[List[Dict[str, Any]]]:
    """The 3 Python threads of a rank, innermost frame first; ``shape``: 0-3 normal ones, 9 the odd rank."""
    train = "/home/user/model/train.py"
    outer = [py("<module>", train, 310), py("main", train, 288), py("fit", "/home/user/model/loop.py", 140),
             py("run_epoch", "/home/user/model/loop.py", 97)]
    inner = {0: [py("train_step", train, 55), py("all_reduce", "/home/user/model/dist.py", 31)],
             1: [py("train_step", train, 55), py("all_reduce", "/home/user/model/dist.py", 33)],
             2: [py("train_step", train, 58), py("barrier", "/home/user/model/dist.py", 70)],
             3: [py("train_step", train, 58), py("barrier", "/home/user/model/dist.py", 72)],
             9: [py("save_checkpoint", train, 201), py("write_shard", "/home/user/model/ckpt.py", 12),
                 py("flush", "/home/user/model/ckpt.py", 40)]}[shape]
    main = list(reversed(outer + inner)) + native[:30]  # Python frames above the native wait: ~36-37
    loader = list(reversed([py("_bootstrap", "/usr/lib/python3.11/threading.py", 995),
                            py("run", "/usr/lib/python3.11/threading.py", 975),
                            py("prefetch", "/home/user/model/data.py", 88 + shape % 2)])) + native[:40]
    ckpt = list(reversed([py("_bootstrap", "/usr/lib/python3.11/threading.py", 995),
                          py("run", "/usr/lib/python3.11/threading.py", 975),
                          py("watch", "/home/user/model/ckpt.py", 150)])) + native[:52]
    return [main, loader, ckpt]


def node_documents(node: int, ranks: int, native: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    host = "node%05d" % node
    docs = []
    for local in range(ranks):
        rank = node * ranks + local
        shape = 9 if (node, local) == (ODD_NODE, ODD_LOCAL) else local % 4
        threads = [{"tid": 1000 + rank * 3 + i, "name": "python", "frames": frames}
                   for i, frames in enumerate(thread_frames(shape, native))]
        docs.append({"tfnative": 1, "pid": 20000 + local, "host": host,
                     "scheduler": {"kind": "slurm", "rank": rank, "job": JOB, "step": "0", "node": host,
                                   "local_rank": local},
                     "events": [{"kind": "snapshot", "threads": threads}]})
    return docs


def reduced(docs: List[Dict[str, Any]], work: str) -> Dict[str, Any]:
    """``tfnative merge --tree -`` of a node's documents: its tree, parsed."""
    text = "".join(json.dumps(d) + "\n" for d in docs)
    r = subprocess.run([PY, "-m", "tfnative", "merge", "-", "--tree", "-"], input=text, capture_output=True,
                       text=True, cwd=ROOT, timeout=120, check=True)
    return dict(json.loads(r.stdout))


def moved(template: Dict[str, Any], node: int, ranks: int) -> str:
    """Node 0's tree as node ``node``'s own ``merge --tree`` writes it: its ranks, host, pids."""
    shift = node * ranks
    host = "node%05d" % node
    processes = []
    for p in template["processes"]:
        q = copy.deepcopy(p)
        rank = q["scheduler"]["rank"] + shift
        q["label"], q["host"] = "rank:%d" % rank, host
        q["scheduler"].update(rank=rank, node=host)
        processes.append(q)

    def members(m: List[Any]) -> List[Any]:
        out: List[Any] = []
        for item in m:
            spans = []
            for part in item[1].split(","):
                a, _, b = part.partition("-")
                s, e = int(a) + shift, int(b or a) + shift
                spans.append(str(s) if s == e else "%d-%d" % (s, e))
            out.append([item[0], ",".join(spans)])
        return out

    lines = ['{"tfnative_tree": 1, "kind": "tree", "processes": %s,\n "nodes": [\n'
             % json.dumps(processes, separators=(",", ":"))]
    lines.append(",\n".join("[%d,%s,%s,%d,%s]" % (n[0], json.dumps(n[1]), json.dumps(members(n[2]),
                                                                                      separators=(",", ":")),
                                                   n[3], json.dumps(n[4], separators=(",", ":")))
                            for n in template["nodes"]))
    lines.append("\n]}\n")
    return "".join(lines)


def run_merge(paths: List[str], out: str) -> Tuple[float, int, float, str]:
    """One ``tfnative merge`` in its own child: (wall s, the child's peak RSS in KiB, its CPU s, its stdout)."""
    code = ("import resource, subprocess, sys, time\n"
            "t = time.perf_counter()\n"
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
            "t = time.perf_counter() - t\n"
            "sys.stderr.buffer.write(r.stderr)\n"
            "assert r.returncode == 0, r.returncode\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print('%f %d %f' % (t, u.ru_maxrss, u.ru_utime + u.ru_stime))\n"
            "sys.stdout.write(r.stdout.decode())\n")
    r = subprocess.run([PY, "-c", code, PY, "-m", "tfnative", "merge", *paths, "--tree", out], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise SystemExit("merge failed: %s" % r.stderr[-2000:])
    first, _, rest = r.stdout.partition("\n")
    wall, rss, cpu = first.split()
    return float(wall), int(rss), float(cpu), rest


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    native = native_base()
    work = tempfile.mkdtemp(prefix="tfnative-bench-merge-")
    try:
        normal = reduced(node_documents(0, args.ranks, native), work)
        odd = reduced(node_documents(ODD_NODE, args.ranks, native), work) if args.nodes > ODD_NODE else None
        t = time.perf_counter()
        paths = []
        size = 0
        for node in range(args.nodes):
            path = os.path.join(work, "node%05d.json" % node)
            if node == ODD_NODE and odd is not None:
                # its own tree, as written by merge --tree (not moved: it is node ODD_NODE's already)
                text = moved({**odd, "processes": [
                    {**p, "scheduler": {**p["scheduler"], "rank": p["scheduler"]["rank"] - node * args.ranks}}
                    for p in odd["processes"]],
                    "nodes": [[n[0], n[1], [[m[0], _unshift(m[1], node * args.ranks)] for m in n[2]], n[3], n[4]]
                              for n in odd["nodes"]]}, node, args.ranks)
            else:
                text = moved(normal, node, args.ranks)
            with open(path, "w") as f:
                f.write(text)
            size += len(text)
            paths.append(path)
        made = time.perf_counter() - t
        nodes_per_tree = len(normal["nodes"])
        print("generated %d node trees (%d tree nodes each, %.0f MB in all) in %.1f s" % (
            args.nodes, nodes_per_tree, size / 1e6, made), file=sys.stderr)
        walls, rsss, cpus = [], [], []
        out = os.path.join(work, "merged.json")
        text = ""
        for i in range(args.runs):
            wall, rss, cpu, text = run_merge(paths, out)
            walls.append(wall)
            rsss.append(rss)
            cpus.append(cpu)
            print("run %d: %.2f s, %d MiB" % (i + 1, wall, rss // 1024), file=sys.stderr)
        scale = []  # the same command on the first nodes alone: how time and memory grow with the nodes
        for part in (args.nodes // 8, args.nodes // 4, args.nodes // 2):
            if part:
                wall, rss, cpu, _ = run_merge(paths[:part], os.path.join(work, "part.json"))
                scale.append("%d nodes: %.2f s, %d MiB" % (part, wall, rss // 1024))
        lines = text.splitlines()
        odd_rank = ODD_NODE * args.ranks + ODD_LOCAL
        named = [ln.strip() for ln in lines if "OUTLIER" in ln and "[rank:%d]" % odd_rank in ln]
        if args.nodes > ODD_NODE:
            assert named, "the odd rank is not named"
        merged_size = os.path.getsize(out)
        again = subprocess.run([PY, "-m", "tfnative", "merge", out], cwd=ROOT, capture_output=True, text=True,
                               timeout=600, check=True).stdout
        assert again.splitlines() == lines, "the merged tree merged again differs"
        # the same ranks as one tree of all documents would be too big to generate here; a smaller check:
        # the first line counts every rank
        head = lines[0]
        assert head.startswith("%d processes" % (args.nodes * args.ranks)), head
        result = [
            "`tfnative merge` of %d node trees (%d nodes x %d ranks = %d processes, %d Python threads each; "
            "each node's tree %d tree nodes, 30-60 frames a stack, 4 shapes + the odd rank; %.0f MB of input "
            "in %d files), %d runs, this 2-core machine (shared with other jobs)." % (
                args.nodes, args.nodes, args.ranks, args.nodes * args.ranks, 3, nodes_per_tree, size / 1e6,
                args.nodes, args.runs),
            "",
            "| | median [min-max] |",
            "|---|---|",
            "| wall, whole command (`tfnative merge node*.json --tree merged.json`, text printed) "
            "| %.2f s [%.2f-%.2f] |" % (statistics.median(walls), min(walls), max(walls)),
            "| CPU time of the command (user + system) | %.2f s [%.2f-%.2f] |" % (
                statistics.median(cpus), min(cpus), max(cpus)),
            "| peak RSS of the command | %d MiB [%d-%d] |" % (statistics.median(rsss) // 1024, min(rsss) // 1024,
                                                             max(rsss) // 1024),
            "",
            "Target: under 10 s, memory bounded by the tree.  The merged tree: %d bytes (`--tree`), its first line "
            "`%s`; the outlier line: `%s`." % (merged_size, head, named[0] if named else "none"),
            "",
            "runs: %s s" % ", ".join("%.2f" % w for w in walls),
            "",
            "The same command on fewer node trees (one run each): %s; %d nodes: %.2f s, %d MiB (the median above)."
            % ("; ".join(scale), args.nodes, statistics.median(walls), statistics.median(rsss) // 1024),
            "",
            "`.venv/bin/python bench/bench_merge_scale.py --nodes %d --ranks %d --runs %d`, %s, load average %s." % (
                args.nodes, args.ranks, args.runs, time.strftime("%Y-%m-%d"),
                " ".join("%.1f" % x for x in os.getloadavg())),
        ]
        publish(result, args.out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _unshift(text: str, shift: int) -> str:
    spans = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        s, e = int(a) - shift, int(b or a) - shift
        spans.append(str(s) if s == e else "%d-%d" % (s, e))
    return ",".join(spans)


if __name__ == "__main__":
    main()
