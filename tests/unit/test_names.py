"""One symbolizer's naming rules: demangling (cached, no process for C names) and glibc's versioned aliases."""

from __future__ import annotations

import subprocess

from tfnative.core.binary import cxxnames
from tfnative.core.binary.cxxnames import demangle, display_names


def test_c_names_and_cached_names_start_no_process(monkeypatch):
    calls = []
    real = subprocess.run

    def counting(*a, **kw):
        calls.append(a)
        return real(*a, **kw)

    monkeypatch.setattr(cxxnames.subprocess, "run", counting)
    monkeypatch.setattr(cxxnames, "_DEMANGLED", {})  # names other tests demangled are not cached here
    assert demangle(["TF_NewSession", "pthread_cond_wait@@GLIBC_2.3.2"]) == [
        "TF_NewSession", "pthread_cond_wait@@GLIBC_2.3.2"]
    assert calls == []
    name = "_ZN10tensorflow12EagerContextD2Ev"
    assert demangle([name, name]) == ["tensorflow::EagerContext::~EagerContext()"] * 2
    assert len(calls) == 1
    assert demangle([name]) == ["tensorflow::EagerContext::~EagerContext()"]
    assert len(calls) == 1


def test_display_names_drop_glibc_versions_but_keep_cxx_names():
    assert display_names(["pthread_cond_wait@@GLIBC_2.3.2", "memcpy@GLIBC_2.14", "_ZN3foo3barEv", "plain"]) == [
        "pthread_cond_wait", "memcpy", "foo::bar()", "plain"]
