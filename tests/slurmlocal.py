"""A private Slurm for the tests: its own munged, slurmctld and slurmd (one, or one per node), started and
stopped here.

Everything lives in one temporary directory: ``slurm.conf`` (pointed at by ``SLURM_CONF`` in the
environment that ``env()`` gives), the state and spool directories, the logs, and munged's key and
socket (``AuthInfo=socket=...``), so nothing system-wide is changed or read but the binaries.  The
daemons run in the foreground as children of the test process (``-D``/``-F``), ``SlurmUser`` is root
(``slurmd`` must be root anyway), the node is this machine by its short name with ``CPUs=16``
(``SlurmdParameters=config_overrides``: with the real 2 CPUs a 3-task job would wait forever; 16 lets the
tests' jobs run side by side), ports are free ones picked here.  ``LocalSlurm(nodes=N)``: N nodes n1..nN,
each its own ``slurmd -N nX`` on this machine (Debian's Slurm allows several; each has its own port, spool,
pid and log file, all share the process table: a node's step sees the other nodes' tasks too, which a
real cluster never shows it), 8 CPUs each.  ``stop()`` cancels every job and waits
until ``squeue`` is empty (``slurmd`` ignores SIGTERM while jobs run), then ends the slurmd, slurmctld,
munged; ``leftovers()`` names any of them, or a ``slurmstepd``, still running.

Run as a script (``python tests/slurmlocal.py DIR [NODES]``) it starts one in DIR and prints the
``SLURM_CONF`` to export, until Ctrl-C (for trying things by hand).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterator, List, Optional

import psutil

BINARIES = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "squeue", "scancel", "scontrol", "sinfo")
SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")


class SlurmUnavailable(Exception):
    """Slurm cannot be started here (binaries missing, not root, a daemon that does not come up)."""


def which(name: str) -> Optional[str]:
    found = shutil.which(name)
    if found:
        return found
    for d in SBIN:
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    return None


def missing() -> List[str]:
    """The binaries of BINARIES that are not installed."""
    return [b for b in BINARIES if which(b) is None]


def _free_ports(n: int) -> List[int]:
    from .utils import free_ports  # below the ephemeral range: no connection takes one before the daemon binds it

    return free_ports(n)


def _no_cores() -> None:
    """The daemons, and the jobs' tasks after them, write no core file (a crashing rank, a process of a step
    killed with it) into a working directory such as the checkout: ``slurmstepd`` raises its soft limit to
    the hard one, which its tasks inherit whatever the submitter's is (measured: unlimited with a
    submitter's 0), so the hard limit is 0."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


CONF = """\
ClusterName=tfnative
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
{slurmd_port}AuthType=auth/munge
AuthInfo=socket={dir}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={dir}/ctld
SlurmdSpoolDir={dir}/spool{subdir}
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd{each}.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd{each}.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
MessageTimeout=30
InactiveLimit=0
SchedulerType=sched/builtin
{node_lines}
PartitionName=debug Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


class LocalSlurm:
    """One private Slurm (see the module's docstring): one node, this machine by its name; or ``nodes`` of
    them (n1, n2, ...), each its own ``slurmd -N nX`` on this machine."""

    def __init__(self, root: Optional[str] = None, nodes: int = 1) -> None:
        self.dir = root or tempfile.mkdtemp(prefix="tfnative-slurm-")
        self.host = socket.gethostname().split(".")[0]
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.procs: Dict[str, subprocess.Popen] = {}
        self.nodes = [self.host] if nodes <= 1 else ["n%d" % i for i in range(1, nodes + 1)]

    def _conf(self, ctld_port: int, d_ports: List[int]) -> str:
        if len(self.nodes) == 1:
            return CONF.format(host=self.host, dir=self.dir, ctld_port=ctld_port, slurmd_port="SlurmdPort=%d\n"
                               % d_ports[0], subdir="", each="", names=self.host,
                               node_lines="NodeName=%s NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN" % self.host)
        # several slurmd on one machine (Debian's Slurm is built with MULTIPLE_SLURMD): a port, a spool, a pid
        # and a log file each; the same NodeHostname, which is what lets them share it
        lines = ["NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=8 State=UNKNOWN" % (n, self.host, port)
                 for n, port in zip(self.nodes, d_ports)]
        return CONF.format(host=self.host, dir=self.dir, ctld_port=ctld_port, slurmd_port="", subdir="/%n",
                           each="-%n", names=",".join(self.nodes), node_lines="\n".join(lines))

    def env(self, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """The environment for Slurm's clients: ``SLURM_CONF`` here, no job's variables inherited."""
        env = {k: v for k, v in (base if base is not None else os.environ).items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = self.conf
        return env

    def run(self, args: List[str], timeout: float = 60, check: bool = True, **kw) -> subprocess.CompletedProcess:
        """A Slurm client command (``squeue``, ``sbatch``...) against this cluster."""
        kw.setdefault("env", self.env())
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw)
        if check and r.returncode != 0:
            raise SlurmUnavailable("%s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr.strip()))
        return r

    def _log(self, name: str) -> str:
        try:
            with open(os.path.join(self.dir, name), errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def _daemon(self, name: str, args: List[str]) -> None:
        out = open(os.path.join(self.dir, name + ".out"), "w")
        try:
            self.procs[name] = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                                env=self.env(), cwd=self.dir, preexec_fn=_no_cores)
        finally:
            out.close()

    def _wait(self, what: str, check, timeout: float, log: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise SlurmUnavailable("%s exited with %s while waiting for %s: %s%s"
                                           % (name, p.returncode, what, self._log(name + ".out"), self._log(log)))
            if check():
                return
            time.sleep(0.1)
        raise SlurmUnavailable("timed out waiting for %s: %s" % (what, self._log(log)))

    def start(self) -> LocalSlurm:
        """Start munged, slurmctld and slurmd; return once the node is idle.  Raises SlurmUnavailable."""
        gone = missing()
        if gone:
            raise SlurmUnavailable("not installed: %s (.ci/setup installs slurmctld slurmd slurm-client munge)"
                                   % " ".join(gone))
        if os.geteuid() != 0:
            raise SlurmUnavailable("slurmd must run as root")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        os.chmod(self.dir, 0o755)  # other users' clients (runuser) reach munged's socket through it
        for sub in ["munge", "ctld", "spool"] + [os.path.join("spool", n) for n in self.nodes if len(self.nodes) > 1]:
            os.makedirs(os.path.join(self.dir, sub), mode=0o755, exist_ok=True)
        key = os.path.join(self.dir, "munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        ctld_port, *d_ports = _free_ports(1 + len(self.nodes))
        with open(self.conf, "w") as f:
            f.write(self._conf(ctld_port, d_ports))
        sock = os.path.join(self.dir, "munge", "munge.socket")
        self._daemon("munged", [which("munged"), "-F", "--force", "--socket=" + sock, "--key-file=" + key,
                                "--pid-file=" + os.path.join(self.dir, "munge", "munged.pid"),
                                "--seed-file=" + os.path.join(self.dir, "munge", "munge.seed"),
                                "--log-file=" + os.path.join(self.dir, "munged.log")])
        self._wait("munged's socket", lambda: os.path.exists(sock), 30, "munged.log")
        self._daemon("slurmctld", [which("slurmctld"), "-D", "-c", "-f", self.conf])
        self._wait("slurmctld", lambda: self.run([which("sinfo"), "-h"], check=False, timeout=10).returncode == 0,
                   60, "slurmctld.log")
        for node in self.nodes:
            self._daemon(self._slurmd(node), [which("slurmd"), "-D", "-f", self.conf, "-N", node])

        def idle() -> bool:
            r = self.run([which("sinfo"), "-h", "-N", "-o", "%t"], check=False, timeout=10)
            return r.returncode == 0 and r.stdout.split() == ["idle"] * len(self.nodes)

        self._wait("the node%s to be idle" % ("s" if len(self.nodes) > 1 else ""), idle, 60,
                   self._slurmd(self.nodes[-1]) + ".log")

    def _slurmd(self, node: str) -> str:
        """The name of ``node``'s slurmd in ``procs`` (its log: that and ``.log``)."""
        return "slurmd" if len(self.nodes) == 1 else "slurmd-%s" % node

    def jobs(self) -> List[str]:
        r = self.run([which("squeue"), "-h", "-o", "%i"], check=False, timeout=30)
        return r.stdout.split() if r.returncode == 0 else []

    def end_job(self, job: str, timeout: float = 120) -> None:
        """scancel ``job`` with SIGKILL (TF workers ignore SIGTERM); wait until squeue no longer has it."""
        deadline = time.monotonic() + timeout
        while job in self.jobs():
            self.run(["scancel", "--signal=KILL", "--full", job], check=False)
            self.run(["scancel", job], check=False)
            assert time.monotonic() < deadline, "job %s did not end" % job
            time.sleep(0.5)

    def step_pids(self, job: str, step: str = "0", node: Optional[str] = None) -> List[int]:
        """The pids of the tasks of step ``job.step`` on ``node`` (``scontrol listpids``; the first node
        when None: without a node name it answers for the first one only)."""
        r = self.run([which("scontrol"), "listpids", job] + ([node] if node else []), check=False, timeout=30)
        out = []
        for line in r.stdout.splitlines()[1:]:
            cols = line.split()
            if len(cols) >= 5 and cols[2] == step and cols[4].isdigit():
                out.append(int(cols[0]))
        return out

    def cancel_all(self, timeout: float = 120) -> None:
        """scancel every job (SIGKILL: TF workers ignore SIGTERM) and wait until squeue is empty."""
        deadline = time.monotonic() + timeout
        while self.jobs() and time.monotonic() < deadline:
            for job in self.jobs():
                self.run([which("scancel"), "--signal=KILL", "--full", job], check=False, timeout=30)
                self.run([which("scancel"), job], check=False, timeout=30)
            time.sleep(0.5)

    def stop(self) -> None:
        """Cancel every job, stop the daemons (slurmd, slurmctld, munged), check nothing is left."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            try:
                self.cancel_all()
            except (subprocess.SubprocessError, OSError):
                pass
        steps = self.stepds()
        for name in [self._slurmd(n) for n in self.nodes] + ["slurmctld", "munged"]:
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for pid in steps:  # a step daemon of ours left behind (it should have gone with its job)
            try:
                psutil.Process(pid).wait(timeout=10)
            except psutil.NoSuchProcess:
                pass
            except psutil.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)

    def stepds(self) -> List[int]:
        """The slurmstepd processes of this cluster (their command line or cwd names our spool)."""
        out = []
        for p in psutil.process_iter(["pid", "name", "cmdline"]):
            if p.info["name"] == "slurmstepd":
                try:
                    if self.dir in " ".join(p.info["cmdline"] or []) or p.cwd().startswith(self.dir):
                        out.append(p.info["pid"])
                except psutil.Error:
                    pass
        return out

    def strays(self) -> List[int]:
        """Live processes that carry this cluster's ``SLURM_CONF`` in their environment (the daemons, and
        every process of its jobs: sbatch and srun pass the submitter's environment on), this one aside."""
        out = []
        for p in psutil.process_iter(["pid", "status"]):
            if p.info["pid"] == os.getpid() or p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            try:
                with open("/proc/%d/environ" % p.info["pid"], "rb") as f:
                    if ("SLURM_CONF=%s" % self.conf).encode() in f.read().split(b"\0"):
                        out.append(p.info["pid"])
            except OSError:
                pass
        return out

    def leftovers(self, wait: float = 10.0) -> List[str]:
        """What of ours still runs after ``wait`` seconds at most: daemons, step daemons, the jobs'
        processes ("name pid")."""
        deadline = time.monotonic() + wait
        while True:
            left = ["%s %d" % (n, p.pid) for n, p in self.procs.items() if p.poll() is None]
            left += ["slurmstepd %d" % pid for pid in self.stepds()]
            for pid in self.strays():
                try:
                    left.append("%s %d" % (psutil.Process(pid).name(), pid))
                except psutil.NoSuchProcess:
                    pass
            if not left or time.monotonic() >= deadline:
                return sorted(set(left))
            time.sleep(0.2)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def cluster_for_tests(nodes: int = 1) -> Iterator[LocalSlurm]:
    """A started cluster of ``nodes`` nodes for a test module's fixture (``yield from`` it): under ``CI`` a cluster
    that cannot start fails the tests, elsewhere it skips them; at the end it is stopped and nothing of it may be
    left running."""
    import pytest

    cluster = LocalSlurm(nodes=nodes) if nodes > 1 else LocalSlurm()
    try:
        cluster.start()
    except (SlurmUnavailable, OSError, subprocess.SubprocessError) as exc:
        cluster.remove()
        what = "a %d-node Slurm" % nodes if nodes > 1 else "a single-node Slurm"
        if os.environ.get("CI"):
            pytest.fail("CI must be able to start %s: %s" % (what, exc), pytrace=False)
        pytest.skip("no Slurm here: %s" % exc)
    try:
        yield cluster
    finally:
        cluster.stop()
        left = cluster.leftovers()
        cluster.remove()
        assert not left, "left running: %s" % left


def main() -> None:  # pragma: no cover - by hand
    cluster = LocalSlurm(sys.argv[1] if len(sys.argv) > 1 else None, int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    cluster.start()
    print("export SLURM_CONF=%s" % cluster.conf, flush=True)
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        cluster.stop()
        print("left: %s" % (cluster.leftovers() or "nothing"))


if __name__ == "__main__":
    main()
