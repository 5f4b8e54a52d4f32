"""Ranks named by the scheduler, without a scheduler: the environment parsed (Slurm, Kubernetes, torchrun),
their words, merge's names and outlier line; ``stack --slurm-job``'s reading of srun's output and
messages (1 KiB pieces, refusals) on recorded text."""

import json

from tfnative.analysis import tree as mtree
from tfnative.core.model import Document
from tfnative.core.ranks import cluster_of, scheduler_of, task_of, tf_cluster, tf_task
from tfnative.output import merge
from tfnative.output.render import describe_rank as describe
from tfnative.output.threadgroups import frame_text
from tfnative.snapshot import slurm
from tfnative.snapshot.options import StackOptions

SLURM_ENV = {"SLURM_JOB_ID": "12", "SLURM_PROCID": "2", "SLURM_STEP_ID": "0", "SLURMD_NODENAME": "vm",
             "SLURM_LOCALID": "2", "PATH": "/bin"}


def test_slurm_task():
    assert scheduler_of(SLURM_ENV) == {"kind": "slurm", "rank": 2, "job": "12", "step": "0", "node": "vm",
                                       "local_rank": 2}
    assert describe(scheduler_of(SLURM_ENV)) == "rank 2 on node vm (slurm job 12, step 0)"


def test_slurm_batch_script_and_partial():
    env = {"SLURM_JOB_ID": "12", "SLURM_PROCID": "0"}
    assert scheduler_of(env) == {"kind": "slurm", "rank": 0, "job": "12", "step": "batch"}
    assert describe(scheduler_of(env), "h1") == "rank 0 on node h1 (slurm job 12, step batch)"
    assert scheduler_of({"SLURM_JOB_ID": "12"}) is None  # in a job, but no task of a step
    assert scheduler_of({"SLURM_JOB_ID": "12", "SLURM_PROCID": "x"}) is None


def test_cluster_from_the_scheduler():
    env = dict(SLURM_ENV, SLURM_STEP_NUM_TASKS="3", SLURM_NTASKS="4")
    assert cluster_of(env) == {"task": "rank:2", "tasks": ["rank:0", "rank:1", "rank:2"], "source": "Slurm"}
    assert cluster_of(dict(SLURM_ENV, SLURM_NTASKS="1")) is None  # alone
    assert cluster_of({"SLURM_JOB_ID": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "3"}) is None  # the batch script
    torch = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}
    assert cluster_of(torch) == {"task": "rank:1", "tasks": ["rank:0", "rank:1"], "source": "torchrun"}
    assert cluster_of({"JOB_COMPLETION_INDEX": "1"}) is None and cluster_of({}) is None


def test_kubernetes_indexed_job():
    env = {"JOB_COMPLETION_INDEX": "3", "HOSTNAME": "train-3-abcde"}
    assert scheduler_of(env) == {"kind": "kubernetes", "rank": 3, "pod": "train-3-abcde"}
    assert describe(scheduler_of(env)) == "rank 3 in pod train-3-abcde (kubernetes)"


def test_torchrun():
    env = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "MASTER_ADDR": "h0"}
    assert scheduler_of(env) == {"kind": "torchrun", "rank": 5, "local_rank": 1, "world_size": 8}
    assert describe(scheduler_of(env), "h2") == "rank 5 (local rank 1) on host h2 (torchrun)"
    assert scheduler_of({"RANK": "5"}) is None  # a stray RANK alone is nobody's rank


def test_slurm_wins_over_the_others():
    env = dict(SLURM_ENV, RANK="7", LOCAL_RANK="0", JOB_COMPLETION_INDEX="1")
    assert scheduler_of(env)["kind"] == "slurm"
    assert scheduler_of({}) is None and describe(None) is None


TF_CLUSTER = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "chief": ["h:3"]},
              "task": {"type": "worker", "index": 1}}


def test_tf_config_task_chief_worker_and_malformed():
    assert tf_task(json.dumps(TF_CLUSTER)) == {"type": "worker", "index": 1}
    assert tf_task(json.dumps({"task": {"type": "chief", "index": "0"}})) == {"type": "chief", "index": 0}
    assert tf_task(json.dumps({"task": {"type": "ps"}})) == {"type": "ps", "index": 0}  # no index: the first
    for bad in (None, "", "not json", "[]", '{"cluster": {}}', '{"task": {"type": 3}}', '{"task": {"type": ""}}',
                '{"task": {"type": "worker", "index": "x"}}', '{"task": "worker"}', '{"task": null}', "{"):
        assert tf_task(bad) is None, bad


def test_tf_config_cluster_chief_worker_and_partial():
    assert tf_cluster(json.dumps(TF_CLUSTER)) == {"task": "worker:1", "tasks": ["worker:0", "worker:1", "chief:0"]}
    chief = dict(TF_CLUSTER, task={"type": "chief", "index": 0})
    assert tf_cluster(json.dumps(chief)) == {"task": "chief:0", "tasks": ["worker:0", "worker:1", "chief:0"]}
    for bad in (None, "not json", '{"cluster": []}', json.dumps({"cluster": TF_CLUSTER["cluster"]}),  # no task
                json.dumps({"task": TF_CLUSTER["task"]}),  # no cluster: a task alone
                json.dumps(dict(TF_CLUSTER, task={"type": "ps"})),  # a task without its index
                json.dumps(dict(TF_CLUSTER, cluster={"worker": 3}))):
        assert tf_cluster(bad) is None, bad


def test_tf_config_from_the_environment_else_the_program():
    """The environment's TF_CONFIG (even a malformed one) comes before the one the program set in its own
    os.environ; TF_CONFIG's cluster before Slurm's or torchrun's, which a malformed one leaves in place."""
    env = {"TF_CONFIG": json.dumps(TF_CLUSTER)}
    program = json.dumps(dict(TF_CLUSTER, task={"type": "chief", "index": 0}))
    assert task_of(env) == {"type": "worker", "index": 1} == task_of(env, program)
    assert task_of({}, program) == {"type": "chief", "index": 0} and task_of({}) is None
    assert task_of({"TF_CONFIG": "bad"}, program) is None
    assert cluster_of({}, program)["task"] == "chief:0" and cluster_of(env, program)["task"] == "worker:1"
    slurm = dict(SLURM_ENV, SLURM_STEP_NUM_TASKS="3")
    assert cluster_of(dict(slurm, **env)) == {"task": "worker:1", "tasks": ["worker:0", "worker:1", "chief:0"]}
    assert cluster_of(dict(slurm, TF_CONFIG="bad"))["source"] == "Slurm"
    assert cluster_of(dict(slurm, TF_CONFIG="bad"), program)["source"] == "Slurm"
    torch = {"RANK": "0", "WORLD_SIZE": "2", "TF_CONFIG": '{"task": {"type": "worker", "index": 0}}'}
    assert cluster_of(torch)["source"] == "torchrun" and task_of(torch) == {"type": "worker", "index": 0}


def test_slurm_and_torchrun_cluster_edges():
    assert cluster_of(dict(SLURM_ENV, SLURM_NTASKS="3"))["tasks"] == ["rank:0", "rank:1", "rank:2"]
    assert cluster_of(dict(SLURM_ENV, SLURM_STEP_NUM_TASKS="2")) is None  # rank 2 of 2: not a place in it
    assert cluster_of(dict(SLURM_ENV, SLURM_STEP_NUM_TASKS="x")) is None
    assert cluster_of({"RANK": "1", "WORLD_SIZE": "x", "LOCAL_RANK": "1"}) is None
    assert cluster_of({"RANK": "1", "MASTER_ADDR": "h0"}) is None  # torchrun without its world size
    assert cluster_of({"RANK": "-1", "WORLD_SIZE": "2"}) is None


def _doc(pid, rank, frames, task=None):
    d = {"tfnative": 1, "pid": pid, "host": "vm", "events": [{"kind": "snapshot", "pid": pid, "threads": [
        {"tid": pid, "name": "python", "frames": frames}]}]}
    if rank is not None:
        d["scheduler"] = scheduler_of(dict(SLURM_ENV, SLURM_PROCID=str(rank)))
    if task is not None:
        d["task"] = {"type": "worker", "index": task}
    return d


def _py(fn, line):
    return {"kind": "python", "function": fn, "file": "/app/train.py", "line": line}


def test_merge_names_ranks_and_the_outlier():
    docs = [_doc(100 + r, r, [_py("wait", 3), _py("main", 9)]) for r in range(3)]
    docs.append(_doc(103, 3, [_py("stall", 5), _py("main", 8)]))
    typed = [Document.from_json(json.loads(json.dumps(d))) for d in docs]
    assert typed[3].to_json()["scheduler"]["rank"] == 3  # kept through JSON
    root = mtree.build_tree(frame_text, typed)
    lines = merge.text_lines(root)
    assert lines[0] == "4 processes, 4 threads: rank:0-3"
    flagged = [ln for ln in lines if "<== OUTLIER" in ln]
    assert flagged == ["  [py] main at /app/train.py:8  <-- your code   [rank:3] (1 thread)   <== OUTLIER: "
                       "rank 3 on node vm (slurm job 12, step 0), pid 103"]
    assert merge.merge_json(root)["processes"][3] == {"label": "rank:3", "pid": 103, "host": "vm",
                                                      "scheduler": docs[3]["scheduler"]}


def test_task_still_names_first_and_no_words_without_scheduler():
    docs = [_doc(100 + r, None, [_py("wait", 3), _py("main", 9)], task=r) for r in range(2)]
    docs.append(_doc(102, None, [_py("stall", 5), _py("main", 8)], task=2))
    lines = merge.text_lines(mtree.build_tree(frame_text, (Document.from_json(d) for d in docs)))
    assert lines[0] == "3 processes, 3 threads: worker:0-2"
    assert [ln for ln in lines if "OUTLIER" in ln][0].endswith("[worker:2] (1 thread)   <== OUTLIER")


def test_pieces_of_a_long_line_are_joined():
    """srun --label cuts a task's lines into 1 KiB pieces, each labelled on its own line."""
    docs = [_doc(100 + r, r, [_py("f%d" % i, i) for i in range(60)]) for r in range(2)]
    text = "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in docs)
    assert len(text) > 4096
    node = slurm.Node("vm", out=[text[i:i + 1024].replace("\n", "") for i in range(0, len(text), 1024)])
    got = slurm._documents(node)
    assert [d.pid for d in got] == [100, 101] and got[1].scheduler["rank"] == 1


JOB = slurm.Job(id="7", numeric="7", state="RUNNING", user="alice", nodes=["n1", "n2"])


def test_refusals_from_srun_messages():
    cases = {
        "srun: error: Unable to confirm allocation for job 7: Invalid job id specified": "Slurm job 7 is unknown",
        "srun: error: Slurm job 7 has expired": "Slurm job 7 is not running any more",
        "srun: error: Unable to create step for job 7: Access/permission denied": "Slurm job 7 is not yours",
        "srun: error: cli_filter plugin terminated with error": "this Slurm refuses 'srun --overlap' in job 7",
        "srun: unrecognized option '--overlap'": "this Slurm refuses 'srun --overlap' in job 7",
    }
    for message, expected in cases.items():
        assert slurm.step_refused(JOB, [message]).startswith(expected), message
    assert slurm.step_refused(JOB, ["srun: something else"]) is None


def test_node_failures_name_the_node():
    missing = slurm.Node("n2", err=["slurmstepd-n2: error: execve(): tfnative: No such file or directory"],
                         status="Exited with exit code 2")
    assert slurm.node_failure(missing, ["tfnative"]).startswith("tfnative is missing on node n2 (tfnative: ")
    no_module = slurm.Node("n1", err=["/usr/bin/python3: No module named tfnative"], status="Exited with exit code 1")
    assert "missing on node n1" in slurm.node_failure(no_module, ["/usr/bin/python3", "-m", "tfnative"])
    other = slurm.Node("n1", err=["tfnative: error: something"], status="Exited with exit code 2")
    assert slurm.node_failure(other, ["tfnative"]) == ("tfnative failed on node n1 (Exited with exit code 2): "
                                                        "tfnative: error: something")


def test_srun_line(monkeypatch):
    monkeypatch.setattr(slurm, "client", lambda name: "/usr/bin/" + name)  # no Slurm needed
    cmd = slurm.srun_command(JOB, ["tfnative"], "stack", slurm.node_arguments(StackOptions(all_threads=True)))
    assert cmd[1:] == ["--jobid=7", "--overlap", "-N", "2", "--ntasks-per-node=1", "--label", "--kill-on-bad-exit=0",
                       "--job-name=tfnative-stack", "tfnative", "stack", "--env", "SLURM_JOB_ID=7", "--tree", "-",
                       "--all-threads"]
    watch = slurm.srun_command(JOB, ["tfnative"], "watch", ["--node-feed"], input_all=True)
    assert watch[1:] == ["--jobid=7", "--overlap", "-N", "2", "--ntasks-per-node=1", "--label", "--kill-on-bad-exit=0",
                         "--job-name=tfnative-watch", "--input=all", "tfnative", "watch", "--env", "SLURM_JOB_ID=7",
                         "--node-feed"]
    whole = slurm.node_arguments(StackOptions(samples=3, interval=0.5), documents=True)
    assert whole == ["--json", "-", "--samples", "3", "--interval", "0.5"]


def test_one_relay_shows_each_task_s_line_with_its_node_and_keeps_srun_s_own():
    """``slurm.relay_stderr``, which every step's standard error goes through (stack's, attach's, watch's):
    ``srun --label``'s "N: text" is shown as "NODE: text" and handed over; srun's own lines are kept, blank
    ones dropped; a line that is not UTF-8 is shown, not fatal."""
    import io

    stream = io.BytesIO(b"0: tfnative: watching 2 processes\n 1: a\xffb\n\nsrun: error: n2: task 1: Exited\n"
                        b"1: \n")
    err, own, got = io.StringIO(), [], []
    slurm.relay_stderr(stream, ["n1", "n2"], err, own, lambda *a: got.append(a))
    assert err.getvalue() == "n1: tfnative: watching 2 processes\nn2: a\ufffdb\nn2: \n"
    assert got == [(0, "n1", "tfnative: watching 2 processes"), (1, "n2", "a\ufffdb"), (1, "n2", "")]
    assert own == ["srun: error: n2: task 1: Exited"]
    err, got = io.StringIO(), []
    slurm.relay_stderr(io.BytesIO(b"2: late\n"), ["n1", "n2"], err, own, lambda *a: got.append(a))
    assert err.getvalue() == "task 2: late\n" and got == [(2, "task 2", "late")]  # more tasks than nodes
