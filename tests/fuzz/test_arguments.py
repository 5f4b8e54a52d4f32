"""Hostile arguments for every command, and every kind of output path that cannot be written (issue #34).

Each run goes through ``run_bounded`` (no hang, no blow-up, no traceback, no internal error, one error line, no
process of its session left), and besides:

- no injected command ran: the file that ``$(touch MARK)``, ``; touch MARK``, a backtick... would make never
  appears (not in the run's directory, not in /tmp);
- nothing is left behind: no process of any session that carries the run's tag in its environment (gdb runs
  in a session of its own, the script in another), no temporary output file (``*.tfnative-tmp``), no target
  traced or stopped.

The generated part (Hypothesis: empty strings, control characters, newlines, shell and MI metacharacters,
``-``-leading names, huge strings, NaN/inf/negative numbers, paths that cannot be written) runs each command's
options against cheap targets: a ``stack --json`` document for merge, a small core for core and report, a pid
that does not exist for stack and attach.  The attach runs that start gdb are few and fixed (a ``print(1)``
script): one for each of the issue's examples.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ..installed import import_paths
from ..utils import ROOT, TFNATIVE, requires_gdb, script, wait_for_file
from .harness import Budget, Outcome, assert_released, run_bounded

MARK = "tfnative-fuzz-injected"  # what every injected command would create
NO_PID = "999999999"  # no such process: stack and attach fail fast, after every option was parsed

pytestmark = requires_gdb


# -- the runs ---------------------------------------------------------------------------------------------------

class Place:
    """A directory the runs happen in, with the inputs they need and the tag their environment carries."""

    def __init__(self, root: str, doc: str, core: str, ok_script: str, fifo: str) -> None:
        self.root = root
        self.doc = doc
        self.core = core
        self.ok = ok_script
        self.fifo = fifo  # nobody writes to it
        self.keep = set(os.listdir(root))

    def run(self, args: Sequence[str], expect_ok: Optional[bool] = None, timeout: float = 60.0,
            stdin: Optional[int] = subprocess.DEVNULL) -> Outcome:
        tag = uuid.uuid4().hex
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(import_paths()), TFNATIVE_FUZZ_TAG=tag)
        try:
            out = run_bounded(args, timeout=timeout, cwd=self.root, env=env, expect_ok=expect_ok, stdin=stdin)
        finally:
            left = _tagged(tag)
            for p in left:
                p.kill()
        assert not left, "left behind: %s (tfnative %s)" % (
            ", ".join("%d %s" % (p.pid, p.name()) for p in left), " ".join(args)[:500])
        self.check_clean(args)
        return out

    def check_clean(self, args: Sequence[str]) -> None:
        """No injected command ran; no temporary file is left; the directory is as it was (outputs removed)."""
        for where in (self.root, "/tmp", ROOT):
            assert not os.path.exists(os.path.join(where, MARK)), "an injected command ran: %r" % list(args)
        for name in os.listdir(self.root):
            assert not name.endswith(".tfnative-tmp"), "temporary file left: %r (%r)" % (name, list(args))
            if name not in self.keep:
                path = os.path.join(self.root, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)


def _tagged(tag: str) -> List[psutil.Process]:
    """Live processes whose environment carries ``TFNATIVE_FUZZ_TAG=tag`` (tfnative, its gdb, its script)."""
    needle = ("TFNATIVE_FUZZ_TAG=%s" % tag).encode()
    found = []
    deadline = time.monotonic() + 5.0  # a grace period for a child that is just exiting
    while True:
        found = []
        for p in psutil.process_iter(["pid"]):
            try:
                with open("/proc/%d/environ" % p.pid, "rb") as f:
                    if needle in f.read() and p.status() != psutil.STATUS_ZOMBIE:
                        found.append(p)
            except (OSError, psutil.Error):
                pass
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Place]:
    """A ``stack --json`` document and a core of a small Python process, and a ``print(1)`` script."""
    root = str(tmp_path_factory.mktemp("args"))
    inputs = str(tmp_path_factory.mktemp("inputs"))
    ready = os.path.join(inputs, "ready")
    sleeper = subprocess.Popen([sys.executable, script("sleeper.py"), ready])
    try:
        wait_for_file(ready, proc=sleeper)
        doc = os.path.join(inputs, "doc.json")
        r = subprocess.run([*TFNATIVE, "stack", "--pid", str(sleeper.pid), "--json", doc],
                           capture_output=True, text=True, timeout=120, cwd=ROOT, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        prefix = os.path.join(inputs, "core")
        r = subprocess.run(["gcore", "-o", prefix, str(sleeper.pid)], capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
    finally:
        sleeper.kill()
        sleeper.wait(10)
    ok = os.path.join(inputs, "ok.py")
    with open(ok, "w") as f:
        f.write("print(1)\n")
    fifo = os.path.join(inputs, "fifo")
    os.mkfifo(fifo)
    yield Place(root, doc, "%s.%d" % (prefix, sleeper.pid), ok, fifo)


@pytest.fixture(scope="module")
def sleeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    ready = str(tmp_path_factory.mktemp("sleeper") / "ready")
    proc = subprocess.Popen([sys.executable, script("sleeper.py"), ready])
    try:
        wait_for_file(ready, proc=proc)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)


# -- hostile values ---------------------------------------------------------------------------------------------

INJECTIONS = ["$(touch %s)" % MARK, "`touch %s`" % MARK, "; touch %s" % MARK, "x;touch %s" % MARK,
              "| touch %s" % MARK, "&& touch %s" % MARK, "\"; touch %s; \"" % MARK, "$(touch /tmp/%s)" % MARK,
              "'; shell touch %s; '" % MARK, "\\\"\n-gdb-exit\n" "shell touch %s" % MARK]
MI_META = ['"', "\\", '\\"', "\\n", '""', "-", "--", "-x", "--json", "-gdb-exit", "-foo bar", "*", "*0", "{}",
           "%s%n", "^done", "~\"x\"", "(gdb)"]
CONTROL = ["\n", "a\nb", "\r", "\t", "\x1b[31mred", "\x7f", "\u2028", "\x85", " ", "  ", "..", "/", "~", "$HOME"]
NUMBERS = ["nan", "NaN", "inf", "-inf", "-1", "-0.5", "0", "-0", "1e309", "1e-400", "99999999999999999999", "0x10",
           "1_0", " 1", ""]

texts = st.one_of(
    st.sampled_from(INJECTIONS + MI_META + CONTROL + [""]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30),
    # huge: up to 100 kB, under the kernel's 128 kB for one argument
    st.builds(lambda n, c: c * n, st.integers(10_000, 50_000), st.sampled_from(["a", "/", "é", "$(", "\n", "\\"])),
)
numbers = st.one_of(st.sampled_from(NUMBERS), texts)
# A core's path is core's input (its reader, files.open_input on another branch of #34): a name over the kernel's
# 255 bytes (ENAMETOOLONG) is left to that work's tests; every other hostile name is tried here.
inputs = texts.filter(lambda t: len(t.encode()) <= 255)

# Each command's options: (option, kind of value, the rest of a cheap run: args before it).
Recipe = Tuple[str, str, Callable[[Place], List[str]]]


def _merge(p: Place) -> List[str]:
    return ["merge", p.doc]


def _stack(p: Place) -> List[str]:
    return ["stack", "--pid", NO_PID]


def _core(p: Place) -> List[str]:
    return ["core", p.core]


def _attach(p: Place) -> List[str]:
    return ["attach", "--pid", NO_PID]


def _report(p: Place) -> List[str]:
    return ["report", "--pid", NO_PID]


def _report_core(p: Place) -> List[str]:
    return ["report", "--core", p.core]


def _watch(p: Place) -> List[str]:
    return ["watch", "--pid", NO_PID]


def _doctor(p: Place) -> List[str]:
    return ["doctor", "/bin/true"]


def _bazelrc(p: Place) -> List[str]:
    return ["bazelrc", "tfn_targeted"]


def _presets(p: Place) -> List[str]:
    return ["presets"]


RECIPES: Dict[str, List[Recipe]] = {
    "merge": [("--json", "out", _merge), ("--html", "out", _merge), ("--speedscope", "out", _merge),
              ("", "text", lambda p: ["merge"]), ("--folded", "flag", _merge), ("--all-threads", "flag", _merge)],
    "stack": [("--json", "out", _stack), ("--html", "out", _stack), ("--speedscope", "out", _stack),
              ("--gdb-log", "out", _stack), ("--match", "text", lambda p: ["stack"]),
              ("--env", "text", lambda p: ["stack"]), ("--label", "text", _stack), ("--interval", "number", _stack),
              ("--samples", "number", _stack), ("--pid", "number", lambda p: ["stack"]),
              ("--children", "number", lambda p: ["stack"]), ("--gdb", "text", _stack),
              ("--slurm-job", "text", lambda p: ["stack"]), ("--documents", "out", lambda p: ["stack"]),
              ("--remote-tfnative", "text", lambda p: ["stack", "--slurm-job", "1"])],
    "core": [("--json", "out", _core), ("--sysroot", "text", _core), ("--gdb", "text", _core),
             ("", "input", lambda p: ["core"]), ("", "input", _core)],
    "attach": [("--json", "out", _attach), ("--gdb-log", "out", _attach), ("--save-core", "out", _attach),
               ("--break", "text", _attach), ("--break-op", "text", _attach), ("--timeout", "number", _attach),
               ("--max-hits", "number", _attach), ("--vlog", "number", _attach), ("--pid", "number",
                                                                                   lambda p: ["attach"]),
               ("--source-dir", "text", _attach), ("--python", "text", lambda p: ["attach", p.ok]),
               ("--vmodule", "text", lambda p: ["attach", p.ok]), ("--gdb", "text", lambda p: ["attach", p.ok]),
               ("--env", "text", lambda p: ["attach"]), ("--slurm-job", "text", lambda p: ["attach"]),
               ("-m", "text", _attach), ("", "text", lambda p: ["attach"])],
    "report": [("--output", "out", _report), ("-o", "out", _report_core), ("--json", "out", _report),
               ("--core", "input", lambda p: ["report"]), ("--sysroot", "text", _report_core),
               ("--timeout", "number", _report), ("--break", "text", _report)],
    "doctor": [("", "file", lambda p: ["doctor"]), ("--python", "file", lambda p: ["doctor"]),
               ("--source-dir", "text", _doctor)],
    "bazelrc": [("", "text", lambda p: ["bazelrc"]), ("--files", "text", _bazelrc),
                ("--workspace", "text", lambda p: ["bazelrc"])],
    "presets": [("", "text", _presets), ("--json", "flag", _presets)],
    "watch": [("--json", "out", _watch), ("--out", "out", _watch), ("--progress-file", "text", _watch),
              ("--hang-after", "number", _watch), ("--interval", "number", _watch),
              ("--straggler-after", "number", _watch), ("--on-hang", "text", _watch),
              ("--pid", "number", lambda p: ["watch"]), ("--children", "number", lambda p: ["watch"]),
              ("--env", "text", lambda p: ["watch"]), ("-m", "text", _watch), ("--gdb", "text", _watch),
              ("", "text", lambda p: ["watch", "--pid", NO_PID])],
}
CI_EXAMPLES = {"merge": 12, "stack": 10, "core": 6, "attach": 10, "report": 6, "doctor": 6, "bazelrc": 6,
               "presets": 3, "watch": 8}


def _outputs(p: Place) -> st.SearchStrategy[str]:
    """Output paths: hostile names, and paths that cannot be written (a FIFO has its own test: it needs a reader)."""
    unwritable = ["/dev/full", "/proc/version", p.root, os.path.join(p.root, "missing", "x.json"), "/",
                  "/proc/self/mem", os.path.join(p.root, "new\nline.json"), "-"]
    return st.one_of(st.sampled_from(unwritable), texts.filter(lambda t: "\x00" not in t))


def _files(p: Place) -> st.SearchStrategy[str]:
    """Paths to read that are no regular file (a FIFO nobody writes to, devices, a directory), or hostile names."""
    return st.one_of(st.sampled_from([p.fifo, "/dev/full", "/dev/zero", "/dev/null", "/proc/version", p.root,
                                      "/proc/self/mem"]), texts)


def test_every_command_has_recipes() -> None:
    """Every command ``tfnative --help`` lists is fuzzed here: a new command needs its recipes."""
    import click

    from tfnative.cli import main

    assert set(main.list_commands(click.Context(main))) == set(RECIPES) == set(CI_EXAMPLES)


def _harmless(option: str, value: str) -> str:
    """The value, unless it could reach processes that are not this test's: a pid that exists, a regex or an
    environment variable that other processes on this machine would match (stack and attach would stop them)."""
    if option in ("--pid", "--children"):
        try:
            pid = int(value.strip())
        except ValueError:
            return value
        return NO_PID if 0 < pid <= 1 << 22 and psutil.pid_exists(pid) else value  # 1 << 22: Linux's pid_max
    if option == "--match":
        return "(?!)" + value  # never matches, and is compiled all the same
    if option == "--env" and value and not value.startswith("="):
        return "TFNATIVE_FUZZ_NO_SUCH_KEY_" + value
    return value


def _check_one_line(out: Outcome) -> None:
    """A failure that is not click's usage error is ``tfnative: ...`` lines only: a newline in a path or a
    value never splits the error line in two."""
    if out.returncode in (0, 130, 141) or "Usage: " in out.stderr:
        return
    if out.returncode == 2 and re.fullmatch(r"Error: [^\n]+\n", out.stderr):
        return  # click's usage error without its usage lines ("Option '--json' requires an argument.")
    stray = [ln for ln in out.stderr.splitlines() if ln.strip() and not ln.startswith("tfnative: ")]
    assert not stray, "a line that is not tfnative's: %r\n%s" % (stray, out.describe())


@pytest.mark.parametrize("command", sorted(RECIPES))
def test_hostile_values(command: str, place: Place, budget: Budget) -> None:
    """One generated value in one option of ``command``: the contract, nothing injected ran, nothing left."""

    @settings(max_examples=budget.examples(CI_EXAMPLES[command]))
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        option, kind, base = data.draw(st.sampled_from(RECIPES[command]), label="option")
        args = base(place)
        if kind == "flag":
            value = data.draw(texts, label="extra argument")
            args += [option, value]
        else:
            strategy = {"number": numbers, "out": _outputs(place), "input": inputs,
                        "file": _files(place)}.get(kind, texts)
            value = _harmless(option, data.draw(strategy, label="value"))
            args += ([option] if option else []) + [value]
        out = place.run(args, timeout=60)
        _check_one_line(out)
        if value == "":
            assert out.returncode != 0, "an empty value was accepted: %s" % out.describe()
        if kind == "number" and value.strip().lower() in ("nan", "inf", "-inf", "1e309"):
            assert out.returncode != 0, "a number that is not finite was accepted: %s" % out.describe()

    check()


# -- every kind of output that cannot be written, for every command that writes one ----------------------------

def _kinds(p: Place) -> Dict[str, Tuple[str, Optional[str]]]:
    """kind -> (path, what the error line says; None: the write succeeds)."""
    readonly = os.path.join(p.root, "readonly.json")
    return {
        "full": ("/dev/full", "No space left on device"),
        "proc": ("/proc/version", "cannot write /proc/version"),
        "directory": (p.root, "Is a directory"),
        "missing-directory": (os.path.join(p.root, "no", "x.json"), "no such directory"),
        "newline": (os.path.join(p.root, "a\nb", "x.json"), "a\\nb"),
        "readonly": (readonly, None if os.geteuid() == 0 else "Permission denied"),
        "readonly-directory": (os.path.join("/proc/self", "x.json"), "cannot write /proc/self/x.json"),
    }


WRITERS: Dict[str, Callable[[Place, str], List[str]]] = {
    "merge --json": lambda p, path: ["merge", p.doc, "--json", path],
    "merge --html": lambda p, path: ["merge", p.doc, "--html", path],
    "merge --speedscope": lambda p, path: ["merge", p.doc, "--speedscope", path],
    "core --json": lambda p, path: ["core", p.core, "--json", path],
    "report --core -o": lambda p, path: ["report", "--core", p.core, "-o", path],
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_unwritable_outputs_are_one_line(writer: str, place: Place) -> None:
    """Every kind for merge --json; the kinds only a write finds, and the newline, for the other writers."""
    kinds = _kinds(place)
    for kind, (path, says) in kinds.items():
        if writer != "merge --json" and kind not in ("full", "newline", "readonly"):
            continue
        if kind == "readonly":
            with open(path, "w") as f:
                f.write("old")
            os.chmod(path, 0o444)
            place.keep.add("readonly.json")
        out = place.run(WRITERS[writer](place, path), expect_ok=None if says is None else False)
        if says is None:
            continue
        errors = [ln for ln in out.stderr.splitlines() if ln.startswith("tfnative: error: ")]
        assert len(errors) == 1 and "cannot write" in errors[0] and says in errors[0], (kind, out.describe())
        assert not os.path.exists(os.path.join(place.root, "no"))
        assert os.path.isdir(place.root) and not os.path.exists(os.path.join(place.root, "a\nb"))


def _read_fifo(path: str, got: List[bytes]) -> None:
    with open(path, "rb") as f:
        got.append(f.read())


@pytest.mark.parametrize("writer", ["merge --json", "core --json"])
def test_a_fifo_output_is_written_not_replaced(writer: str, place: Place) -> None:
    fifo = os.path.join(place.root, "fifo")
    os.mkfifo(fifo)
    place.keep.add("fifo")
    try:
        got: List[bytes] = []
        reader = threading.Thread(target=_read_fifo, args=(fifo, got), daemon=True)
        reader.start()
        place.run(WRITERS[writer](place, fifo), expect_ok=True)
        reader.join(10)
        assert got and got[0].lstrip().startswith(b"{"), got
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    finally:
        place.keep.discard("fifo")
        os.unlink(fifo)


@pytest.mark.parametrize("args", [
    ["core", "{core}", "--with-gdb", "--gdb-log", "{root}"],
    ["core", "{core}", "--with-gdb", "--gdb-log", "/dev/full"],
    ["attach", "--gdb-log", "{root}", "{ok}"],
    ["attach", "--gdb-log", "/dev/full", "{ok}"],
    ["stack", "--pid", "{sleeper}", "--gdb-log", "/proc/version"],
])
def test_gdb_log_that_cannot_be_written(args: List[str], place: Place, sleeper: int) -> None:
    """gdb's log is opened (and its first line written) before gdb starts: one line, nothing started."""
    args = [a.format(core=place.core, root=place.root, ok=place.ok, sleeper=sleeper) for a in args]
    out = place.run(args, expect_ok=False)
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("tfnative: error: cannot write ")]
    assert len(errors) == 1 and args[args.index("--gdb-log") + 1] in errors[0], out.describe()
    assert "1" not in out.stdout.split()  # the script never ran
    assert_released(sleeper)


# -- the examples: attach's breakpoints, its output and its numbers -------------------------------------

def _one_error(out: Outcome, *words: str) -> str:
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("tfnative: error: ")]
    assert len(errors) == 1, out.describe()
    for w in words:
        assert w in errors[0], out.describe()
    return errors[0]


def test_a_breakpoint_gdb_cannot_insert_ends_the_session(place: Place) -> None:
    """``--break '*0'``: gdb accepts it, then cannot insert it at the first resume: the script stayed traced
    and the session waited forever.  Now: one line naming it, the script ended before it ran."""
    out = place.run(["attach", "--break", "*0", place.ok], expect_ok=False, timeout=60)
    _one_error(out, "*0", "cannot insert", "0x0")
    assert "1" not in out.stdout.split()
    assert out.seconds < 30, out.describe()


def test_a_breakpoint_gdb_cannot_insert_lets_a_pid_go(place: Place, sleeper: int) -> None:
    out = place.run(["attach", "--pid", str(sleeper), "--break", "*0x10"], expect_ok=False, timeout=60)
    _one_error(out, "*0x10", "cannot insert")
    assert_released(sleeper)
    os.kill(sleeper, 0)  # it runs on


@pytest.mark.parametrize("location, says", [
    ("$(touch %s)" % MARK, "not a location"),  # was: IndexError after 11 s
    ("main if 1", "Garbage"),
])
def test_a_location_gdb_refuses_is_one_line(location: str, says: str, place: Place) -> None:
    out = place.run(["attach", "--break", location, place.ok], expect_ok=False)
    _one_error(out, location, says)
    assert "1" not in out.stdout.split()


def test_a_dash_location_is_a_location_not_an_mi_option(place: Place) -> None:
    """``--break -foo`` is a function gdb never finds (not ``-break-insert``'s option): the script runs."""
    out = place.run(["attach", "--break", "-foo", "--break", 'x"y\\', place.ok], expect_ok=True)
    assert "1" in out.stdout.split()
    assert "breakpoint -foo never resolved" in out.stderr, out.describe()
    assert "Unknown option" not in out.stderr and "warning" not in out.stderr, out.describe()


@pytest.mark.parametrize("args, option", [
    (["attach", "--break", "", "{ok}"], "--break"),  # was: exit 0, "breakpoint  hit"
    (["attach", "--break", " ", "{ok}"], "--break"),
    (["attach", "--break-op", "", "{ok}"], "--break-op"),
    (["attach", "--json", "", "{ok}"], "--json"),  # was: accepted
    (["attach", "--gdb-log", "", "{ok}"], "--gdb-log"),
    (["attach", "--timeout", "nan", "{ok}"], "--timeout"),  # was: accepted
    (["attach", "--timeout", "inf", "{ok}"], "--timeout"),
    (["attach", "--timeout", "-1", "{ok}"], "--timeout"),
    (["stack", "--pid", NO_PID, "--samples", "2", "--interval", "nan"], "--interval"),
    (["merge", "{doc}", "--json", ""], "--json"),
    (["core", "{core}", "--json", ""], "--json"),
    (["report", "--core", "{core}", "-o", ""], "--output"),
])
def test_empty_and_not_finite_values_are_usage_errors(args: List[str], option: str, place: Place) -> None:
    args = [a.format(ok=place.ok, doc=place.doc, core=place.core) for a in args]
    out = place.run(args, expect_ok=False)
    assert out.returncode == 2, out.describe()
    assert "1" not in out.stdout.split() and "hit" not in out.stderr, out.describe()
    assert "'%s'" % option in out.stderr or "%s needs" % option in out.stderr, out.describe()


def test_attach_json_into_a_full_disk(place: Place) -> None:
    """``attach --json /dev/full``: an OSError (exit 70) after the session; now the one line (merge's and
    core's are in ``test_unwritable_outputs_are_one_line``)."""
    out = place.run(["attach", "--json", "/dev/full", place.ok], expect_ok=False)
    _one_error(out, "cannot write /dev/full: No space left on device")


def test_a_newline_in_a_path_stays_on_the_error_line(place: Place) -> None:
    out = place.run(["merge", place.doc, "--json", "/no/such\ndir/x.json"], expect_ok=False)
    line = _one_error(out, "cannot write /no/such\\ndir/x.json")
    assert len([ln for ln in out.stderr.splitlines() if ln.strip()]) == 1, out.describe()
    assert "\\n" in line


def test_an_interrupted_fifo_reader_is_bounded(place: Place) -> None:
    """A FIFO nobody opens is waited for a bounded time (``files.FIFO_WAIT_S``), then one line; here the
    run is interrupted first (SIGINT): it ends at once, nothing left."""
    fifo = os.path.join(place.root, "lonely")
    os.mkfifo(fifo)
    try:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(import_paths()))
        proc = subprocess.Popen([*TFNATIVE, "merge", place.doc, "--json", fifo], cwd=ROOT,
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # Interrupted once it waits for the FIFO's reader (asleep between two opens), not while it still starts
        # up: under load that takes more than a second, and a Ctrl-C then is Python's own KeyboardInterrupt.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with open("/proc/%d/syscall" % proc.pid) as f:
                    if f.read().split(" ", 1)[0] in ("35", "230"):  # nanosleep, clock_nanosleep: time.sleep
                        break
            except OSError:
                pass
            time.sleep(0.05)
        time.sleep(0.2)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        assert proc.returncode == 130, err
        assert b"Traceback" not in err
    finally:
        os.unlink(fifo)


@pytest.fixture
def small_disk(tmp_path: os.PathLike[str]) -> Iterator[str]:
    """A 16 kB tmpfs (root only; skipped where mounting is not allowed): a disk that fills up mid-write."""
    where = os.path.join(str(tmp_path), "small")
    os.mkdir(where)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", where], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=30)
    if r.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here: %s" % r.stderr.strip())
    try:
        yield where
    finally:
        subprocess.run(["umount", where], capture_output=True, stdin=subprocess.DEVNULL, timeout=30)


def test_a_disk_that_fills_up(place: Place, small_disk: str) -> None:
    """ENOSPC from a real filesystem: an output is one line and leaves no temporary file; gdb's log stops with a
    warning and the session goes on."""
    filler = os.path.join(small_disk, "filler")
    with open(filler, "wb") as f:
        try:
            f.write(b"x" * (1 << 20))
        except OSError:
            pass  # full
    out = place.run(["merge", place.doc, "--html", os.path.join(small_disk, "page.html")], expect_ok=False)
    _one_error(out, "cannot write %s/page.html: No space left on device" % small_disk)
    assert os.listdir(small_disk) == ["filler"]
    with open(filler, "rb+") as f:
        f.truncate(os.path.getsize(filler) - 4096)  # a page: room for the log's first lines, not for all of it
    out = place.run(["attach", "--gdb-log", os.path.join(small_disk, "gdb.log"), place.ok], expect_ok=True)
    assert "1" in out.stdout.split()
    assert "tfnative: warning: gdb's log %s/gdb.log stopped: No space left on device" % small_disk in out.stderr
