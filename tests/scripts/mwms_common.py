"""What the local MultiWorkerMirroredStrategy jobs' launchers share (``mwms_launcher.py``, ``mwms_missing_rank.py``,
``mwms_steps.py``, which import it from their own directory): free loopback ports for the cluster, and workers
that die with their launcher."""
import ctypes
import signal
import socket

PR_SET_PDEATHSIG = 1


def free_ports(n):
    """``n`` loopback ports free now (bound together, then let go)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def die_with_parent():
    """A ``preexec_fn``: the worker gets SIGKILL when its launcher dies (the workers ignore SIGTERM)."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
