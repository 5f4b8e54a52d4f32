"""How the fuzz suite runs tfnative on bad input and what counts as a failure.

Every fuzz test runs tfnative through ``run_bounded``: a fresh process in a session of its own, its RSS
sampled while it runs, a wall-clock bound.  A run fails the test when it

- outlives its bound (a hang: tfnative and everything it started are killed, and the test says so);
- grows past its RSS bound (a blow-up);
- exits 70 (tfnative's "internal error"), prints a Python traceback, or is killed by a signal;
- exits non-zero with anything but one line on stderr, ``tfnative: error: ...`` (or ``tfnative: ...``);
- leaves a process of its session behind (an orphaned gdb, a helper), or leaves its target traced or stopped
  (``assert_released``).

``Budget`` says how long the generated parts run: a fixed seed and a few minutes in all under CI, longer on
demand with ``pytest tests/fuzz --fuzz-minutes N`` or ``TFNATIVE_FUZZ_MINUTES=N`` (then the seed is random and
printed, unless ``TFNATIVE_FUZZ_SEED`` fixes it).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence

import psutil

from ..installed import tfnative_command
from ..utils import ROOT

TFNATIVE = tfnative_command()


@dataclass(frozen=True)
class Budget:
    """How much generated input a fuzz test runs: ``minutes`` 0 is CI's fixed, short run."""

    minutes: float
    seed: int

    @property
    def on_demand(self) -> bool:
        return self.minutes > 0

    def examples(self, ci: int) -> int:
        """Hypothesis' ``max_examples``: ``ci`` under CI; on demand, enough to fill the minutes (~``ci`` a
        minute per test is a deliberately low guess: Hypothesis stops early when it runs out of ideas)."""
        return ci if not self.on_demand else max(ci, int(ci * 20 * self.minutes))

    def seconds(self, ci: float) -> float:
        """A loop fuzzer's time: ``ci`` seconds under CI, the whole on-demand budget otherwise."""
        return ci if not self.on_demand else max(ci, 60.0 * self.minutes)

    def rng(self, salt: str = "") -> random.Random:
        return random.Random("%d/%s" % (self.seed, salt))


def budget_from(option: Optional[str]) -> Budget:
    raw = option if option is not None else os.environ.get("TFNATIVE_FUZZ_MINUTES", "")
    try:
        minutes = float(raw) if raw else 0.0
    except ValueError:
        raise SystemExit("--fuzz-minutes / TFNATIVE_FUZZ_MINUTES: not a number: %r" % raw)
    if minutes != minutes or minutes < 0:
        raise SystemExit("--fuzz-minutes / TFNATIVE_FUZZ_MINUTES: must be a number >= 0: %r" % raw)
    seed_raw = os.environ.get("TFNATIVE_FUZZ_SEED")
    if seed_raw:
        seed = int(seed_raw)
    elif minutes > 0:
        seed = random.SystemRandom().randrange(1 << 31)
    else:
        seed = 20261126
    return Budget(minutes=minutes, seed=seed)


@dataclass
class Outcome:
    args: List[str]
    returncode: int
    stdout: str
    stderr: str
    peak_rss_mb: float
    seconds: float

    def describe(self) -> str:
        return "tfnative %s -> exit %d in %.1f s, peak RSS %.0f MB\nstderr: %s" % (
            " ".join(repr(a) if (not a or " " in a or "\n" in a) else a for a in self.args), self.returncode,
            self.seconds, self.peak_rss_mb, self.stderr[-2000:])


class FuzzFailure(AssertionError):
    pass


def _session_members(sid: int) -> List[psutil.Process]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (OSError, psutil.Error):
            pass
    return out


def _kill_session(sid: int) -> None:
    for p in _session_members(sid):
        try:
            p.kill()
        except psutil.Error:
            pass


def run_bounded(args: Sequence[str], timeout: float = 60.0, rss_mb: float = 1024.0, cwd: str = ROOT,
                stdin: Optional[int] = subprocess.DEVNULL, env: Optional[dict] = None,
                expect_ok: Optional[bool] = None) -> Outcome:
    """Run ``tfnative ARGS`` under the bounds above; raise ``FuzzFailure`` on any breach of the contract.

    ``expect_ok``: True requires exit 0, False a non-zero exit, None either (the one-line rule applies to any
    non-zero exit)."""
    args = list(args)
    start = time.monotonic()
    proc = subprocess.Popen(TFNATIVE + args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cwd, env=env, start_new_session=True)
    sid = proc.pid
    peak = 0.0
    import threading

    chunks: dict = {"out": [], "err": []}

    def pump(stream, key):  # noqa: ANN001, ANN202
        # Bounded: a flood of output is itself a failure, not something to keep in memory.
        total = 0
        while True:
            b = stream.read(65536)
            if not b:
                return
            total += len(b)
            if total <= 16 << 20:
                chunks[key].append(b)

    pumps = [threading.Thread(target=pump, args=(proc.stdout, "out"), daemon=True),
             threading.Thread(target=pump, args=(proc.stderr, "err"), daemon=True)]
    for t in pumps:
        t.start()
    ps = psutil.Process(proc.pid)
    why = None
    while proc.poll() is None:
        try:
            rss = ps.memory_info().rss / 1e6
            peak = max(peak, rss)
        except psutil.Error:
            pass
        if peak > rss_mb:
            why = "blow-up: RSS %.0f MB over the %.0f MB bound" % (peak, rss_mb)
            break
        if time.monotonic() - start > timeout:
            why = "hang: still running after %.0f s" % timeout
            break
        time.sleep(0.02)
    if why is not None:
        try:
            os.killpg(sid, signal.SIGKILL)
        except OSError:
            pass
        _kill_session(sid)
        proc.wait()
    for t in pumps:
        t.join(5)
    out = Outcome(args=args, returncode=proc.returncode, stdout=b"".join(chunks["out"]).decode("utf-8", "replace"),
                  stderr=b"".join(chunks["err"]).decode("utf-8", "replace"), peak_rss_mb=peak,
                  seconds=time.monotonic() - start)
    if why is not None:
        raise FuzzFailure("%s\n%s" % (why, out.describe()))
    # Whatever tfnative started must be gone with it (a grace period for a child that is just exiting).
    deadline = time.monotonic() + 5.0
    left = _session_members(sid)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _session_members(sid)
    if left:
        names = ", ".join("%d %s" % (p.pid, p.name()) for p in left)
        _kill_session(sid)
        raise FuzzFailure("left behind: %s\n%s" % (names, out.describe()))
    check_contract(out, expect_ok)
    return out


def check_contract(out: Outcome, expect_ok: Optional[bool] = None) -> None:
    """The error contract: no traceback, no internal error, no death by signal, one line when it fails."""
    if "Traceback (most recent call last)" in out.stderr or "Traceback (most recent call last)" in out.stdout:
        raise FuzzFailure("a traceback\n" + out.describe())
    if out.returncode == 70 or "internal error" in out.stderr:
        raise FuzzFailure("internal error\n" + out.describe())
    if out.returncode < 0:
        raise FuzzFailure("killed by signal %d\n%s" % (-out.returncode, out.describe()))
    if expect_ok is True and out.returncode != 0:
        raise FuzzFailure("expected success\n" + out.describe())
    if expect_ok is False and out.returncode == 0:
        raise FuzzFailure("expected a non-zero exit\n" + out.describe())
    if out.returncode != 0 and out.returncode not in (124, 130, 141):
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("tfnative: ") or ln.startswith("Error: ")
                  or ln.startswith("Usage: ") or ln.startswith("Try ")]
        if not errors:
            raise FuzzFailure("a failure with no 'tfnative: ...' line\n" + out.describe())
        if len([ln for ln in lines if ln.startswith("tfnative: error")]) > 1:
            raise FuzzFailure("more than one error line\n" + out.describe())


def tracer_and_state(pid: int) -> tuple:
    """(TracerPid, state letter) of a live process, or (0, '') once it is gone."""
    tracer, state = 0, ""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    tracer = int(line.split()[1])
                elif line.startswith("State:"):
                    state = line.split()[1]
    except OSError:
        return 0, ""
    return tracer, state


def assert_released(pid: int, was_stopped: bool = False, timeout: float = 5.0) -> None:
    """The target is neither traced nor left in a ptrace stop (nor stopped, unless it was before)."""
    deadline = time.monotonic() + timeout
    while True:
        tracer, state = tracer_and_state(pid)
        bad = tracer != 0 or state == "t" or (state == "T" and not was_stopped)
        if not bad or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if bad:
        raise FuzzFailure("target %d left %s (TracerPid %d)" % (pid, state, tracer))
