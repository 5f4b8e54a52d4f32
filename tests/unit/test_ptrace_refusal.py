"""The ptrace refusal names the capabilities the target holds beyond ours (no gdb, no TF)."""
import os

from tfnative.core import procfs
from tfnative.sources import permissions


def test_no_capability_missing_for_ourselves():
    assert permissions.missing_capabilities(os.getpid()) == []


def test_unknown_pid_gives_no_names():
    assert permissions.missing_capabilities(2 ** 22 + 7) == []


def test_extra_capability_is_named(monkeypatch):
    caps = {os.getpid(): 0, 42: 1 << 19 | 1 << 24}
    status = procfs.status
    monkeypatch.setattr(procfs, "status",
                        lambda pid, tid=None: {"CapEff": "%x" % caps[pid]} if pid in caps else status(pid, tid))
    assert permissions.missing_capabilities(42) == ["CAP_SYS_PTRACE", "CAP_SYS_RESOURCE"]
    assert "CAP_SYS_RESOURCE" in permissions.ptrace_refused_message(42)
