"""A process's rank and cluster as its launcher, scheduler or ``TF_CONFIG`` named them, from its environment (pure).

The one reader of these facts: ``stack`` (``snapshot/process.py``), ``attach``'s watches (``follow.py``,
``watchmany.py``) and the verdicts that read an event's ``"cluster"`` (``analysis/verdict.py``,
``analysis/waitgraph.py``) all take them from here.

The environment is the one the process started with (``/proc/PID/environ``): what Slurm, a Kubernetes
indexed Job or ``torchrun`` put there before the program ran (a change the program made to its own
``os.environ`` is not in it).  The result goes into a ``stack`` document as ``"scheduler"``
(``docs/json-schema.md``) and names the process in ``merge`` (``rank:2``) and in its text
(``rank 2 on node vm``).

- Slurm: ``SLURM_JOB_ID`` with ``SLURM_PROCID`` (a task of a step): ``{"kind": "slurm", "rank", "job",
  "step", "node", "local_rank"}`` from ``SLURM_PROCID``, ``SLURM_JOB_ID``, ``SLURM_STEP_ID``,
  ``SLURMD_NODENAME``, ``SLURM_LOCALID`` (those present).  A batch script (``SLURM_JOB_ID`` but no
  ``SLURM_STEP_ID``) is ``"step": "batch"``.
- Kubernetes indexed Job: ``JOB_COMPLETION_INDEX``: ``{"kind": "kubernetes", "rank", "pod"}``, the pod
  from ``HOSTNAME`` (a pod's hostname is its name).
- torchrun and launchers like it: ``RANK`` (with ``LOCAL_RANK``, ``WORLD_SIZE`` or ``MASTER_ADDR`` beside
  it, so that a stray ``RANK`` is not taken): ``{"kind": "torchrun", "rank", "local_rank", "world_size"}``.
- TensorFlow's ``TF_CONFIG`` (JSON): its ``task`` (``{"type": "worker", "index": 2}``, ``task_of``) and its
  ``cluster`` (every task of it, ``cluster_of``), which comes before Slurm's or torchrun's.  A program may set
  ``TF_CONFIG`` in its own ``os.environ`` (not in ``/proc/PID/environ``): the caller passes that one as
  ``program`` where the environment has none.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

TF_CONFIG = "TF_CONFIG"


def _int(value: Optional[str]) -> Optional[int]:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _put(out: Dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value != "":
        out[key] = value


def scheduler_of(env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    """The rank (and job, node...) the environment ``env`` gives a process; None when none says one."""
    rank = _int(env.get("SLURM_PROCID"))
    if env.get("SLURM_JOB_ID") and rank is not None:
        out: Dict[str, Any] = {"kind": "slurm", "rank": rank, "job": env["SLURM_JOB_ID"]}
        _put(out, "step", env.get("SLURM_STEP_ID") or "batch")
        _put(out, "node", env.get("SLURMD_NODENAME"))
        _put(out, "local_rank", _int(env.get("SLURM_LOCALID")))
        return out
    rank = _int(env.get("JOB_COMPLETION_INDEX"))
    if rank is not None:
        out = {"kind": "kubernetes", "rank": rank}
        _put(out, "pod", env.get("HOSTNAME"))
        return out
    rank = _int(env.get("RANK"))
    if rank is not None and any(k in env for k in ("LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR")):
        out = {"kind": "torchrun", "rank": rank}
        _put(out, "local_rank", _int(env.get("LOCAL_RANK")))
        _put(out, "world_size", _int(env.get("WORLD_SIZE")))
        return out
    return None


def tf_config(env: Mapping[str, str], program: Optional[str] = None) -> Optional[str]:
    """The process's ``TF_CONFIG``: the environment's where it has one (even a malformed one), else
    ``program`` (the one the program set in its own ``os.environ``, where it is known)."""
    value = env.get(TF_CONFIG)
    return value if value is not None else (program or None)


def tf_task(config: Optional[str]) -> Optional[Dict[str, Any]]:
    """``{"type": "worker", "index": 2}``: the ``task`` of a ``TF_CONFIG`` (None: none, or not one; a task
    without an index is index 0)."""
    try:
        task = json.loads(config or "")["task"]
        kind, index = task["type"], int(task.get("index", 0))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return {"type": kind, "index": index} if isinstance(kind, str) and kind else None


def tf_cluster(config: Optional[str]) -> Optional[Dict[str, Any]]:
    """``{"task": "worker:1", "tasks": ["worker:0", ...]}`` from a ``TF_CONFIG`` (None: none, or not a cluster
    ``TF_CONFIG``: both its ``cluster`` and its ``task`` with an index are needed)."""
    try:
        parsed = json.loads(config or "")
        tasks = ["%s:%d" % (kind, i) for kind, addresses in parsed["cluster"].items()
                 for i in range(len(addresses))]
        task = "%s:%d" % (parsed["task"]["type"], int(parsed["task"]["index"]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return {"task": task, "tasks": tasks}


def task_of(env: Mapping[str, str], program: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The process's ``TF_CONFIG`` task (``tf_config``, ``tf_task``); None: none."""
    return tf_task(tf_config(env, program))


def cluster_of(env: Mapping[str, str], program: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The process's place among its peers, for a verdict that a collective op waits for them (None: alone,
    or not said): its ``TF_CONFIG``'s cluster (``tf_cluster``; ``program`` as in ``tf_config``), else
    ``{"task": "rank:0", "tasks": ["rank:0", "rank:1", "rank:2"], "source": "Slurm"}`` from its step's tasks
    (``SLURM_STEP_NUM_TASKS``, else ``SLURM_NTASKS``) or torchrun's ``WORLD_SIZE``."""
    return tf_cluster(tf_config(env, program)) or _launcher_cluster(env)


def _launcher_cluster(env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    sched = scheduler_of(env)
    if sched is None:
        return None
    if sched["kind"] == "slurm" and sched.get("step") != "batch":
        size, source = _int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS")), "Slurm"
    elif sched["kind"] == "torchrun":
        size, source = sched.get("world_size"), "torchrun"
    else:
        return None
    if size is None or size < 2 or not 0 <= sched["rank"] < size:
        return None
    return {"task": "rank:%d" % sched["rank"], "tasks": ["rank:%d" % i for i in range(size)], "source": source}
