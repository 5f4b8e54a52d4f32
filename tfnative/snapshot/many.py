"""``tfnative stack`` on many processes at once: which ones, taken concurrently, one document each.

The processes are named by ``--pid`` (repeatable), ``--children PID`` (every descendant of PID that runs
Python), ``--match REGEX`` (every process running Python whose command line matches) or ``--env KEY=VALUE``
(every process running Python whose environment has it: ``SLURM_JOB_ID=123``), tfnative itself and its
ancestors excepted by the last two.  Each is taken by the caller's ``take`` (``stack``'s: ``process.py``, the one
snapshot path, then analysed) on a small pool of threads (``snapshot_all``): a process is held only for its own
snapshot, and what does not depend on where a library is mapped (symbol indexes, CFI, demangled names) is read
once for all (``sources/modules.py``, ``shared``).  Each process's ``Outcome`` is its document or why it could
not be read (it exited meanwhile, it is not ours).  The verdicts across processes are analysis's
(``analysis/across.across``); the text blocks and JSON Lines, ``output/processes.py``'s; ``cli/stack.py``
joins them.
"""

from __future__ import annotations

import os
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import psutil

from ..core import procfs
from ..core.model import Document, Outcome
from ..core.userregex import brief, compile_user
from ..errors import TfnativeError

NOTHING_FOUND = 3  # the exit status of a selection (--env) that finds no process
MAX_JOBS = 4  # snapshots at a time: threads share the GIL, more would only stretch each process's hold

_PYTHON_EXE = re.compile(r"^python(\d+(\.\d+)?)?([dmu]*)$")
_MAPPED_PYTHON = re.compile(r"/python3\.\d+d?$")


def parse_labels(items: Sequence[str]) -> Dict[str, str]:
    """``{"rank": "3"}`` from ``["rank=3"]``, in order.  Raises TfnativeError on an item without ``=``
    or with an empty key."""
    out: Dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TfnativeError("--label takes KEY=VALUE (e.g. --label rank=3), not %r" % item)
        out[key.strip()] = value
    return out


def runs_python(pid: int) -> bool:
    """Whether ``pid`` runs a CPython interpreter: its executable is ``python*``, or it maps libpython."""
    try:
        if _PYTHON_EXE.match(os.path.basename(procfs.exe(pid))):
            return True
        # libpython, or python3.X run through the loader
        return any("/libpython3" in m.path or _MAPPED_PYTHON.search(m.path) for m in procfs.maps(pid))
    except OSError:
        return False


def _is_tfnative(argv: List[str]) -> bool:
    """A tfnative process (``tfnative ...``, ``python -m tfnative ...``): never a target of ``--match``."""
    if argv and os.path.basename(argv[0]) == "tfnative":
        return True
    return any(a == "-m" and b == "tfnative" or os.path.basename(a) == "tfnative"
               for a, b in zip(argv, argv[1:] + [""]))


def _ancestors() -> List[int]:
    out: List[int] = []
    proc: Optional[psutil.Process] = psutil.Process()
    while proc is not None:
        out.append(proc.pid)
        try:
            proc = proc.parent()
        except psutil.Error:
            break
    return out


def descendants(pid: int) -> List[int]:
    """Every descendant of ``pid`` that runs Python, by pid.  Raises TfnativeError when ``pid`` is gone."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except (psutil.NoSuchProcess, ValueError):  # ValueError: psutil's word for a pid of 0 or less
        raise TfnativeError("--children %d: no process with pid %d" % (pid, pid)) from None
    return sorted(p.pid for p in kids if runs_python(p.pid))


def matching(pattern: str) -> List[int]:
    """Every process that runs Python whose command line (arguments joined by spaces) matches
    ``pattern``, tfnative itself and its ancestors excepted."""
    try:
        regex = compile_user(pattern)
    except re.error as exc:
        raise TfnativeError("--match %s is not a regular expression: %s" % (brief(pattern), exc)) from None
    skip = set(_ancestors())
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        argv = proc.info.get("cmdline") or []
        if proc.info["pid"] in skip or not argv or _is_tfnative(argv):
            continue
        if regex.search(" ".join(argv)) and runs_python(proc.info["pid"]):
            out.append(proc.info["pid"])
    return sorted(out)


def with_environment(items: Sequence[str]) -> List[int]:
    """Every process running Python whose environment (``/proc/PID/environ``, as it started) has each
    ``KEY=VALUE`` of ``items`` (``KEY`` alone: the variable is set), tfnative itself and its ancestors
    excepted: ``--env SLURM_JOB_ID=123`` is every Python process of Slurm job 123 on this machine.

    Run on a Slurm node (as a task: ``SLURMD_NODENAME`` in tfnative's own environment, as each node's
    task of ``--slurm-job`` has it), a selection by ``SLURM_JOB_ID`` is that job's processes on this node:
    those whose ``SLURMD_NODENAME`` is the same (``this_node``)."""
    wanted: List[Tuple[str, Optional[str]]] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not key.strip():
            raise TfnativeError("--env takes KEY=VALUE or KEY (e.g. --env SLURM_JOB_ID=123), not %r" % item)
        wanted.append((key.strip(), value if sep else None))
    wanted += this_node(wanted, os.environ)
    skip = set(_ancestors())
    out = []
    for proc in psutil.process_iter(["pid", "ppid", "cmdline"]):
        pid, argv = proc.info["pid"], proc.info.get("cmdline") or []
        if pid in skip or not argv or _is_tfnative(argv):
            continue
        env = procfs.environ(pid)
        if all(key in env and (value is None or env[key] == value) for key, value in wanted) and runs_python(pid) \
                and not _started_by_tfnative(proc.info["ppid"]):
            out.append(pid)
    return sorted(out)


def this_node(wanted: Sequence[Tuple[str, Optional[str]]], own: Mapping[str, str]) -> List[Tuple[str, str]]:
    """What a selection of a Slurm job's processes (``wanted`` names ``SLURM_JOB_ID``) adds where tfnative
    runs on a Slurm node (``own``, its environment, has ``SLURMD_NODENAME``): that node's name, which each
    process must have in its own environment, the job's tasks there.  Several ``slurmd`` on one machine
    (``slurmd -N``: a test cluster) share its processes: a node's task of ``--slurm-job`` would read every
    node's ranks, and two nodes' tasks would race to hold the same one.  On a real cluster a node sees
    its own processes only, and the same restriction holds."""
    node = own.get("SLURMD_NODENAME")
    keys = [key for key, _ in wanted]
    if not node or "SLURM_JOB_ID" not in keys or "SLURMD_NODENAME" in keys:
        return []
    return [("SLURMD_NODENAME", node)]


def _started_by_tfnative(ppid: int) -> bool:
    """Whether the parent ``ppid`` is a tfnative process: its gdb (which maps libpython) is no target."""
    try:
        return _is_tfnative(psutil.Process(ppid).cmdline())
    except psutil.Error:
        return False


def targets(pids: Sequence[int], children: Sequence[int], patterns: Sequence[str],
            envs: Sequence[str] = ()) -> List[int]:
    """The processes to snapshot, each once, in the order named.  Raises TfnativeError when none is."""
    out: Dict[int, None] = {}
    for pid in pids:
        out[pid] = None
    for pid in children:
        found = descendants(pid)
        if not found:
            raise TfnativeError("--children %d: no descendant of process %d runs Python" % (pid, pid))
        out.update(dict.fromkeys(found))
    for pattern in patterns:
        found = matching(pattern)
        if not found:
            raise TfnativeError("--match %r: no process running Python has a command line that matches"
                                % pattern)
        out.update(dict.fromkeys(found))
    if envs:
        found = with_environment(envs)
        if not found:
            raise TfnativeError("--env %s: no process running Python has that in its environment"
                                % " --env ".join(envs), exit_code=NOTHING_FOUND)
        out.update(dict.fromkeys(found))
    out.pop(os.getpid(), None)
    if not out:
        raise TfnativeError("no process to snapshot (give --pid, --children, --match or --env)")
    return list(out)


def snapshot_all(pids: Sequence[int], take: Callable[[int], Document], jobs: int = MAX_JOBS,
                 stop: Optional[threading.Event] = None) -> List[Outcome]:
    """``take(pid)`` of every pid on ``jobs`` threads, outcomes in the order of ``pids``.

    A TfnativeError of one process is its outcome's ``error``; any other exception (``Interrupted``
    in the main thread) sets ``stop`` (which ``take`` should heed between samples), cancels what has
    not started, and is raised once the snapshots under way have ended and released their processes.
    """
    outcomes = [Outcome(pid) for pid in pids]
    pool = ThreadPoolExecutor(max_workers=max(1, min(jobs, len(pids))), thread_name_prefix="tfnative-stack")
    try:
        futures: List[Future[Document]] = [pool.submit(take, pid) for pid in pids]
        for outcome, fut in zip(outcomes, futures):
            try:
                outcome.doc = fut.result()
            except TfnativeError as exc:
                outcome.error = str(exc)
    except BaseException:
        if stop is not None:
            stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return outcomes
