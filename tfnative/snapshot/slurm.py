"""``tfnative stack --slurm-job JOBID``: every Python process of a running Slurm job, one merged view.

No daemon of ours: Slurm's own ``srun`` starts one more step inside the job's allocation, one task per
node (``srun --jobid=J --overlap -N <nodes> --ntasks-per-node=1 --label``), and each task runs
``tfnative stack --env SLURM_JOB_ID=J --tree -`` on its node: every process running Python that Slurm
started for the job there (its ``SLURM_JOB_ID`` in ``/proc/PID/environ``, and the node's own name in its
``SLURMD_NODENAME``, ``many.this_node``: each rank read once, by its own node, even where several nodes
share one machine), reduced on the node to one tree (LLNL STAT's way: ``merge --tree``'s document, the
ranks as rank sets); with ``--html``, ``--speedscope`` or ``--documents``, which need every process
whole, each process's document instead (``--json -``).  They come back on ``srun``'s standard output,
each line prefixed with its task's number (``0: ``); ``srun`` cuts lines longer than 1 KiB into labelled
pieces, so a task's pieces are joined without their line ends and read back one after another (JSON needs
no line ends between them): ``take_job``.  The head (``cli/stack.py``) merges the node trees
(``output/mergetree.py``) and prints the tree as ``merge`` does.

What can go wrong says so in one line, exit status 2 (never a traceback, never a wait without end):
``srun`` missing, the job unknown, not running, another user's, ``--overlap`` refused by the site
(a ``cli_filter`` plugin, a Slurm older than 20.11), tfnative missing (or failing) on a node, which
node.  A node where the job runs no Python process is named and the others reported.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import IO, Callable, Dict, List, Optional, Sequence, TextIO, Tuple, Union

from ..core import docread
from ..core.model import Document
from ..errors import TfnativeError
from .many import NOTHING_FOUND
from .options import StackOptions

Item = Union[Document, docread.TreeDoc]  # what a node sends: its processes' documents, or their tree
_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")
LABEL = re.compile(r"^\s*(\d+): ?(.*)$", re.S)
_EXITED = re.compile(r"^srun: error: (\S+): tasks? ([0-9,\-]+): (.*)$")
_MISSING = ("No such file or directory", "No module named tfnative", "Permission denied", "command not found")


@dataclass
class Job:
    """A Slurm job as ``squeue`` shows it."""

    id: str  # as the user gave it (123, 123_4)
    numeric: str  # SLURM_JOB_ID in its tasks' environment
    state: str
    user: str
    nodes: List[str]


@dataclass
class Node:
    """One node's task of the snapshot step: what it printed, how it ended."""

    name: str
    out: List[str] = field(default_factory=list)  # stdout pieces, line ends removed
    err: List[str] = field(default_factory=list)  # stderr lines
    status: Optional[str] = None  # srun's "Exited with exit code N" and the like


def client(name: str) -> str:
    """The path of a Slurm client command.  Raises TfnativeError when it is not on PATH."""
    path = shutil.which(name)
    if path is None:
        raise TfnativeError("--slurm-job: %s is not on PATH (Slurm's client commands, Debian's slurm-client, "
                            "are needed where tfnative runs)" % name)
    return path


def client_env() -> Dict[str, str]:
    """Our environment without the variables of a Slurm job tfnative may itself run in (they would set
    the new step's size), ``SLURM_CONF`` kept."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}


def _user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def job_of(job_id: str) -> Job:
    """``squeue``'s view of ``job_id``.  Raises TfnativeError: unknown, not running, not ours."""
    if not _JOB_ID.match(job_id):
        raise TfnativeError("--slurm-job %r: a Slurm job id is a number (123, or 123_4 for an array task)" % job_id)
    squeue = client("squeue")
    r = subprocess.run([squeue, "-h", "--states=all", "-j", job_id, "-o", "%A|%T|%u|%N"], capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, env=client_env(), timeout=120)
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    if r.returncode != 0 or not lines:
        why = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "squeue shows no such job"
        if "Invalid job id" in why or not lines:
            raise TfnativeError("Slurm job %s is unknown (no such job, or it ended a while ago): %s" % (job_id, why))
        raise TfnativeError("squeue -j %s failed: %s" % (job_id, why))
    numeric, state, user, nodelist = (lines[0].split("|") + ["", "", "", ""])[:4]
    if state != "RUNNING":
        raise TfnativeError("Slurm job %s is not running (its state is %s): nothing to snapshot"
                            % (job_id, state or "unknown"))
    me = _user()
    if user and user != me and os.geteuid() != 0:
        raise TfnativeError("Slurm job %s is %s's, not yours (%s): Slurm lets only its owner (or an operator) "
                            "start a step in it, and only they may read its processes" % (job_id, user, me))
    return Job(id=job_id, numeric=numeric or job_id.split("_")[0], state=state, user=user,
               nodes=hostnames(nodelist))


def hostnames(nodelist: str) -> List[str]:
    """``node[01-02]`` as ``["node01", "node02"]`` (``scontrol show hostnames``; the list as it is when
    scontrol is missing or fails)."""
    if not nodelist or "[" not in nodelist:
        return [n for n in nodelist.split(",") if n]
    scontrol = shutil.which("scontrol")
    if scontrol is not None:
        r = subprocess.run([scontrol, "show", "hostnames", nodelist], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, env=client_env(), timeout=60)
        if r.returncode == 0 and r.stdout.split():
            return r.stdout.split()
    return [nodelist]


def default_remote() -> List[str]:
    """How the nodes run tfnative: this interpreter with ``-m tfnative`` (the same path on every node, as a
    shared file system or one image gives; ``--remote-tfnative`` says otherwise)."""
    return [sys.executable, "-m", "tfnative"]


def remote_argv(remote: Optional[str]) -> List[str]:
    """How the nodes run tfnative: ``--remote-tfnative CMD`` split as the shell would, else ``default_remote``.
    Raises TfnativeError for a command that cannot be split or is empty."""
    try:
        argv = shlex.split(remote) if remote is not None else default_remote()
    except ValueError as exc:
        raise TfnativeError("--remote-tfnative %r: %s" % (remote, exc)) from None
    if not argv:
        raise TfnativeError("--remote-tfnative needs a command")
    return argv


def srun_command(job: Job, remote: Sequence[str], command: str, node_args: Sequence[str],
                 input_all: bool = False) -> List[str]:
    """The ``srun`` line of a step of tfnative's in ``job`` (``stack``'s snapshot, ``attach``'s crash watch,
    ``watch``'s node watchers): one task per node running ``REMOTE COMMAND --env SLURM_JOB_ID=J NODE_ARGS``,
    labelled output, named ``tfnative-COMMAND``; ``input_all``: srun's standard input to every task."""
    return [client("srun"), "--jobid=%s" % job.id, "--overlap", "-N", str(max(1, len(job.nodes))),
            "--ntasks-per-node=1", "--label", "--kill-on-bad-exit=0", "--job-name=tfnative-%s" % command,
            *(["--input=all"] if input_all else []), *remote, command, "--env", "SLURM_JOB_ID=%s" % job.numeric,
            *node_args]


def task_name(names: Sequence[str], task: int) -> str:
    """Task ``task``'s node as a step's output names it: its node in ``names`` (one task per node, in the
    step's order), else ``task N``."""
    return names[task] if 0 <= task < len(names) else "task %d" % task


def relay_stderr(stream: IO[bytes], names: Sequence[str], err: TextIO, own: List[str],
                 then: Callable[[int, str, str], None]) -> None:
    """Read a step's ``srun --label`` standard error to its end: each task's line written to ``err`` as
    ``NODE: TEXT`` (``task_name(names, task)``), then handed to ``then(task, node, text)``; srun's own lines (not
    blank) appended to ``own``.  Every tfnative step reads its standard error so (``stack``'s, ``attach``'s
    crash watch, ``watch``'s node watchers); what each keeps of a line is its ``then``."""
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        m = LABEL.match(line)
        if m is None:
            if line.strip():
                own.append(line)
            continue
        task, text = int(m.group(1)), m.group(2)
        name = task_name(names, task)
        err.write("%s: %s\n" % (name, text))
        err.flush()
        then(task, name, text)


def run_step(cmd: List[str], nodes: List[str], err: TextIO) -> Tuple[int, List[Node], List[str]]:
    """Run the step; (its exit status, Node per task, srun's own stderr lines).  Node stderr lines are
    passed on to ``err`` as they come, prefixed with the node's name."""
    tasks = [Node(n) for n in nodes]
    own: List[str] = []

    def node(i: int) -> Node:
        while i >= len(tasks):
            tasks.append(Node(task_name(nodes, len(tasks))))
        return tasks[i]

    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=client_env())

    def read_err() -> None:
        assert proc.stderr is not None
        relay_stderr(proc.stderr, nodes, err, own, lambda i, _name, text: node(i).err.append(text))

    reader = threading.Thread(target=read_err, name="tfnative-srun-stderr", daemon=True)
    reader.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            m = LABEL.match(line)
            if m:
                node(int(m.group(1))).out.append(m.group(2))
        code = proc.wait()
    except KeyboardInterrupt:
        # srun: a first SIGINT reports, a second within a second ends the step (and its tasks)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    reader.join(timeout=30)
    for line in own:
        m = _EXITED.match(line)
        if m:
            for n in tasks:
                if n.name == m.group(1):
                    n.status = m.group(3)
    return code, tasks, own


def _documents(n: Node) -> List[Item]:
    """The documents, or the one tree, a node's task printed (its pieces joined)."""
    body = "".join(n.out)
    if not body.strip():
        return []
    try:
        return list(docread.iter_inputs([("node %s" % n.name, [body])]))
    except TfnativeError as exc:
        raise TfnativeError("node %s: tfnative's output could not be read back (%s)" % (n.name, exc)) from None


def step_refused(job: Job, own: List[str]) -> Optional[str]:
    """Why srun started no step at all, from its messages (None: it did)."""
    text = "\n".join(own)
    last = next((ln for ln in reversed(own) if "error" in ln.lower()), own[-1] if own else "")
    if "Invalid job id" in text:
        return "Slurm job %s is unknown (no such job, or it ended a while ago): %s" % (job.id, last)
    if "has expired" in text or "already completed" in text or "is not running" in text:
        return "Slurm job %s is not running any more: %s" % (job.id, last)
    if "Access/permission denied" in text or "not the owner" in text.lower():
        return ("Slurm job %s is not yours: Slurm refused a step in it (%s); run tfnative as the job's user"
                % (job.id, last))
    if ("cli_filter" in text or "unrecognized option" in text and "overlap" in text
            or "Unable to create step" in text):
        return ("this Slurm refuses 'srun --overlap' in job %s (the site's configuration: %s); ask the "
                "admins, or run 'tfnative stack --env SLURM_JOB_ID=%s' on each node" % (job.id, last, job.numeric))
    return None


def node_failure(n: Node, remote: Sequence[str]) -> str:
    """One line on a node whose task gave no document."""
    lines = [ln for ln in n.err if ln.strip()]
    last = lines[-1] if lines else (n.status or "no output")
    if any(s in ln for ln in lines for s in _MISSING) or (n.status or "").endswith(("code 127", "code 126")):
        return ("tfnative is missing on node %s (%s: %s); install it there, or name it with "
                "--remote-tfnative" % (n.name, shlex.join(remote), last))
    return "tfnative failed on node %s (%s): %s" % (n.name, n.status or "no documents", last)


def collect(job: Job, remote: Sequence[str], node_args: Sequence[str], err: TextIO) -> List[Item]:
    """What every node of ``job`` sent: its processes' documents, or their tree.  Raises TfnativeError when
    none came back."""
    code, tasks, own = run_step(srun_command(job, remote, "stack", node_args), job.nodes, err)
    if not any(n.out or n.err or n.status for n in tasks):
        why = step_refused(job, own)
        if why is None:
            why = "srun started no step in job %s (exit %d): %s" % (job.id, code, own[-1] if own else "no message")
        raise TfnativeError(why)
    docs: List[Item] = []
    failures = []
    empty = []
    for n in tasks:
        mine = _documents(n)
        docs.extend(mine)
        if mine:
            continue
        if (n.status or "").endswith("exit code %d" % NOTHING_FOUND):
            empty.append(n.name)
        else:
            failures.append(node_failure(n, remote))
    if not docs:
        if failures:
            raise TfnativeError(failures[0] if len(failures) == 1 else
                                "no node of job %s reported: %s" % (job.id, "; ".join(failures)))
        raise TfnativeError("job %s runs no Python process on its node%s (%s)"
                            % (job.id, "s" if len(tasks) > 1 else "", ", ".join(n.name for n in tasks)))
    for name in empty:
        err.write("tfnative: node %s: no process of job %s there runs Python\n" % (name, job.id))
    for line in failures:
        err.write("tfnative: %s\n" % line)
    err.flush()
    return docs


def node_arguments(opts: StackOptions, documents: bool = False) -> List[str]:
    """The ``stack`` options each node's tfnative is run with (the rest is the merged view's).  Each node sends
    its processes' tree (``--tree -``: reduced on the node, as LLNL STAT does, so the head's work and memory
    grow with the trees, not with the ranks), or with ``documents`` every process's document (``--json -``:
    the page, speedscope and ``--documents`` need them whole)."""
    args = ["--json" if documents else "--tree", "-"]
    args += (["--all-threads"] if opts.all_threads else []) + (["--with-gdb"] if opts.with_gdb else [])
    if opts.samples > 1:
        args += ["--samples", str(opts.samples), "--interval", str(opts.interval)]
    return args


def take_job(job_id: str, remote: Optional[str], node_args: Sequence[str], err: TextIO) -> Tuple[Job, List[Item]]:
    """``stack --slurm-job JOBID``'s snapshot: the job (``job_of``) and what each of its nodes sent (``collect``:
    its processes' documents, or their tree, as ``node_args`` asks), their count said on ``err``."""
    argv = remote_argv(remote)
    client("srun")
    job = job_of(job_id)
    items = collect(job, argv, node_args, err)
    count = sum(len(i.processes) if isinstance(i, docread.TreeDoc) else 1 for i in items)
    err.write("tfnative: job %s: %d process%s on %d node%s\n" % (
        job.id, count, "" if count == 1 else "es", len(job.nodes), "" if len(job.nodes) == 1 else "s"))
    err.flush()
    return job, items
