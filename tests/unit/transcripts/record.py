"""Record the MI transcripts of ``tests/unit``: real gdb, real processes, tfnative's own code.

Run it again when gdb or the scenarios change (it needs gdb, gcc and g++)::

    .venv/bin/python -m tests.unit.transcripts.record

Each scenario (``scenarios.py``) runs over a real gdb started as a session
starts it (``gdb/control.start_gdb``), on probe.c or overloads.cpp launched and
caught at its exec as ``attach`` launches a script (``targets.LaunchedTarget``).
What the scenario sends, and every line gdb writes back, goes to
``NAME.json`` beside this file, with facts read independently of gdb (the
process's code mappings from ``/proc``, function ranges from ``nm``) for the
tests to check against.
"""

from __future__ import annotations

import collections
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
from typing import Any, Callable, Deque, Dict, List, Optional

from tfnative.attach.targets import LaunchedTarget
from tfnative.attach.tfenv import NUMERICS_SIGNAL
from tfnative.core import procfs
from tfnative.gdb import control
from tfnative.gdb.mi import Gdb, parse_line
from tfnative.output.report import Document

from . import scenarios

HERE = os.path.dirname(os.path.abspath(__file__))


class RecordingGdb(Gdb):
    """A real ``Gdb`` that keeps what the code sent and read, with gdb's raw lines."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.steps: List[Dict[str, Any]] = []
        self._raw_lock = threading.Lock()
        self._stream: List[str] = []  # console and log lines since the last command
        self._result_lines: Dict[int, str] = {}
        self._event_lines: Deque[str] = collections.deque()
        super().__init__(*args, **kw)

    def _take(self, line: str) -> None:
        rec = parse_line(line)
        with self._raw_lock:
            if rec.get("type") == "result" and rec.get("token") is not None:
                self._result_lines[int(rec["token"])] = line
            elif rec.get("type") == "notify":
                self._event_lines.append(line)
            else:
                self._stream.append(line)
        super()._take(line)

    def command(self, cmd: str, timeout: float = 60.0) -> Dict[str, Any]:
        token = self._token + 1
        try:
            return super().command(cmd, timeout)
        finally:
            with self._raw_lock:
                lines, self._stream = self._stream, []
                result = self._result_lines.pop(token, None)
            self.steps.append({"send": cmd, "lines": lines + ([result] if result else [])})

    def next_event(self, timeout: Optional[float]) -> Optional[Dict[str, Any]]:
        rec = super().next_event(timeout)
        with self._raw_lock:
            line = self._event_lines.popleft() if rec is not None else None
        self.steps.append({"event": line})
        return rec


def build(workdir: str) -> Dict[str, str]:
    """probe.c and overloads.cpp, compiled as a user would (PIE, -O0 -g)."""
    out = {"probe": os.path.join(workdir, "probe"), "overloads": os.path.join(workdir, "overloads")}
    subprocess.run(["gcc", "-O0", "-g", "-o", out["probe"], os.path.join(HERE, "probe.c")], check=True)
    subprocess.run(["g++", "-O0", "-g", "-o", out["overloads"], os.path.join(HERE, "overloads.cpp")], check=True)
    return out


def code_rows(pid: int) -> List[List[Any]]:
    """The process's executable file mappings, as ``SymbolLoader`` reads them."""
    return [[lo, hi, name] for lo, hi, perms, _o, _d, inode, name in procfs.maps(pid)
            if "x" in perms and inode and name.startswith("/")]


def functions(exe: str, pid: int, names: List[str]) -> Dict[str, List[int]]:
    """[start, end) of each function of ``exe`` named in ``names`` (demangled), where ``pid`` maps it (nm)."""
    base = min(m.start for m in procfs.maps(pid) if m.path == exe and m.offset == 0)
    out: Dict[str, List[int]] = {}
    text = subprocess.run(["nm", "-C", "-S", "--defined-only", exe], capture_output=True, text=True,
                          check=True).stdout
    for line in text.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[2] in "Tt" and parts[3].split("(")[0] in names:
            out[parts[3]] = [base + int(parts[0], 16), base + int(parts[0], 16) + int(parts[1], 16)]
    return out


def record(name: str, exe: str, argv: List[str], run: Callable[[RecordingGdb, int, Dict[str, Any]], Any],
           facts: Callable[[int], Dict[str, Any]]) -> None:
    """Launch ``exe ARGV`` under a recording gdb, caught at its exec; run the scenario; write NAME.json."""
    real_gdb = control.Gdb
    control.Gdb = RecordingGdb  # start_gdb makes ours: the session's very setup
    try:
        gdb = control.start_gdb(control.GdbOptions())
    finally:
        control.Gdb = real_gdb
    assert isinstance(gdb, RecordingGdb)
    target = LaunchedTarget(exe, argv, dict(os.environ))
    try:
        target.start(gdb, Document(argv=[exe, *argv]), lambda running: None)
        known = facts(target.pid)
        gdb.steps = []  # the setup is not the scenario's: it starts at the exec stop
        result = run(gdb, target.pid, known)
    finally:
        target.release(gdb, False, False)
        if target.child is not None:
            target.child.kill()
            target.child.wait()
        if target.watch is not None:
            target.watch.stop()
    version = subprocess.run([gdb.argv[0], "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    doc = {"scenario": name, "program": [os.path.basename(exe), *argv], "gdb": version, "pid": target.pid,
           "facts": known, "steps": gdb.steps}
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("%s: %d steps, scenario returned %s" % (name, len(gdb.steps), str(result)[:200]))


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tfnative-transcripts-") as workdir:
        exe = build(workdir)
        err = io.StringIO()
        def probe_facts(pid: int) -> Dict[str, Any]:
            return {"functions": functions(exe["probe"], pid, [scenarios.PROBE_BREAK])}

        def stops(gdb: RecordingGdb, pid: int, known: Dict[str, Any]) -> Any:
            return scenarios.stops(gdb, err)

        for mode in ("exit", "segv", "child"):
            record("stops-" + mode, exe["probe"], [mode], stops, probe_facts)
        record("stops-numerics", exe["probe"], ["signal", str(NUMERICS_SIGNAL)], stops, probe_facts)
        record("phases", exe["probe"], ["exit"], lambda gdb, pid, known: scenarios.phases(gdb, pid, err)[0].log,
               probe_facts)
        record("breakpoints", exe["overloads"], [],
               lambda gdb, pid, known: scenarios.breakpoint_table(gdb, [tuple(r) for r in known["code"]], err),
               lambda pid: {"code": code_rows(pid),
                            "functions": functions(exe["overloads"], pid, ["overloaded", "main"])})
        sys.stderr.write(err.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
