"""Ports for a test's TensorFlow workers (or Slurm daemons) that nothing else takes before they bind them.

A port the kernel gives to ``bind(0)`` is an ephemeral one: once closed, the next outgoing connection on the
machine may take it as its own local port before the worker that was meant to bind it does (eight gRPC
workers open dozens of such connections while they start).  A test of 8 ranks died so: "Failed to add port to
server ... Could not start gRPC server".  The ports here are below the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``), where no connection's own port is ever taken, and free now.

    python free_ports.py N      # N such ports, comma-separated
"""

import errno
import random
import socket
import sys

FALLBACK_LOW = 32768  # Linux's default low end of the ephemeral range


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return FALLBACK_LOW


def free_ports(n):
    """``n`` distinct ports below the ephemeral range that bind on 127.0.0.1 now."""
    low = ephemeral_low()
    pool = list(range(max(1024, low - 12000), low))
    random.shuffle(pool)  # two tests started at once pick different ports
    ports = []
    for port in pool:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    continue
                raise
        ports.append(port)
        if len(ports) == n:
            return ports
    raise SystemExit("no %d free ports below %d" % (n, low))


if __name__ == "__main__":
    print(",".join(str(p) for p in free_ports(int(sys.argv[1]))))
