"""The ptrace refusal names the capabilities the target holds beyond ours (no gdb, no TF)."""
import os

from tfnative.attach import session


def test_no_capability_missing_for_ourselves():
    assert session.missing_capabilities(os.getpid()) == []


def test_unknown_pid_gives_no_names():
    assert session.missing_capabilities(2 ** 22 + 7) == []


def test_extra_capability_is_named(monkeypatch):
    caps = {"self": 0, "42": 1 << 19 | 1 << 24}
    monkeypatch.setattr(session, "_cap_eff", lambda pid: caps.get(pid))
    assert session.missing_capabilities(42) == ["CAP_SYS_PTRACE", "CAP_SYS_RESOURCE"]
    assert "CAP_SYS_RESOURCE" in session.ptrace_refused_message(42)
